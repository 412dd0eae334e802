// Command send delivers send batches through the providers (realtime and bulk queues).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/awsenv/provider"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{Senders: provider.Senders}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Send() }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "send:", err)
	os.Exit(1)
}
