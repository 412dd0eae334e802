// Command herald is Herald's CLI: `herald dev` runs the whole stack as one local process,
// `herald send` sends a notification through a running API, `herald bench` measures throughput.
package main

import (
	"fmt"
	"os"
)

const usage = `herald — notifications you can trust

Usage:
  herald dev   [--addr 127.0.0.1:8080] [--data ./.herald] [--config herald.yaml]
  herald send  [--api URL] [--key KEY] --to user:ID|email:ADDR|phone:E164|fcm:TOKEN|apns:TOKEN[,…]
               [--channels push,inbox] [--title T] --body B [--idempotency-key K] [--wait]
  herald dlq   [show QUEUE | redrive QUEUE]      queue depths, dead letters (masked), redrive
  herald schedules rearm [--api URL] [--sigv4]    arm every reserved send's schedule again from the tables
  herald campaign create [--app default | --lists L1,L2] [--title T] --body B [--send-at RFC3339] [--max-rate N]
  herald campaign watch ID                        live progress until the campaign ends
  herald audience upload LIST FILE                append a file of user ids (one per line, or CSV) to a list
  herald audience show LIST                       how many members a list has
  herald bench [--recipients 100000]
  herald bench campaign [--devices 300000]        campaign wall time, real-time latency, writes per recipient

Run "herald <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dev":
		err = runDev(os.Args[2:])
	case "send":
		err = runSend(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	case "dlq":
		err = runDLQ(os.Args[2:])
	case "schedules":
		err = runSchedules(os.Args[2:])
	case "campaign":
		err = runCampaign(os.Args[2:])
	case "audience":
		err = runAudience(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "herald: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "herald %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
