// Command admin serves the operator routes (/v1/admin/…) behind API Gateway (HTTP API, payload
// 2.0): the same handler as api, limited to those routes, under a role that alone may inspect
// and redrive dead letters.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartAdmin() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "admin:", err)
	os.Exit(1)
}
