// Command cleanup removes dead device tokens and suppresses dead addresses.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/pipeline"
)

func main() {
	err := awsenv.StartSQS(awsenv.Options{}, func(e *awsenv.Env, _ string) pipeline.Handler { return e.Pipeline.Cleanup() }) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "cleanup:", err)
	os.Exit(1)
}
