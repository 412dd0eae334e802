// Command ingest consumes every service's ingest queue: validate, dedupe, store, then schedule or fan out.
package main

import (
	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	awsenv.StartSQS("ingest", awsenv.Options{}, func(e *awsenv.Env, queue string) pipeline.Handler { return e.IngestStage(queue) })
}
