// Command record finalizes notification status from the counters (realtime and bulk queues).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Record() }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "record:", err)
	os.Exit(1)
}
