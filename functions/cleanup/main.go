// Command cleanup removes dead device tokens and suppresses dead addresses.
package main

import (
	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("cleanup", awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Cleanup() })
}
