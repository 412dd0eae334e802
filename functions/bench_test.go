package functions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
)

var initRe = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// TestReportInitAndSize prints each function's init duration under the emulator and its binary
// size. It is a measurement, not a check: `make bench` runs it with HERALD_FUNCTION_BENCH=1.
func TestReportInitAndSize(t *testing.T) {
	if os.Getenv("HERALD_FUNCTION_BENCH") == "" {
		t.Skip("a measurement: `make bench` runs it (HERALD_FUNCTION_BENCH=1)")
	}
	if os.Getenv("HERALD_DYNAMODB_ENDPOINT") == "" || rie() == "" {
		t.Skip("needs aws-lambda-rie and DynamoDB Local")
	}
	awsenvtest.EventsDir = "../events/"
	w := awsenvtest.Setup(t)
	// The alerts function needs somewhere to post: the sandbox's Slack webhook, as in the RIE test.
	vars := map[string]string{}
	for k, v := range w.Vars {
		vars[k] = v
	}
	vars[awsenv.EnvConfig] += "alerts: {slack: {webhook_url: " + strconv.Quote(w.Sandbox.SlackWebhookURL()) + "}}\n"
	// What the other functions' environments name, as the RIE test gives them (none is called).
	vars["HERALD_AUDIENCE_BUCKET"], vars["HERALD_EXPORTS_BUCKET"] = "herald-test-lists", "herald-test-exports"
	vars[awsenv.EnvConnectionsTable], vars[awsenv.EnvWebSocketEndpoint] = "herald-test-connections", "http://127.0.0.1:9/live"
	vars[awsenv.EnvJWTIssuer], vars[awsenv.EnvJWTAudience] = "https://issuer.invalid", "app-client"
	w.Vars = vars
	entries, _ := os.ReadDir(binDir)
	fmt.Printf("\n  %-8s %10s %14s %14s %12s\n", "function", "init (ms)", "first call", "host binary", "arm64 binary")
	for _, e := range entries {
		name := e.Name()
		f := start(t, w, name)
		var d time.Duration
		if name == "api" || name == "admin" { // HTTP API functions
			_, d = invoke[events.APIGatewayV2HTTPResponse](f, events.APIGatewayV2HTTPRequest{
				Version: "2.0", RawPath: "/healthz", RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/healthz"}},
			})
		} else {
			_, d = invoke[events.SQSEventResponse](f, events.SQSEvent{Records: []events.SQSMessage{}})
		}
		time.Sleep(100 * time.Millisecond) // the emulator writes its INIT REPORT line asynchronously
		initMS := "?"
		if m := initRe.FindStringSubmatch(f.logs.String()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			initMS = fmt.Sprintf("%.1f", v)
		}
		host, arm := size(filepath.Join(binDir, name)), size(filepath.Join("..", "bin", "lambda", name, "bootstrap"))
		fmt.Printf("  %-8s %10s %14v %14s %12s\n", name, initMS, d.Round(time.Millisecond), host, arm)
	}
	fmt.Println("  (aims: init < 50 ms, binary < 20 MB; arm64 sizes are from `make build-lambda`)")
}

func size(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		return "-"
	}
	return fmt.Sprintf("%.1f MB", float64(st.Size())/1e6)
}
