// Command herald is Herald's CLI: `herald dev` runs the whole stack as one local process; `herald
// send`, `dlq`, `campaign`, `audience`, `template`, `schedules` and `audit` talk to a running API;
// `herald bench` measures throughput.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"herald/internal/heapfloor"
)

const usage = `herald — notifications you can trust

Usage:
  herald dev   [--addr 127.0.0.1:8080] [--data ./.herald] [--config herald.yaml]
  herald send  --to user:ID|email:ADDR|phone:E164|fcm:TOKEN|apns:TOKEN[,…]
               [--channels push,inbox] [--title T] --body B [--idempotency-key K] [--wait]
  herald dlq   [show QUEUE [--json] | redrive QUEUE]   queue depths, dead letters (masked), redrive
  herald schedules rearm [--sigv4]                 arm every reserved send's schedule again from the tables
  herald audit [--actor S] [--action A] [--target TYPE:ID] [--since 24h]
                                                  who did what: the operator audit log, newest first
  herald export create --kind deliveries --notification ID | --kind notifications|suppressions|audit
  herald export list | show ID | download ID      report files: a notification's deliveries, a service's
                                                  notifications, suppressions (masked), the audit log
  herald campaign create [--app default | --lists L1,L2] [--title T] --body B [--send-at RFC3339] [--max-rate N]
  herald campaign watch ID                        progress until the campaign ends
  herald audience upload LIST FILE                append a file of user ids (one per line, or CSV) to a list
  herald audience show LIST                       how many members a list has
  herald webpush keys [--json]                    generate a VAPID key pair for providers.webpush
  herald inbox migrate --env NAME                 copy a deployment's inbox into its inbox-items table (AWS credentials)
  herald template put NAME FILE                   store a template (JSON) as its next version
  herald template show NAME [--version N]         print a stored template version
  herald template preview NAME --data JSON        render a template's channels and locales with data
  herald bench [--recipients 100000]
  herald bench campaign [--devices 300000]        campaign wall time, real-time latency, writes per recipient

Every command but dev, bench, webpush and inbox talks to a running Herald: --api URL (env HERALD_API, default
http://127.0.0.1:8080) and --key KEY (env HERALD_API_KEY, default dev-demo-key).

Exit codes: 0 success (and -h), 1 failure, 2 bad flags or arguments,
3 campaign watch saw the campaign end CANCELED or FAILED.

Run "herald <command> -h" for a command's flags.
`

var commands = map[string]command{
	"dev":       runDev,
	"send":      runSend,
	"dlq":       runDLQ,
	"campaign":  runCampaign,
	"audience":  runAudience,
	"template":  runTemplate,
	"schedules": runSchedules,
	"audit":     runAudit,
	"export":    runExport,
	"bench":     runBench,
	"webpush":   runWebPush,
	"inbox":     runInbox,
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "dev" || os.Args[1] == "bench") {
		runtime.GOMAXPROCS(localProcs(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)))
		if keepsHeapFloor(os.Args[1:], os.Getenv("GOGC")) {
			heapfloor.Keep(localHeapFloor)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// localProcs is how many Go threads run at once (GOMAXPROCS) in a process that holds the local
// runtime — the API, every stage, the SQLite writer and the sandbox — given the environment's
// GOMAXPROCS and the default procs: twice the default, unless the environment sets it. With as
// many as there are cores, a real-time request that wakes while a campaign keeps every one busy
// waits for Go's own preemption (10 ms slices); with twice as many, the kernel's scheduler,
// which favours a thread that was asleep, runs it at once. Measured on 2 cores (README,
// Benchmarks): real-time p99 during a 100,000-device campaign 18–21 ms instead of 28–40 ms, the
// campaign as fast.
func localProcs(env string, procs int) int {
	if env != "" {
		return procs
	}
	return 2 * procs
}

// localHeapFloor is the smallest heap goal of a process that holds the local runtime, unless the
// environment sets GOGC. Its live heap is small (about 20 MB during a large send) while it
// allocates about 2 GB per 100,000 pushes, so with Go's default goal it collected some twenty
// times a second. Measured on 2 cores (docs/benchmarks.md, "Large sends"): a 128 MiB floor took
// about 15 % of the CPU per push off both lanes, for 30–90 MB more resident memory.
const localHeapFloor = 128 << 20

// keepsHeapFloor reports whether the command args (dev or bench) holds localHeapFloor: not when
// the environment sets GOGC, nor for the export bench, which measures the heap an export holds
// and would see the garbage the floor lets wait, nor for the cost bench, which times the AWS
// runtime's handlers as the deployed functions run them, without a floor.
func keepsHeapFloor(args []string, gogc string) bool {
	return gogc == "" && !(len(args) > 1 && args[0] == "bench" && (args[1] == "export" || args[1] == "cost"))
}

// run is herald with args (without the program name); it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "herald: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	err := cmd(args[1:], stdout)
	code := exitCode(err)
	var ue usageError
	switch {
	case code == exitOK:
	case errors.As(err, &ue):
		name := ue.cmd
		if name == "" {
			name = args[0]
		}
		fmt.Fprintf(stderr, "herald %s: %v\nRun \"herald %s -h\" for usage.\n", name, err, name)
	default:
		fmt.Fprintf(stderr, "herald %s: %v\n", args[0], err)
	}
	return code
}
