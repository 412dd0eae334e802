// Command ingest consumes every service's ingest queue: validate, dedupe, store, then schedule or fan out.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{}, func(e *awsenv.Env, queue string) pipeline.Handler { return e.IngestStage(queue) }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "ingest:", err)
	os.Exit(1)
}
