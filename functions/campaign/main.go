// Command campaign runs the campaign state machine's steps (CheckWindow, FetchPage, SaveCursor).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartCampaign() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "campaign:", err)
	os.Exit(1)
}
