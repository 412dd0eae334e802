package slack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

const (
	rawEmail = "alice.secret@example.com"
	rawPhone = "+821012345678"
	rawToken = "fcm-token-abcdefghijklmnopqrstuvwxyz-0001"
)

// poison is a dead-lettered body full of personal data, with a reason quoting some of it.
func deadLetter(queue string) notify.Event {
	body := `{"notification_id":"n-1","recipients":[{"email":"` + rawEmail + `","phone":"` + rawPhone + `","fcm_token":"` + rawToken + `"}],"note":"call ` + rawPhone + `"`
	e := notify.DeadLetterEvent(time.Unix(0, 0), queue, "m-1", notify.EINVALID, "bad recipient "+rawEmail+" <@channel>", []byte(body))
	e.Service = "herald-prod"
	return e
}

func TestBuild(t *testing.T) {
	t.Parallel()
	o := Options{ConsoleURL: "https://herald.example.com/"}
	cases := []struct {
		name   string
		e      notify.Event
		o      Options
		folded int
		want   []string // substrings of the JSON
		skip   bool
	}{
		{name: "dead letter", e: deadLetter("send-realtime"), o: o, want: []string{
			"Message dead-lettered on `send-realtime`", "bad recipient a***@example.com", "*Error code*\\ninvalid", "`m-1`", "n-1",
			"https://herald.example.com/console#/queues/send-realtime", "Payload (masked)", "herald-prod",
			"\\u0026lt;@channel\\u0026gt;", // a mention in a reason is escaped, never live
		}},
		{name: "dead letter folded, no console", e: deadLetter("ingest-orders"), folded: 37, want: []string{
			"and 37 more in the last minute",
		}},
		{name: "large notification", e: notify.Event{Type: notify.EventLargeSendStarted, NotificationID: "n-9", Recipients: 1200,
			Detail: map[string]any{"category": "marketing", "channels": []notify.Channel{"push", "email"}}}, o: o,
			want: []string{"Large send started: notification `n-9` to 1200 recipients", "marketing", "push, email"}},
		{name: "large campaign", e: notify.Event{Type: notify.EventLargeSendStarted, CampaignID: "c-1", Recipients: 1000}, o: o,
			want: []string{"campaign `c-1` to 1000 recipients"}},
		{name: "campaign failed", e: notify.Event{Type: notify.EventCampaignFailed, CampaignID: "c-2", Recipients: 5,
			Detail: map[string]any{"code": notify.EINTERNAL, "error": "audience read failed for " + rawEmail}}, o: o,
			want: []string{"Campaign `c-2` failed: audience read failed for a***@example.com", "*Error code*\\ninternal"}},
		{name: "campaign finished off", e: notify.Event{Type: notify.EventCampaignFinished, CampaignID: "c-3"}, o: o, skip: true},
		{name: "campaign finished on", e: notify.Event{Type: notify.EventCampaignFinished, CampaignID: "c-3", Recipients: 40,
			Detail: map[string]any{"chunks": 2}}, o: Options{CampaignFinished: true}, want: []string{"Campaign `c-3` finished: 40 recipients", "*Chunks*\\n2"}},
		{name: "unknown type", e: notify.Event{Type: "something_else"}, o: o, skip: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, ok := Build(c.e, c.o, c.folded)
			if ok == c.skip {
				t.Fatalf("posted = %v, want %v", ok, !c.skip)
			}
			if c.skip {
				return
			}
			b, _ := json.Marshal(m)
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("message lacks %q:\n%s", w, b)
				}
			}
			if !strings.HasPrefix(m.Text, strings.SplitN(string(m.Blocks[0].Text.Text), "\n", 2)[0]) {
				t.Errorf("text %q does not match the first block", m.Text)
			}
			if c.folded == 0 && strings.Contains(string(b), "more in the last minute") {
				t.Error("a post without folded events mentions some")
			}
			noPersonalData(t, string(b))
		})
	}
}

// noPersonalData fails when s holds a raw address, phone, token or any part long enough to
// identify one.
func noPersonalData(t *testing.T, s string) {
	t.Helper()
	for _, raw := range []string{rawEmail, "alice.secret", rawPhone, "1012345678", rawToken, "abcdefghijklmnop"} {
		if strings.Contains(s, raw) {
			t.Errorf("post holds %q:\n%s", raw, s)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	m := Summary(deadLetter("send-bulk"), Options{ConsoleURL: "http://127.0.0.1:8080"}, 49)
	b, _ := json.Marshal(m)
	for _, w := range []string{"49 more messages dead-lettered on `send-bulk`", "/console#/queues/send-bulk"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("summary lacks %q: %s", w, b)
		}
	}
	noPersonalData(t, string(b))
}

func TestFolder(t *testing.T) {
	t.Parallel()
	f := &Folder{}
	t0 := time.Unix(1000, 0)
	e := deadLetter("q")
	if post, n := f.Admit("a", e, t0); !post || n != 0 {
		t.Fatalf("first = %v %d", post, n)
	}
	for i := range 37 {
		if post, _ := f.Admit("a", e, t0.Add(time.Duration(i)*time.Second)); post {
			t.Fatalf("event %d within the minute posted", i)
		}
	}
	if post, _ := f.Admit("b", e, t0.Add(time.Second)); !post {
		t.Fatal("another key is folded with the first")
	}
	if d := f.Due(t0.Add(59 * time.Second)); len(d) != 0 {
		t.Fatalf("due before the window closed: %+v", d)
	}
	// The next post after the window carries the count.
	if post, n := f.Admit("a", e, t0.Add(61*time.Second)); !post || n != 37 {
		t.Fatalf("after the window = %v %d, want true 37", post, n)
	}
	// Or, with no further event, Due reports it once.
	f.Admit("a", e, t0.Add(62*time.Second))
	d := f.Due(t0.Add(122 * time.Second))
	if len(d) != 1 || d[0].Key != "a" || d[0].Count != 1 {
		t.Fatalf("due = %+v", d)
	}
	if d := f.Due(t0.Add(123 * time.Second)); len(d) != 0 {
		t.Fatalf("due reported twice: %+v", d)
	}
}

// hook is a fake incoming webhook.
type hook struct {
	mu     sync.Mutex
	posts  []Message
	status int
	delay  time.Duration // before answering
	hang   chan struct{} // when set, requests block until closed (or their context ends)
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.hang != nil {
		select {
		case <-h.hang:
		case <-r.Context().Done():
		}
		return
	}
	b, _ := io.ReadAll(r.Body)
	var m Message
	if err := json.Unmarshal(b, &m); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.posts = append(h.posts, m)
	h.mu.Unlock()
	time.Sleep(h.delay)
	if h.status != 0 {
		http.Error(w, "no_service", h.status)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (h *hook) all() []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Message(nil), h.posts...)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNotifierFoldsABurst(t *testing.T) {
	t.Parallel()
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	n := NewNotifier(Config{WebhookURL: srv.URL + "/services/T/B/secret", Window: 300 * time.Millisecond, Logger: quiet})
	defer n.Close(time.Second)
	for range 50 {
		if err := n.Emit(t.Context(), deadLetter("send-realtime")); err != nil {
			t.Fatal(err)
		}
	}
	_ = n.Emit(t.Context(), notify.Event{Type: notify.EventCampaignFinished, CampaignID: "c"}) // not asked for
	waitFor(t, "the folded count", func() bool { return len(h.all()) == 2 })
	posts := h.all()
	if !strings.Contains(posts[0].Text, "Message dead-lettered on `send-realtime`") {
		t.Errorf("first post = %q", posts[0].Text)
	}
	if !strings.Contains(posts[1].Text, "49 more messages dead-lettered on `send-realtime`") {
		t.Errorf("second post = %q", posts[1].Text)
	}
	time.Sleep(400 * time.Millisecond) // another window: nothing more to say
	if got := len(h.all()); got != 2 {
		t.Fatalf("%d posts, want 2", got)
	}
	if s := n.Stats(); s.Posted != 2 || s.Folded != 49 || s.Failed != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestNotifierNeverWaitsOnSlack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		h    *hook
	}{
		// Each 500 takes 100 ms: 20 emits within the second the test allows them cannot all
		// wait in a backlog of 2 behind one post, however slowly this machine runs the loop.
		{"500", &hook{status: http.StatusInternalServerError, delay: 100 * time.Millisecond}},
		{"hangs", &hook{hang: make(chan struct{})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			if c.h.hang != nil {
				defer close(c.h.hang)
			}
			n := NewNotifier(Config{WebhookURL: srv.URL, Timeout: 200 * time.Millisecond, Backlog: 2, Window: time.Millisecond, Logger: quiet})
			start := time.Now()
			for i := range 20 {
				e := deadLetter("q")
				e.Detail["queue"] = string(rune('a' + i)) // 20 keys: nothing folds
				if err := n.Emit(context.Background(), e); err != nil {
					t.Fatal(err)
				}
			}
			if d := time.Since(start); d > time.Second { // generous: Emit only queues
				t.Fatalf("20 emits took %v", d)
			}
			waitFor(t, "a failed post", func() bool { return n.Stats().Failed > 0 })
			n.Close(0)
			if s := n.Stats(); s.Posted != 0 || s.Dropped == 0 {
				t.Fatalf("stats = %+v, want no post and some dropped", s)
			}
		})
	}
}

func TestPostKeepsTheURLOutOfErrors(t *testing.T) {
	t.Parallel()
	err := Post(t.Context(), http.DefaultClient, "http://127.0.0.1:1/services/T/B/very-secret", Message{Text: "x"})
	if err == nil || strings.Contains(err.Error(), "very-secret") {
		t.Fatalf("err = %v", err)
	}
	srv := httptest.NewServer(&hook{status: http.StatusNotFound})
	defer srv.Close()
	err = Post(t.Context(), http.DefaultClient, srv.URL+"/services/T/B/very-secret", Message{Text: "x"})
	if !notify.IsCode(err, notify.EINVALID) || !strings.Contains(err.Error(), "404 no_service") || strings.Contains(err.Error(), "very-secret") {
		t.Fatalf("err = %v", err)
	}
}

var quiet = slog.New(slog.DiscardHandler)
