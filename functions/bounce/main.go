// Command bounce turns SES bounce and complaint notifications (SES → SNS → SQS) into suppressions.
package main

import (
	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("bounce", awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Bounce() })
}
