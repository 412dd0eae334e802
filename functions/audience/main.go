// Command audience imports uploaded audience lists: S3 ObjectCreated events for
// lists/<service>/<list id> arrive through the audience queue, and each object is streamed into
// the DynamoDB store's list once (internal/audience.Importer, on internal/s3 and internal/ddb).
package main

import (
	"fmt"
	"os"

	"herald/internal/awsenv"
)

func main() {
	err := awsenv.StartAudience() // returns only if the configuration is wrong
	fmt.Fprintln(os.Stderr, "audience:", err)
	os.Exit(1)
}
