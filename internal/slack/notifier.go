package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/notify"
)

// Window is how long a post holds off the next one of the same Key: a provider outage that
// dead-letters thousands of messages makes one post a minute per queue, not thousands.
const Window = time.Minute

// Folder folds bursts: the first event of a key in a window is posted, the rest are counted
// and their count rides on the next post (or on Due's summary when the window closes).
// It is safe for concurrent use.
type Folder struct {
	Window time.Duration // 0: Window
	mu     sync.Mutex
	keys   map[string]*fold
}

type fold struct {
	posted time.Time    // when the last post of the key went out
	count  int          // events folded since
	last   notify.Event // the last of them
}

// Admit decides on one event of key at now: post it (folded is the count of earlier events it
// carries), or fold it.
func (f *Folder) Admit(key string, e notify.Event, now time.Time) (post bool, folded int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]*fold{}
	}
	k := f.keys[key]
	if k != nil && now.Sub(k.posted) < f.window() {
		k.count++
		k.last = e
		return false, 0
	}
	if k == nil {
		k = &fold{}
		f.keys[key] = k
	}
	folded, k.count, k.posted = k.count, 0, now
	return true, folded
}

// Due returns, for every key whose window has closed with events folded, the last of them and
// their count, and resets the key (its window restarts now, as if the summary were a post).
// Keys idle for a window are forgotten.
func (f *Folder) Due(now time.Time) (out []Folded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, k := range f.keys {
		if now.Sub(k.posted) < f.window() {
			continue
		}
		if k.count == 0 {
			delete(f.keys, key)
			continue
		}
		out = append(out, Folded{Key: key, Last: k.last, Count: k.count})
		k.count, k.posted = 0, now
	}
	return out
}

// Folded is a key's folded events at the close of its window.
type Folded struct {
	Key   string
	Last  notify.Event
	Count int
}

func (f *Folder) window() time.Duration {
	if f.Window > 0 {
		return f.Window
	}
	return Window
}

// Post sends m to the incoming webhook url. An answer other than 2xx is an error carrying the
// status and the start of Slack's answer (e.g. "invalid_payload", "no_service"); the error never
// carries the URL, whose path is the secret.
func Post(ctx context.Context, client *http.Client, url string, m Message) error {
	body, err := json.Marshal(m)
	if err != nil {
		return notify.Wrap(notify.EINVALID, err, "slack: encode")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return notify.Errorf(notify.EINVALID, "slack: the webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error holds the URL; report only what failed.
		if ctx.Err() != nil {
			return notify.Errorf(notify.EUNAVAILABLE, "slack: post: %v", ctx.Err())
		}
		return notify.Errorf(notify.EUNAVAILABLE, "slack: post failed: %s", unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	answer := strings.TrimSpace(string(raw))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return notify.Errorf(notify.ETHROTTLED, "slack: %d %s", resp.StatusCode, answer)
	case resp.StatusCode >= 500:
		return notify.Errorf(notify.EUNAVAILABLE, "slack: %d %s", resp.StatusCode, answer)
	default:
		return notify.Errorf(notify.EINVALID, "slack: %d %s", resp.StatusCode, answer)
	}
}

func unwrapURL(err error) string {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap().Error()
	}
	return "request error"
}

// Config configures a Notifier.
type Config struct {
	WebhookURL string
	Options
	Client  *http.Client  // nil: a client with Timeout
	Timeout time.Duration // per post; 0: 5 s
	Backlog int           // posts waiting at most; 0: 100. More are dropped and counted.
	Window  time.Duration // folding window; 0: Window
	Logger  *slog.Logger  // nil: slog.Default()
}

// Stats counts what a Notifier did.
type Stats struct {
	Posted, Failed, Dropped, Folded int64
}

// Notifier is a notify.Events posting to Slack from its own goroutine. Emit only builds,
// folds and queues: it never waits on Slack and never returns an error, so a Slack outage or a
// webhook that hangs cannot slow or fail the send that emitted the event. Posts that fail are
// logged and counted, not retried (the next post of the key carries on).
type Notifier struct {
	cfg    Config
	folder *Folder
	queue  chan Message
	log    *slog.Logger
	stop   chan struct{}
	done   chan struct{}
	ctx    context.Context // ends an in-flight post at Close
	cancel context.CancelFunc
	once   sync.Once

	console atomic.Pointer[string] // SetConsoleURL's

	posted, failed, dropped, folded atomic.Int64
}

var _ notify.Events = (*Notifier)(nil)

// NewNotifier starts a Notifier; Close stops it.
func NewNotifier(cfg Config) *Notifier {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Notifier{cfg: cfg, folder: &Folder{Window: cfg.Window}, queue: make(chan Message, cfg.Backlog),
		log: cfg.Logger.With("component", "slack"), stop: make(chan struct{}), done: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.run()
	return n
}

// Emit queues e's post, or folds it; it returns at once and always nil.
func (n *Notifier) Emit(_ context.Context, e notify.Event) error {
	if !n.cfg.Posted(e.Type) {
		return nil
	}
	post, folded := n.folder.Admit(Key(e), e, time.Now())
	if !post {
		n.folded.Add(1)
		return nil
	}
	m, _ := Build(e, n.options(), folded)
	n.enqueue(m, e.Type)
	return nil
}

func (n *Notifier) enqueue(m Message, what string) {
	select {
	case n.queue <- m:
	default:
		n.dropped.Add(1)
		n.log.Warn("slack post dropped: the backlog is full", "event", what, "backlog", cap(n.queue))
	}
}

// SetConsoleURL sets the console base URL posts link to, for a runtime that knows it only once
// it listens (Config.ConsoleURL, when set, wins).
func (n *Notifier) SetConsoleURL(u string) { n.console.Store(&u) }

func (n *Notifier) options() Options {
	o := n.cfg.Options
	if u := n.console.Load(); u != nil && o.ConsoleURL == "" {
		o.ConsoleURL = *u
	}
	return o
}

// Stats reports the counts so far.
func (n *Notifier) Stats() Stats {
	return Stats{Posted: n.posted.Load(), Failed: n.failed.Load(), Dropped: n.dropped.Load(), Folded: n.folded.Load()}
}

func (n *Notifier) run() {
	defer close(n.done)
	tick := time.NewTicker(max(n.folder.window()/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case m := <-n.queue:
			n.post(m)
		case <-tick.C:
			for _, f := range n.folder.Due(time.Now()) {
				n.enqueue(Summary(f.Last, n.options(), f.Count), f.Last.Type)
			}
		case <-n.stop:
			return
		}
	}
}

func (n *Notifier) post(m Message) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Timeout)
	defer cancel()
	if err := Post(ctx, n.cfg.Client, n.cfg.WebhookURL, m); err != nil {
		n.failed.Add(1)
		n.log.Warn("slack post failed", "code", notify.ErrorCode(err), "error", err.Error(), "failed_total", n.failed.Load())
		return
	}
	n.posted.Add(1)
}

// Close stops the Notifier, giving the posts already queued up to wait to go out; then a post
// in flight is abandoned and what is left is dropped (and counted).
func (n *Notifier) Close(wait time.Duration) {
	n.once.Do(func() {
		deadline := time.Now().Add(wait)
		for len(n.queue) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		n.cancel()
		close(n.stop)
		<-n.done
		n.dropped.Add(int64(len(n.queue)))
	})
}

// String names the Notifier without its URL (a secret).
func (n *Notifier) String() string { return fmt.Sprintf("slack notifier (backlog %d)", cap(n.queue)) }
