// Command api is the HTTP API behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/awsenv"
)

func main() {
	env, err := awsenv.Load(context.Background(), awsenv.Options{API: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "api: config:", err)
		os.Exit(1)
	}
	lambda.Start(env.APIHandler())
}
