// Command ingest consumes every service's ingest queue: validate, dedupe, store, then schedule
// or fan out — or send a small realtime notification itself (the express path); a reserved fire
// for a campaign starts the campaign's state machine execution.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
	"herald/internal/awsenv/provider"
)

func main() {
	err := awsenv.StartIngest(provider.Senders) // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "ingest:", err)
	os.Exit(1)
}
