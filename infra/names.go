package main

import (
	"crypto/sha256"
	"encoding/hex"
)

// Physical names are herald-<env>-<logical name>, as the runtime expects. An env name may be 40
// characters (internal/config), and AWS caps names per service; every name this stack generates
// fits for any env name the config accepts:
//
//   - names the runtime derives itself — queues, tables, the schedule group — are short enough
//     by construction, except an ingest queue of a long service name, which checkDeployable
//     refuses at synth naming the service (SQS allows 80 characters);
//   - names only the stack knows — functions, their roles, the lists bucket — are shortened
//     with fit when they would not fit (TestNamesWithinLimits synthesizes a 40-character env).
const (
	maxBucketName   = 63 // S3
	maxQueueName    = 80 // SQS
	maxFunctionName = 64 // Lambda
	maxRoleName     = 64 // IAM
	// maxRegionName is the longest region name planned for (ap-southeast-2 has 14): an
	// environment-agnostic stack learns its region only at deploy time.
	maxRegionName = 16
)

// fit returns name when it has at most max characters, else its first max-9 characters, a dash
// and 8 hex digits of its SHA-256: stable from one synth to the next, and two long names that
// differ only past the cut still differ.
func fit(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:max-9] + "-" + hex.EncodeToString(sum[:])[:8]
}

// functionName is function name's physical name (its log group is /aws/lambda/<that>).
func (h *herald) functionName(name string) string { return fit(h.name(name), maxFunctionName) }
