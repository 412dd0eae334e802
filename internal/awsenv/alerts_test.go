package awsenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/config"
	"herald/internal/netguard"
	"herald/internal/notify"
	"herald/internal/slack"
)

// TestAlertsHandler: the alerts function posts a dead letter from its EventBridge envelope
// (events/alerts), folds the next ones of the queue within the minute into the post after it,
// counts a post Slack refuses without failing, and refuses an event that is not Herald's.
func TestAlertsHandler(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posts []string
	status := http.StatusOK
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		posts = append(posts, string(b))
		w.WriteHeader(status)
	}))
	defer hook.Close()
	cfg := config.Dev()
	cfg.Alerts.Slack = config.SlackAlerts{WebhookURL: hook.URL + "/services/T/B/secret", ConsoleURL: "https://herald.example.com"}
	a, err := newAlerts(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	a.Metrics = &emf{w: &metrics, env: "test", now: time.Now}
	// The deployed function's client (its webhook from the secret) refuses the loopback hook
	// (netguard): a webhook on a private or metadata address is never posted to.
	a.Client = &http.Client{Transport: netguard.Policy{}.Transport()}
	raw0, _ := os.ReadFile("../../events/alerts/eventbridge-message-dead-lettered.json")
	var ev0 events.EventBridgeEvent
	if err := json.Unmarshal(raw0, &ev0); err != nil {
		t.Fatal(err)
	}
	a.Now = func() time.Time { return time.Unix(1, 0) }
	if err := a.Handle(t.Context(), ev0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(posts) != 0 {
		t.Fatalf("the default client posted to a loopback webhook: %v", posts)
	}
	mu.Unlock()
	if !strings.Contains(metrics.String(), "SlackPostsFailed") {
		t.Fatalf("the refused post was not counted: %s", metrics.String())
	}
	metrics.Reset()
	// The rest talks to the test's hook.
	a.Client, a.Folder = hook.Client(), &slack.Folder{}
	now := time.Unix(1000, 0)
	a.Now = func() time.Time { return now }

	raw, err := os.ReadFile("../../events/alerts/eventbridge-message-dead-lettered.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.EventBridgeEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for range 3 { // one post, two folded
		if err := a.Handle(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(slack.Window)
	if err := a.Handle(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]string(nil), posts...)
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d posts, want 2: %v", len(got), got)
	}
	for _, want := range []string{"Message dead-lettered on `send-realtime`", "send: body is not a send batch",
		"https://herald.example.com/console#/queues/send-realtime"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("post lacks %q: %s", want, got[0])
		}
	}
	if !strings.Contains(got[1], "and 2 more in the last minute") {
		t.Errorf("second post does not carry the folded count: %s", got[1])
	}

	status = http.StatusInternalServerError
	now = now.Add(slack.Window)
	if err := a.Handle(t.Context(), ev); err != nil {
		t.Fatalf("a failed post failed the invocation: %v", err)
	}
	for _, m := range []string{`"SlackPosts":1`, `"SlackPostsFolded":1`, `"SlackPostsFailed":1`} {
		if !strings.Contains(metrics.String(), m) {
			t.Errorf("metrics lack %s:\n%s", m, metrics.String())
		}
	}

	mu.Lock()
	before := len(posts)
	mu.Unlock()
	wrong := ev
	wrong.DetailType = "Campaign Finished" // a dead-letter detail under another title
	if err := a.Handle(t.Context(), wrong); !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("a detail under another detail-type: %v, want invalid", err)
	}
	mu.Lock()
	if len(posts) != before {
		t.Fatalf("a detail under another detail-type was posted")
	}
	mu.Unlock()
	ev.Source = "aws.s3"
	if err := a.Handle(t.Context(), ev); !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("an event from elsewhere: %v, want invalid", err)
	}
}

func TestAlertsNeedAWebhook(t *testing.T) {
	t.Parallel()
	if _, err := newAlerts(context.Background(), config.Dev(), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "alerts.slack.webhook_url_secret") {
		t.Fatalf("err = %v", err)
	}
}

// TestAlertsRefuseLambdaSamples: the alerts function, invoked as Lambda would with each of
// aws-lambda-go's sample events (events/testdata, from the module cache), fails every one and
// posts nothing: none is a Herald operator event.
func TestAlertsRefuseLambdaSamples(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posts.Add(1) }))
	defer hook.Close()
	cfg := config.Dev()
	cfg.Alerts.Slack = config.SlackAlerts{WebhookURL: hook.URL + "/services/T/B/secret"}
	a, err := newAlerts(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go in the module cache: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "*.json"))
	if len(files) < 50 {
		t.Fatalf("%d sample events, want aws-lambda-go's", len(files))
	}
	h := lambda.NewHandler(a.Handle)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := h.Invoke(t.Context(), raw); err == nil {
			t.Errorf("alerts acknowledged %s: %s", filepath.Base(f), out)
		}
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("%d posts for events that are not Herald's", n)
	}
}
