// Command ingest consumes every service's ingest queue: validate, dedupe, store, then schedule or
// fan out; a reserved fire for a campaign starts the campaign's state machine execution.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartIngest() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "ingest:", err)
	os.Exit(1)
}
