// Command prepare resolves a chunk of recipients into deliveries and send batches (realtime and bulk queues).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Prepare() }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "prepare:", err)
	os.Exit(1)
}
