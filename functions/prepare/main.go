// Command prepare resolves a chunk of recipients into deliveries and send batches (realtime and bulk queues).
package main

import (
	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("prepare", awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Prepare() })
}
