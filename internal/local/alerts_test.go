package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

// startAlerting runs a local Herald on cfg whose Slack alerts fold over window.
func startAlerting(t *testing.T, cfg *config.Config, window time.Duration) *env {
	t.Helper()
	cfg.Retry.Base = config.Duration(100 * time.Millisecond)
	cfg.Retry.Max = config.Duration(2 * time.Second)
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), SandboxInMemory: true, AlertFold: window})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return &env{t: t, rt: rt, log: &syncBuffer{}}
}

const (
	alertEmail = "slack-alice@example.com"
	alertPhone = "+15005550123"
	alertToken = "fcm-slack-secret-token-0001"
)

// poison puts a malformed message naming an email, a phone and a token on the ingest queue: the
// ingest stage refuses it (EINVALID) and the settle path dead-letters it.
func (e *env) poison(n int) {
	e.t.Helper()
	body := `{"channels": "push", "recipients": [{"email": "` + alertEmail + `", "phone": "` + alertPhone + `", "fcm_token": "` + alertToken + `"}]`
	for range n {
		if err := e.rt.Queue.Send(context.Background(), notify.IngestQueue("demo"), notify.OutMessage{Body: []byte(body)}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) deadLetters() int {
	msgs, err := e.rt.Queue.Peek(context.Background(), notify.DLQName(notify.IngestQueue("demo")), 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(msgs)
}

func noRawAddress(t *testing.T, posts []sandbox.SlackPost) {
	t.Helper()
	for _, p := range posts {
		for _, raw := range []string{alertEmail, "slack-alice", alertPhone, "5005550123", alertToken, "slack-secret"} {
			if strings.Contains(string(p.Body), raw) {
				t.Errorf("post %d holds %q: %s", p.Seq, raw, p.Body)
			}
		}
	}
}

// TestDeadLetterIsPostedToSlack: a poison message is dead-lettered and the sandbox's Slack
// webhook records exactly one post naming the queue and the reason, linking to the console's
// dead letters, with no raw address, phone or token in it.
func TestDeadLetterIsPostedToSlack(t *testing.T) {
	t.Parallel()
	e := startAlerting(t, config.Dev(), 0)
	e.poison(1)
	waitFor(t, func() bool { return len(e.rt.Sandbox.SlackPosts()) > 0 })
	time.Sleep(300 * time.Millisecond) // a second post would have come by now
	posts := e.rt.Sandbox.SlackPosts()
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1: %+v", len(posts), posts)
	}
	body := string(posts[0].Body)
	for _, want := range []string{
		"Message dead-lettered on `ingest-demo`", // the queue
		"*Error code*\\ninvalid",
		"ingest: body is not a SendRequest",                    // the reason, as the DLQ records it
		e.rt.URL + "/console#/queues/ingest-demo",              // the console link
		"Payload (masked)", "s***@example.com", "+15*******23", // masked, not absent
	} {
		if !strings.Contains(body, want) {
			t.Errorf("post lacks %q:\n%s", want, body)
		}
	}
	noRawAddress(t, posts)
	var listed struct {
		Total int `json:"total"`
	}
	if code := e.do("GET", "/sandbox/slack", nil, &listed); code != http.StatusOK || listed.Total != 1 {
		t.Fatalf("GET /sandbox/slack on the API = %d %+v", code, listed)
	}
	if e.deadLetters() != 1 {
		t.Fatal("the message is not in the DLQ")
	}
}

// TestDeadLetterBurstIsFolded: 50 dead letters on one queue within the folding window make one
// post, and the window's close one more carrying the count of the other 49.
func TestDeadLetterBurstIsFolded(t *testing.T) {
	t.Parallel()
	e := startAlerting(t, config.Dev(), 2*time.Second)
	e.poison(50)
	waitFor(t, func() bool { return e.deadLetters() == 50 })
	waitFor(t, func() bool { return len(e.rt.Sandbox.SlackPosts()) >= 2 })
	time.Sleep(2500 * time.Millisecond) // another window: nothing left to say
	posts := e.rt.Sandbox.SlackPosts()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want 2:\n%+v", len(posts), posts)
	}
	if !strings.Contains(posts[0].Text, "Message dead-lettered on `ingest-demo`") {
		t.Errorf("first post = %q", posts[0].Text)
	}
	folded := 0
	if _, err := fmt.Sscanf(posts[1].Text, ":rotating_light: %d more messages dead-lettered on `ingest-demo`", &folded); err != nil || folded != 49 {
		t.Errorf("second post = %q, want the other 49 folded (%v)", posts[1].Text, err)
	}
	noRawAddress(t, posts)
	if s := e.rt.Alerts.Stats(); s.Posted != 2 || s.Folded != 49 {
		t.Errorf("stats = %+v", s)
	}
}

// TestSlackOutageDoesNotHoldUpSends: with a webhook that answers 500, or one that never
// answers, messages are still dead-lettered and a large send (whose large_send_started goes to
// Slack too) is still delivered in full; the failed posts are counted.
func TestSlackOutageDoesNotHoldUpSends(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{}) // ends the hanging requests when the test is done
	for _, c := range []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request)
	}{
		{"answers 500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no_service", 500) }},
		{"hangs", func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client giving up
				c.h(w, r)
			}))
			defer hook.Close()
			defer func() {
				if c.name == "hangs" {
					close(stop)
				}
			}()
			cfg := config.Dev()
			cfg.Alerts.Slack.WebhookURL = hook.URL + "/services/T000/B000/secret"
			e := startAlerting(t, cfg, 0)
			e.poison(5)
			var rs []notify.Recipient
			for i := range notify.LargeSend {
				rs = append(rs, notify.Recipient{FCMToken: fmt.Sprintf("fcm-slack-outage-%05d", i)})
			}
			id := e.send(notify.SendRequest{Channels: []notify.Channel{"push"}, Content: notify.Content{Body: "bulk"}, Recipients: rs})
			if st := e.waitFinal(id); st.Status != "SENT" {
				t.Fatalf("status = %s", st.Status)
			}
			waitFor(t, func() bool { return e.deadLetters() == 5 })
			if got := len(e.rt.Sandbox.Recorder.List("fcm", "")); got != notify.LargeSend {
				t.Fatalf("sandbox got %d fcm deliveries, want %d", got, notify.LargeSend)
			}
			if calls.Load() == 0 {
				t.Fatal("Slack was never called")
			}
			if c.name == "answers 500" {
				waitFor(t, func() bool { return e.rt.Alerts.Stats().Failed > 0 })
			}
			if n := len(e.rt.Sandbox.SlackPosts()); n != 0 {
				t.Fatalf("the sandbox webhook got %d posts; alerts.slack.webhook_url should win", n)
			}
		})
	}
}

// TestProviderAuthFailsAtOnceWithAnAlert: each provider's fake refuses Herald's credentials as
// the real service does (FCM 401, APNs 403 InvalidProviderToken, SES 403 InvalidClientTokenId,
// Twilio 401 20003, Solapi 403 InvalidAPIKey). Every delivery fails at once with reason
// provider_auth after one request to its provider, and Slack gets one alert per provider.
func TestProviderAuthFailsAtOnceWithAnAlert(t *testing.T) {
	t.Parallel()
	e := startAlerting(t, config.Dev(), 0)
	providers := []string{"fcm", "apns", "ses", "twilio", "alimtalk"}
	for _, p := range providers {
		e.rt.Sandbox.RefuseCredentials(p)
	}
	e.mustDo("PUT", "/v1/users/kim/devices/fcm-kim-phone-0001", map[string]any{"platform": "fcm"}, 200)
	e.mustDo("PUT", "/v1/users/kim/devices/apns-kim-ipad-0001", map[string]any{"platform": "apns"}, 200)
	e.mustDo("PUT", "/v1/users/kim/contacts", map[string]any{"email": "kim@example.com", "phone": "+14155550142"}, 200)
	ids := []string{
		e.send(notify.SendRequest{Channels: []notify.Channel{"push", "email", "sms"},
			Content: notify.Content{Title: "Receipt", Body: "Your receipt is ready."}, Recipients: []notify.Recipient{{UserID: "kim"}}}),
		e.send(notify.SendRequest{Channels: []notify.Channel{"alimtalk"}, Content: notify.Content{Body: "주문이 발송되었습니다."},
			ChannelContent: map[notify.Channel]notify.Content{"alimtalk": {Data: map[string]string{"alimtalk_template": "TPL_SHIPPED_01"}}},
			Recipients:     []notify.Recipient{{Phone: "+821012349876"}}}),
	}
	failed := 0
	for _, id := range ids {
		st := e.waitFinal(id)
		for _, d := range st.Deliveries {
			if d.Status != "FAILED" || d.Reason != notify.ReasonProviderAuth {
				t.Errorf("delivery %+v, want FAILED %s", d, notify.ReasonProviderAuth)
			}
			failed++
		}
	}
	if failed != 5 {
		t.Fatalf("%d deliveries, want 5 (fcm, apns, email, sms, alimtalk)", failed)
	}
	waitFor(t, func() bool { return len(e.rt.Sandbox.SlackPosts()) >= len(providers) })
	time.Sleep(300 * time.Millisecond) // a retry, or a second alert, would have come by now
	alerted := map[string]int{}
	for _, p := range e.rt.Sandbox.SlackPosts() {
		for _, prov := range providers {
			if strings.Contains(string(p.Body), prov+" refuses Herald's credentials") {
				alerted[prov]++
			}
		}
	}
	for _, p := range providers {
		if n := e.rt.Sandbox.Refused(p); n != 1 {
			t.Errorf("%s was asked %d times, want once: a refused credential is not retried", p, n)
		}
		if alerted[p] != 1 {
			t.Errorf("%d Slack alerts for %s, want 1 (all: %v)", alerted[p], p, alerted)
		}
	}
}

// TestSlackAlertLinkOpensTheDeadLetters crosses the seam between an alert and the console: the
// link a dead-letter alert carries, opened in a browser, shows that queue's dead letters — the
// poison message among them — not "Not found".
func TestSlackAlertLinkOpensTheDeadLetters(t *testing.T) {
	e := startAlerting(t, config.Dev(), 0)
	_, run, shot := browserTab(t, 1200, 800, "alert-link-")
	e.poison(1)
	waitFor(t, func() bool { return len(e.rt.Sandbox.SlackPosts()) > 0 })
	link := regexp.MustCompile(`https?://[^\s"<>|\\]+/console#/[^\s"<>|\\]+`).FindString(string(e.rt.Sandbox.SlackPosts()[0].Body))
	if link == "" {
		t.Fatalf("the alert carries no console link: %s", e.rt.Sandbox.SlackPosts()[0].Body)
	}
	dead := mustPeek(t, e, notify.DLQName(notify.IngestQueue("demo")))
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the poison one", len(dead))
	}
	var text string
	run("open the alert's link", chromedp.Navigate(link), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", "dev-demo-key"), chromedp.Click(`#key-form button`),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q]`, dead[0].ID)), chromedp.Text("#page", &text, chromedp.ByQuery))
	shot("dead-letters")
	if strings.Contains(text, "Not found") || !strings.Contains(text, "ingest-demo") {
		t.Fatalf("the alert's link %s shows %q", link, text)
	}
	// A link of an alert posted before the route was named #/queues/… still lands there.
	old := strings.Replace(link, "#/queues/", "#/dead-letters/", 1)
	run("open an old link", chromedp.Navigate(old), chromedp.WaitVisible(fmt.Sprintf(`tr[data-id=%q]`, dead[0].ID)))
}
