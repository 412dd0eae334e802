// Command export builds export files: each message on the export queue names a job, whose rows
// it streams into a multipart upload in the exports bucket, completed only once whole.
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartExport() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "export:", err)
	os.Exit(1)
}
