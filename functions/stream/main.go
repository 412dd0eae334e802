// Command stream serves the live inbox WebSocket API: $connect (the user's JWT verified, the
// connection recorded), $disconnect, and resume messages answered from the inbox.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartStream() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "stream:", err)
	os.Exit(1)
}
