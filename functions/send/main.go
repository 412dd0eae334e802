// Command send delivers send batches through the providers (realtime and bulk queues).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/awsenv"
	"herald/internal/awsenv/provider"
	"herald/internal/pipeline"
)

func main() {
	env, err := awsenv.Load(context.Background(), awsenv.Options{Senders: provider.Senders})
	if err != nil {
		fmt.Fprintln(os.Stderr, "send: config:", err)
		os.Exit(1)
	}
	lambda.Start(env.SQSHandler(func(queue string) pipeline.Handler { return env.Pipeline.Send() }))
}
