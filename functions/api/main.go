// Command api is the HTTP API behind API Gateway (HTTP API, payload 2.0).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartAPI() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "api:", err)
	os.Exit(1)
}
