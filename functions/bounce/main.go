// Command bounce turns SES bounce and complaint notifications (SES → SNS → SQS) into suppressions.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Bounce() }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "bounce:", err)
	os.Exit(1)
}
