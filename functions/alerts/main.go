// Command alerts posts Herald's operator events from the environment's EventBridge bus to Slack
// (internal/awsenv.Alerts).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartAlerts() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "alerts:", err)
	os.Exit(1)
}
