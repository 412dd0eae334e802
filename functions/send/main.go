// Command send delivers send batches through the providers (realtime and bulk queues).
package main

import (
	"herald/internal/awsenv"
	"herald/internal/awsenv/provider"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("send", awsenv.Options{Senders: provider.Senders}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Send() })
}
