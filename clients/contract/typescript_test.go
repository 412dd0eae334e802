package contract

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/awsenv/awsenvtest"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// tsDir is the TypeScript client's package.
const tsDir = "../typescript"

// nodeOrSkip is the node binary; without one the TypeScript half is skipped, saying so. make
// test builds the package first and sets HERALD_CONTRACT_TS=required, so there a missing build
// fails instead of skipping.
func nodeOrSkip(t *testing.T, what string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		fmt.Printf("contract: %-10s %-5s %-40s SKIP (no node on this machine: the TypeScript client needs Node 20)\n", "typescript", what, "every case")
		t.Skip("node is not installed: the TypeScript client's contract cases need Node 20 or later")
	}
	if _, err := os.Stat(filepath.Join(tsDir, "dist", "index.js")); err != nil {
		if os.Getenv("HERALD_CONTRACT_TS") == "required" {
			t.Fatalf("the TypeScript client is not built (%v): make test runs npm ci and npm run build in clients/typescript first", err)
		}
		t.Skip("the TypeScript client is not built: cd clients/typescript && npm ci && npm run build")
	}
	return node
}

// tsResult is one line the TypeScript contract script prints.
type tsResult struct {
	Case   string   `json:"case"`
	OK     bool     `json:"ok"`
	Detail string   `json:"detail"`
	IDs    []string `json:"ids"`
}

// runTS runs the TypeScript contract script in mode with env, and returns its results by case.
func runTS(t *testing.T, mode string, env ...string) map[string]tsResult {
	t.Helper()
	node := nodeOrSkip(t, mode)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "contract/contract.mjs", mode)
	cmd.Dir = tsDir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node contract/contract.mjs %s: %v\n%s\n%s", mode, err, raw, stderr.String())
	}
	out := map[string]tsResult{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r tsResult
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Case != "" {
			out[r.Case] = r
		}
	}
	return out
}

// TestContractTypeScriptHTTP runs the HTTP cases with the TypeScript client against `herald
// dev`'s runtime, and checks what Herald did: the pushes that went out, the 429 waited out.
func TestContractTypeScriptHTTP(t *testing.T) {
	rt := startLocal(t)
	u, _ := url.Parse(rt.URL)
	p := &throttleOnce{next: httputil.NewSingleHostReverseProxy(u)}
	front := httptest.NewServer(p)
	defer front.Close()
	got := runTS(t, "http", "HERALD_URL="+rt.URL, "HERALD_THROTTLED_URL="+front.URL, "HERALD_API_KEY=dev-demo-key", "HERALD_SERVICE=demo")
	checks := map[string]func(t *testing.T){
		"idempotent retry": func(t *testing.T) {
			time.Sleep(200 * time.Millisecond)
			id := notify.NotificationIDFor("demo", "ts-contract-order-1", time.Now())
			n := 0
			for _, d := range rt.Sandbox.Recorder.List("fcm", "fcm-contract-ts-jun-0001") {
				if d.CollapseID == id {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d pushes of %s after its retry, want 1", n, id)
			}
		},
		"429 backoff": func(t *testing.T) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.bodies) != 2 || p.bodies[0] != p.bodies[1] || p.again.Sub(p.hit) < time.Second {
				t.Fatalf("%d tries, %v apart; want 2 with one body, Retry-After (1 s) apart", len(p.bodies), p.again.Sub(p.hit))
			}
		},
	}
	for _, name := range []string{"send", "batch", "idempotent retry", "409 on key reuse", "400 with its field", "429 backoff"} {
		report(t, "typescript", "http", name, func(t *testing.T) {
			r, ok := got[name]
			if !ok {
				t.Fatalf("the script reported no %q", name)
			}
			if !r.OK {
				t.Fatal(r.Detail)
			}
			if c := checks[name]; c != nil {
				c(t)
			}
		})
	}
}

// TestContractTypeScriptSQS runs the SQS case with the TypeScript client against the AWS
// runtime, as TestContractGoSQS does with the Go client.
func TestContractTypeScriptSQS(t *testing.T) {
	w := awsenvtest.Setup(t) // its environment (the SQS endpoint, region, credentials) is the script's too
	e := w.Env
	ctx := context.Background()
	got := runTS(t, "sqs", "HERALD_QUEUE_URL="+w.URLBase+notify.IngestQueue("demo"), "HERALD_SERVICE=demo")
	report(t, "typescript", "sqs", "batch with one poison entry", func(t *testing.T) {
		r := got["sqs batch sent"]
		if !r.OK || len(r.IDs) != 3 {
			t.Fatalf("the script: %+v", r)
		}
		ev := w.Receive(notify.IngestQueue("demo"), 3)
		if len(ev.Records) != 3 {
			t.Fatalf("%d messages on the queue, want 3 (one a request)", len(ev.Records))
		}
		for _, rec := range ev.Records {
			if rec.MessageAttributes["herald-lane"].StringValue == nil || *rec.MessageAttributes["herald-lane"].StringValue != "realtime" {
				t.Fatalf("message %s without its lane: %+v", rec.MessageId, rec.MessageAttributes)
			}
		}
		res := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(e.IngestStage), ev)
		if len(res.BatchItemFailures) != 1 || !strings.Contains(bodyOf(ev, res.BatchItemFailures[0].ItemIdentifier), "ts-contract-sqs-poison") {
			t.Fatalf("ingest reported %v, want the poison message alone", awsenvtest.FailedIDs(res))
		}
		for _, i := range []int{0, 2} {
			if _, err := e.Store.GetNotification(ctx, r.IDs[i]); err != nil {
				t.Fatalf("request %d: %s not stored under the id the client answered: %v", i, r.IDs[i], err)
			}
		}
		dl := w.Receive(notify.DLQName(notify.IngestQueue("demo")), 1)
		if len(dl.Records) != 1 || !strings.Contains(dl.Records[0].Body, "ts-contract-sqs-poison") {
			t.Fatalf("dead letters %+v, want the poison one", dl.Records)
		}
		if code := dl.Records[0].MessageAttributes[pipeline.AttrErrorCode].StringValue; code == nil || *code != notify.EINVALID {
			t.Fatalf("dead letter code %v, want %s", code, notify.EINVALID)
		}
	})
}
