// Command record finalizes notification status from the counters (realtime and bulk queues).
package main

import (
	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("record", awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Record() })
}
