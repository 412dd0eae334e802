package run_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"herald/internal/stackbox/run"
)

// TestStackInABox runs the synthesized dev template on this machine (run's package doc says
// what is emulated) and plays the scenarios a deployment must pass, then proves every AWS call
// against the template's IAM. `make e2e-aws` builds the functions, synthesizes the template and
// sets the environment this test reads:
//
//	HERALD_STACKBOX_TEMPLATE  the synthesized template (its directory is the cloud assembly)
//	HERALD_STACKBOX_BIN       <name>/bootstrap per function, built for this machine
//	HERALD_STACKBOX_CONFIG    herald.yaml for the functions when the template has no assembly
//	HERALD_DYNAMODB_ENDPOINT  DynamoDB Local
//	HERALD_RIE                aws-lambda-rie
//	HERALD_ASL_VALIDATOR      scripts/asl-validate.sh (optional)
func TestStackInABox(t *testing.T) {
	tmpl, bin := os.Getenv("HERALD_STACKBOX_TEMPLATE"), os.Getenv("HERALD_STACKBOX_BIN")
	ddb, rie := os.Getenv("HERALD_DYNAMODB_ENDPOINT"), os.Getenv("HERALD_RIE")
	if tmpl == "" || bin == "" || ddb == "" || rie == "" {
		t.Skip("the stack in a box needs a synthesized template, host-built functions, DynamoDB Local and aws-lambda-rie: `make e2e-aws` runs it")
	}
	started := time.Now()
	logs := &lockedBuffer{mu: make(chan struct{}, 1)}
	box, err := run.Start(context.Background(), run.Options{
		Template: tmpl, Assembly: filepath.Dir(tmpl), ConfigFile: os.Getenv("HERALD_STACKBOX_CONFIG"),
		BinDir: bin, RIE: rie, DynamoDB: ddb, ASLValidator: os.Getenv("HERALD_ASL_VALIDATOR"),
		Log: logs,
	})
	if err != nil {
		t.Fatalf("start the box: %v", err)
	}
	defer box.Close()
	theBox = box
	t.Logf("box started in %s: %d functions, %d queues, %d tables, API at %s", time.Since(started).Round(time.Millisecond),
		len(box.Functions), len(box.Queues), len(box.Tables), box.API.URL)
	defer func() {
		if t.Failed() {
			t.Logf("box logs (tail):\n%s", logs.tail(200))
			t.Logf("the send function (last 150 lines):\n%s", logs.sends(150))
			t.Logf("box warnings and errors (last 60):\n%s", logs.troubles(60))
		}
	}()

	s := newScenarios(t, box)
	for _, sc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"transactional send through the API, signed as a service", s.transactionalSend},
		{"a producer sends straight to its ingest queue", s.producerQueue},
		{"a reserved send rescheduled (PATCH), then fired", s.reservedRescheduled},
		{"a 5,000-device campaign paused, resumed and completed", s.campaign},
		{"an SES bounce through SNS and SQS suppresses the next send", s.bounce},
		{"a marketing email's one-click unsubscribe through the public route opts its user out", s.unsubscribe},
		{"a user erased through the api function: nothing of them left, the next send finds no address", s.erase},
		{"a poison message dead-lettered, redriven, then purged by the admin routes", s.poison},
		{"a message forged onto another service's queue is refused", s.forged},
		{"a list forged under another service's prefix is refused", s.forgedUpload},
		{"another service's ingest queue purged, drained, re-policed: refused", s.purgeOtherQueue},
		{"a schedule of a foreign group cannot fire as Herald's scheduler role", s.foreignSchedule},
		{"an audit entry updated or deleted by the api role is refused", s.auditTampered},
		{"a campaign fails and the operator hears of it", s.failedCampaignAlert},
		{"a reserved send and a reserved campaign moved in the console are honoured", s.consoleMoves},
		{"an operator cancels a reserved send and a campaign from the console, with a JWT", s.operatorConsole},
		{"an operator pauses a queue's consumers; a send waits until they resume", s.pauseQueue},
		{"the Go producer client, signed as its service and sending as its producer", s.goClient},
		{"the TypeScript producer client, signed as its service and sending as its producer", s.tsClient},
	} {
		if only := os.Getenv("HERALD_STACKBOX_ONLY"); only != "" && !strings.Contains(sc.name, only) {
			continue
		}
		t0 := time.Now()
		deniedBefore = map[string]bool{}
		for _, c := range box.Denied() {
			deniedBefore[c.String()] = true
		}
		ok := t.Run(sc.name, sc.fn)
		result := "PASS"
		if !ok {
			result = "FAIL"
		}
		fmt.Printf("scenario: %-70s %s (%s)\n", sc.name, result, time.Since(t0).Round(time.Millisecond))
	}

	var allow []run.AllowEntry
	if p := os.Getenv("HERALD_STACKBOX_ALLOWLIST"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			t.Fatalf("the IAM allowlist: %v", err)
		}
		allow, err = run.ParseAllowlist(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	summary := box.Summary(allow)
	fmt.Print(summary)
	if d := box.Denied(); len(d) > 0 {
		t.Errorf("iam: %d calls of the stack were denied (listed above): the template must grant them", len(d))
	}
	if os.Getenv("HERALD_STACKBOX_ALLOWLIST") != "" && os.Getenv("HERALD_STACKBOX_ONLY") == "" {
		if unused, _, stale := box.UnusedReport(allow); len(unused) > 0 || len(stale) > 0 {
			t.Errorf("iam: %d grants never used and not in the allowlist, %d stale allowlist lines (listed above): "+
				"exercise each grant in a scenario, drop it from the template, or explain it in the allowlist", len(unused), len(stale))
		}
	}
	t.Logf("instances started: %v", box.Instances())
	t.Logf("stack in a box: %s in all", time.Since(started).Round(time.Millisecond))
}

type scenarios struct {
	t   *testing.T
	box *run.Box
	// service is the orders service's caller on the API: a principal in its iam_principals.
	service string
	// producer sends to the orders ingest queue: a principal the queue's policy allows (newer
	// templates, fromPolicy), else the service's iam_principals, whose own account grants the
	// send.
	producer   string
	fromPolicy bool
}

// newScenarios picks the orders service's principals from herald.yaml and the ingest queue's
// policy.
func newScenarios(t *testing.T, box *run.Box) *scenarios {
	s := &scenarios{t: t, box: box}
	configured := box.ServicePrincipals("orders")
	if len(configured) == 0 {
		t.Fatal("the orders service has no iam_principals in herald.yaml: nothing may call the API's IAM routes as it")
	}
	s.service, s.producer = configured[0], configured[0]
	if ps := box.QueuePolicyProducers(box.Queue("ingest-orders").ARN); len(ps) > 0 {
		s.producer, s.fromPolicy = ps[0], true
		for _, p := range ps {
			if slices.Contains(configured, p) {
				s.producer = p
			}
		}
	}
	box.AddProducer(s.service)
	box.AddProducer(s.producer)
	t.Logf("orders calls the API as %s and sends to its queue as %s (named by the queue policy: %v)", s.service, s.producer, s.fromPolicy)
	return s
}

// call sends a request to the box's API, SigV4-signed as principal ("" for unsigned) or with
// a bearer token.
func (s *scenarios) call(t *testing.T, principal, bearer, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, s.box.API.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if principal != "" {
		cfg := s.box.AWSConfig(principal)
		creds, _ := cfg.Credentials.Retrieve(context.Background())
		h := sha256.Sum256(raw)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(h[:]), "execute-api", run.Region, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{"raw": string(b)}
	}
	return resp.StatusCode, out
}

func (s *scenarios) mustCall(t *testing.T, want int, method, path string, body any) map[string]any {
	t.Helper()
	code, out := s.call(t, s.service, "", method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

// theBox is the running box, for waitFor; deniedBefore are the calls denied before the
// current scenario.
var (
	theBox       *run.Box
	deniedBefore map[string]bool
)

// waitFor polls cond every 250ms until it holds or d passes. A call of the stack that IAM
// denied during the scenario (not one of an earlier scenario's retries) ends the wait at once:
// what waits on it may never happen.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		for _, c := range theBox.Denied() {
			if !deniedBefore[c.String()] {
				t.Fatalf("%s: IAM denied %s: %s", what, c, c.Reason)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s (last: %s)", what, d, last)
}

func (s *scenarios) notificationStatus(t *testing.T, id string) (string, map[string]any) {
	code, out := s.call(t, s.service, "", "GET", "/v1/notifications/"+id, nil)
	if code != 200 {
		return fmt.Sprintf("HTTP %d", code), out
	}
	st, _ := out["status"].(string)
	return st, out
}

func (s *scenarios) transactionalSend(t *testing.T) {
	if code, out := s.call(t, "", "", "GET", "/healthz", nil); code != 200 {
		t.Fatalf("healthz: %d %v", code, out)
	}
	if code, _ := s.call(t, "", "", "POST", "/v1/notifications", map[string]any{}); code != http.StatusForbidden {
		t.Fatalf("an unsigned send: %d, want 403 from the IAM route", code)
	}
	token := "fcm-stackbox-alice-phone"
	s.mustCall(t, 200, "PUT", "/v1/users/alice/devices/"+token, map[string]any{"platform": "fcm"})
	out := s.mustCall(t, 202, "POST", "/v1/notifications", map[string]any{
		"idempotency_key": "stackbox-order-1", "channels": []string{"push", "inbox"},
		"content":    map[string]any{"title": "Your order shipped", "body": "Order #1 is on its way."},
		"recipients": []any{map[string]any{"user_id": "alice"}},
	})
	id, _ := out["id"].(string)
	waitFor(t, 60*time.Second, "notification "+id+" SENT", func() (bool, string) {
		st, v := s.notificationStatus(t, id)
		return st == "SENT", fmt.Sprint(v)
	})
	if n := len(s.box.Sandbox.Recorder.List("fcm", token)); n != 1 {
		t.Fatalf("the sandbox got %d pushes for %s, want 1", n, token)
	}
	code, inbox := s.call(t, "", s.box.API.Token("alice", time.Hour), "GET", "/v1/users/alice/inbox", nil)
	if code != 200 || !strings.Contains(fmt.Sprint(inbox), "Your order shipped") {
		t.Fatalf("alice's inbox with her JWT: %d %v", code, inbox)
	}
	if code, _ := s.call(t, "", s.box.API.Token("bob", time.Hour), "GET", "/v1/users/alice/inbox", nil); code != http.StatusForbidden {
		t.Fatalf("bob's JWT on alice's inbox: %d, want 403", code)
	}
	// The bell icon: the unread count, marking the item read, deleting it (the api function's
	// reads and writes of the inbox-items table).
	alice := s.box.API.Token("alice", time.Hour)
	unread := func() string {
		code, v := s.call(t, "", alice, "GET", "/v1/users/alice/inbox/unread-count", nil)
		if code != 200 {
			t.Fatalf("alice's unread count: %d %v", code, v)
		}
		return fmt.Sprint(v["unread"])
	}
	if got := unread(); got != "1" {
		t.Fatalf("alice's unread count = %s, want 1", got)
	}
	if code, v := s.call(t, "", alice, "POST", "/v1/users/alice/inbox/"+id+"/read", nil); code/100 != 2 {
		t.Fatalf("alice marks %s read: %d %v", id, code, v)
	}
	if got := unread(); got != "0" {
		t.Fatalf("alice's unread count after marking read = %s, want 0", got)
	}
	if code, v := s.call(t, "", alice, "DELETE", "/v1/users/alice/inbox/"+id, nil); code/100 != 2 {
		t.Fatalf("alice deletes %s: %d %v", id, code, v)
	}
	if code, inbox := s.call(t, "", alice, "GET", "/v1/users/alice/inbox", nil); code != 200 || strings.Contains(fmt.Sprint(inbox), "Your order shipped") {
		t.Fatalf("alice's inbox after the delete: %d %v", code, inbox)
	}

	// A push the provider throttles once leaves the express path: ingest hands its delivery to
	// the deliveries table and the send queue, and send and record finish it — the grants of
	// that hand-over are exercised here.
	throttled := "fcm-stackbox-dave-x-throttle1"
	s.mustCall(t, 200, "PUT", "/v1/users/dave/devices/"+throttled, map[string]any{"platform": "fcm"})
	out = s.mustCall(t, 202, "POST", "/v1/notifications", map[string]any{
		"idempotency_key": "stackbox-order-2", "channels": []string{"push"},
		"content":    map[string]any{"title": "Your order shipped", "body": "Order #2 is on its way."},
		"recipients": []any{map[string]any{"user_id": "dave"}},
	})
	id, _ = out["id"].(string)
	v := s.waitStatus(t, id, "SENT", 60*time.Second)
	if n := len(s.box.Sandbox.Recorder.List("fcm", throttled)); n != 1 {
		t.Fatalf("the sandbox got %d pushes for %s, want 1 (after one throttled attempt): %v", n, throttled, v)
	}
	sent := false
	for _, c := range s.box.Calls() {
		sent = sent || (strings.HasSuffix(c.Caller, "ingest") && c.Request.Action == "sqs:SendMessage" &&
			strings.HasSuffix(c.Request.Resource, "herald-dev-send-realtime") && c.Allowed)
	}
	if !sent {
		t.Fatal("ingest never handed the throttled push to send-realtime")
	}
}

type lockedBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (l *lockedBuffer) lock() { l.mu <- struct{}{} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.lock()
	defer func() { <-l.mu }()
	if os.Getenv("HERALD_STACKBOX_VERBOSE") != "" {
		os.Stderr.Write(p)
	}
	return l.buf.Write(p)
}

// troubles is the last n lines that report a warning, an error, a function error or a timeout:
// after a failure, what most likely explains it. The functions log JSON, the box itself text.
func (l *lockedBuffer) troubles(n int) string {
	return l.lines(n, func(line string) bool {
		return strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) ||
			strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
			strings.Contains(line, "errorType") || strings.Contains(line, "Task timed out")
	})
}

// sends is the send function's own lines (its log lines and invocations, not its metrics): the
// last n.
func (l *lockedBuffer) sends(n int) string {
	return l.lines(n, func(line string) bool {
		return strings.Contains(line, "herald-dev-send |") && !strings.Contains(line, `"_aws"`)
	})
}

// lines is the last n lines that keep selects.
func (l *lockedBuffer) lines(n int, keep func(string) bool) string {
	l.lock()
	defer func() { <-l.mu }()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		if keep(line) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

func (l *lockedBuffer) tail(n int) string {
	l.lock()
	defer func() { <-l.mu }()
	lines := strings.Split(l.buf.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
