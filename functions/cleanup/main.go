// Command cleanup removes dead device tokens and suppresses dead addresses.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	env, err := awsenv.Load(context.Background(), awsenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cleanup: config:", err)
		os.Exit(1)
	}
	lambda.Start(env.SQSHandler(func(queue string) pipeline.Handler { return env.Pipeline.Cleanup() }))
}
