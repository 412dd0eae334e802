package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"herald/internal/cost"
)

// costBench runs the meter (internal/cost/costbench) and prints its bill. It is set only in a
// binary built with -tags costbench (bench_cost_meter.go, as make bench builds it): the meter
// runs the AWS handlers on in-repository fakes of SQS, EventBridge, Scheduler and Step
// Functions, which a shipped herald must not carry.
var costBench func(ctx context.Context, o costBenchOptions, out io.Writer) error

type costBenchOptions struct {
	DynamoDB       string
	Sends, Devices int
	Timeout        time.Duration
	Progress       io.Writer
	Prices         cost.Table
}

// runBenchCost is `herald bench cost`: the AWS bill per million recipients, measured by running
// the AWS runtime's stage handlers on DynamoDB Local and the in-repository fakes and counting
// every billable request (internal/cost/costbench), priced with internal/cost's table.
func runBenchCost(args []string, out io.Writer) error {
	fs := newFlagSet("bench cost", "[flags]", `
Runs single transactional sends (push + inbox, and push alone) produced to the ingest queue and
(push + inbox) through the HTTP API, the same with 10 requests a message and 10 a
POST /v1/notifications/batch, and a marketing campaign to --devices devices, through the
AWS runtime's handlers — on
DynamoDB Local, the SQS, EventBridge and Scheduler fakes and the sandbox's FCM — with the queues
polled as Lambda's event source mappings do and the campaign state machine's own definition run
in process; counts every billable request as AWS bills it (DynamoDB from the consumed capacity
it returns) and prints dollars per million recipients per AWS service, at the us-east-1 list
prices of internal/cost/prices.go. Needs DynamoDB Local: scripts/dynamodb-local.sh start prints
its endpoint (make bench starts and stops it).`)
	sends := fs.Int("sends", 500, "single-recipient transactional sends in each transactional scenario")
	devices := fs.Int("devices", 20000, "devices (one per user) the campaign reaches (four pages of 5,000)")
	endpoint := fs.String("dynamodb-endpoint", os.Getenv("HERALD_DYNAMODB_ENDPOINT"), "DynamoDB Local's URL (default $HERALD_DYNAMODB_ENDPOINT)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a scenario whose queues have not drained by then")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *sends < 1 || *devices < 1 {
		return usagef(fs, "--sends and --devices must be at least 1")
	}
	if *endpoint == "" {
		return usagef(fs, "--dynamodb-endpoint (or HERALD_DYNAMODB_ENDPOINT) is required: start DynamoDB Local with scripts/dynamodb-local.sh start")
	}
	if costBench == nil {
		return fmt.Errorf("this herald is built without the cost meter (it links the AWS fakes): build it with `go build -tags costbench ./cmd/herald`, or run `make bench`")
	}
	fmt.Fprintf(out, "herald bench cost: AWS requests per recipient through the AWS runtime's handlers (DynamoDB Local at %s), priced per million recipients\n", *endpoint)
	start := time.Now()
	if err := costBench(context.Background(), costBenchOptions{DynamoDB: *endpoint, Sends: *sends, Devices: *devices,
		Progress: prefixed{out, "  … "}, Timeout: *timeout, Prices: cost.USEast1}, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "(%v in all)\n", time.Since(start).Round(time.Second))
	return nil
}

// prefixed writes each write to w behind a prefix.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
