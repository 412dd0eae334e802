package pipeline_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

// fireHarness is a pipeline on SQLite with a settable clock, the ingest queues of two services
// with their DLQs, and a scheduler that records what ingest arms.
type fireHarness struct {
	p     *pipeline.Pipeline
	st    *sqlite.Store
	q     *sqlite.Queue
	clock *stepClock
	armed map[string]time.Time
}

type recordingScheduler struct{ armed map[string]time.Time }

func (r recordingScheduler) Schedule(_ context.Context, id, _ string, at time.Time) error {
	r.armed[id] = at
	return nil
}
func (r recordingScheduler) Unschedule(_ context.Context, id string) error {
	delete(r.armed, id)
	return nil
}

func newFireHarness(t *testing.T) *fireHarness {
	t.Helper()
	db, st := openStore(t)
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	var qcfgs []notify.QueueConfig
	for _, name := range []string{"ingest-shop", "ingest-news"} {
		qcfgs = append(qcfgs, notify.QueueConfig{Name: name, MaxReceiveCount: 5, DLQ: notify.DLQName(name)})
	}
	for _, name := range []string{"prepare-realtime", "prepare-bulk"} {
		qcfgs = append(qcfgs, notify.QueueConfig{Name: name, MaxReceiveCount: 5})
	}
	q, err := sqlite.NewQueue(db, qcfgs, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	p := pipeline.New(pipeline.Deps{Store: st, Queue: q, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		pipeline.Config{})
	return &fireHarness{p: p, st: st, q: q, clock: clock, armed: map[string]time.Time{}}
}

// ingest runs service's ingest handler on bodies and settles every failure as both runtimes do
// (permanent: dead-lettered with its reason).
func (h *fireHarness) ingest(t *testing.T, service string, bodies ...[]byte) {
	t.Helper()
	queue := notify.IngestQueue(service)
	var out []notify.OutMessage
	for _, b := range bodies {
		out = append(out, notify.OutMessage{Body: b})
	}
	if err := h.q.Send(t.Context(), queue, out...); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.q.Receive(t.Context(), queue, 10, time.Minute, 0)
	if err != nil || len(msgs) != len(bodies) {
		t.Fatalf("received %d of %d: %v", len(msgs), len(bodies), err)
	}
	handler := h.p.Ingest(service, recordingScheduler{h.armed})
	failed := map[string]error{}
	for _, f := range pipeline.Run(t.Context(), handler, msgs, slog.Default()) {
		failed[f.MessageID] = f.Err
	}
	for _, m := range msgs {
		if err, ok := failed[m.ID]; ok {
			pipeline.SettleFailed(t.Context(), h.q, queue, notify.DLQName(queue), m, err, time.Second, time.Minute, slog.New(slog.DiscardHandler), nil)
		} else if err := h.q.Delete(t.Context(), queue, m.ReceiptHandle); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *fireHarness) fire(t *testing.T, service, id string, at time.Time) {
	t.Helper()
	body, _ := json.Marshal(notify.FireMessage{Fire: id, At: &at})
	h.ingest(t, service, body)
}

// reserve stores a SCHEDULED notification of service at sendAt through ingest, as a producer's
// request would, and returns its id.
func (h *fireHarness) reserve(t *testing.T, service, key string, sendAt time.Time) string {
	t.Helper()
	body, _ := json.Marshal(notify.SendRequest{IdempotencyKey: key, Channels: []notify.Channel{notify.ChannelPush},
		Content: notify.Content{Body: "later"}, Recipients: []notify.Recipient{{UserID: "u1"}}, SendAt: &sendAt})
	h.ingest(t, service, body)
	id := notify.NotificationIDFor(service, key, h.clock.Now())
	if n := h.get(t, id); n.Status != notify.StatusScheduled {
		t.Fatalf("%s is %s, want SCHEDULED", id, n.Status)
	}
	return id
}

func (h *fireHarness) get(t *testing.T, id string) *notify.Notification {
	t.Helper()
	n, err := h.st.GetNotification(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (h *fireHarness) deadLetters(t *testing.T, service string) []notify.Message {
	t.Helper()
	msgs, err := h.q.Peek(t.Context(), notify.DLQName(notify.IngestQueue(service)), 10)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A fire must carry the send_at it was armed for and name a reserved send of the queue's own
// service; any other is dead-lettered with its reason and sends nothing.
func TestForgedFiresAreDeadLettered(t *testing.T) {
	t.Parallel()
	h := newFireHarness(t)
	sendAt := h.clock.Now().Add(time.Hour)
	victim := h.reserve(t, "shop", "victim", sendAt)

	h.ingest(t, "news",
		[]byte(`{"fire":"`+victim+`"}`),                                        // bare: no at
		[]byte(`{"fire":"`+victim+`","at":"`+sendAt.Format(time.RFC3339)+`"}`), // another service's
		[]byte(`{"fire":"n_nonexistent","at":"`+sendAt.Format(time.RFC3339)+`"}`))
	h.ingest(t, "shop", []byte(`{"fire":"`+victim+`"}`)) // its own queue, but bare

	if n := h.get(t, victim); n.Status != notify.StatusScheduled || !n.SendAt.Equal(sendAt) {
		t.Fatalf("victim is %s at %v, want SCHEDULED at %v: a forged fire moved it", n.Status, n.SendAt, sendAt)
	}
	want := map[string]struct{ code, reason string }{
		`{"fire":"` + victim + `"}`: {notify.EINVALID, "names no send_at it was armed for"},
		`{"fire":"` + victim + `","at":"` + sendAt.Format(time.RFC3339) + `"}`: {notify.EFORBIDDEN, "another service's"},
		`{"fire":"n_nonexistent","at":"` + sendAt.Format(time.RFC3339) + `"}`:  {notify.ENOTFOUND, "no notification or campaign"},
	}
	news := h.deadLetters(t, "news")
	if len(news) != 3 {
		t.Fatalf("ingest-news-dlq holds %d, want the 3 forged fires", len(news))
	}
	for _, m := range append(news, h.deadLetters(t, "shop")...) {
		w, ok := want[string(m.Body)]
		if !ok {
			t.Fatalf("unexpected dead letter %s", m.Body)
		}
		if m.Attributes[pipeline.AttrErrorCode] != w.code || !strings.Contains(m.Attributes[pipeline.AttrErrorReason], w.reason) {
			t.Fatalf("dead letter %s: code %q reason %q; want %q containing %q", m.Body,
				m.Attributes[pipeline.AttrErrorCode], m.Attributes[pipeline.AttrErrorReason], w.code, w.reason)
		}
	}
	if n := len(h.deadLetters(t, "shop")); n != 1 {
		t.Fatalf("ingest-shop-dlq holds %d, want the bare fire", n)
	}
	// The real fire still works.
	h.clock.Add(time.Hour)
	h.fire(t, "shop", victim, sendAt)
	if n := h.get(t, victim); n.Status != notify.StatusProcessing {
		t.Fatalf("after its own fire the victim is %s, want PROCESSING", n.Status)
	}
}

// An operator moved the schedule in the EventBridge console: the fire comes at another time, still
// naming the stored send_at. It sends then, and the stored send_at follows.
func TestConsoleEditedFireIsHonoured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		move   time.Duration
		follow bool
	}{
		{"earlier", -40 * time.Minute, true},
		{"a second earlier", -time.Second, true},
		{"later", 3 * time.Hour, true},
		{"on time", 0, false},
		{"within FireLateness", notify.FireLateness - time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newFireHarness(t)
			sendAt := h.clock.Now().Add(time.Hour)
			id := h.reserve(t, "shop", "console", sendAt)
			h.clock.Add(time.Hour + tc.move)
			h.fire(t, "shop", id, sendAt)
			n := h.get(t, id)
			if n.Status != notify.StatusProcessing {
				t.Fatalf("status %s, want PROCESSING (fanned out)", n.Status)
			}
			want := sendAt
			if tc.follow {
				want = h.clock.Now()
			}
			if n.SendAt == nil || !n.SendAt.Equal(want) {
				t.Fatalf("send_at %v, want %v", n.SendAt, want)
			}
			if len(h.deadLetters(t, "shop")) != 0 {
				t.Fatal("an honoured fire was dead-lettered")
			}
		})
	}
}

// A fire armed for a send_at a reschedule replaced is stale, before or after either time.
func TestSupersededFireIsStale(t *testing.T) {
	t.Parallel()
	h := newFireHarness(t)
	old := h.clock.Now().Add(time.Hour)
	id := h.reserve(t, "shop", "moved", old)
	moved := old.Add(2 * time.Hour)
	if err := h.st.RescheduleNotification(t.Context(), id, moved); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Hour)
	h.fire(t, "shop", id, old) // the old fire, already on its way when the PATCH landed
	h.clock.Add(3 * time.Hour)
	h.fire(t, "shop", id, old) // and again, late, past the new time
	if n := h.get(t, id); n.Status != notify.StatusScheduled || !n.SendAt.Equal(moved) {
		t.Fatalf("after stale fires: %s at %v, want SCHEDULED at %v", n.Status, n.SendAt, moved)
	}
	h.fire(t, "shop", id, moved)
	if n := h.get(t, id); n.Status != notify.StatusProcessing {
		t.Fatalf("the current fire left it %s", n.Status)
	}
}

// A PATCH that lands between ingest storing a reserved send and arming it is overwritten by
// ingest's arm for the old time: the one schedule fires at the old time, stale. That fire re-arms
// the schedule for the stored send_at, so the send still goes at its new time.
func TestStaleFireRearmsForTheStoredSendAt(t *testing.T) {
	t.Parallel()
	h := newFireHarness(t)
	old := h.clock.Now().Add(time.Hour)
	id := h.reserve(t, "shop", "raced", old)
	moved := old.Add(2 * time.Hour)
	if err := h.st.RescheduleNotification(t.Context(), id, moved); err != nil {
		t.Fatal(err)
	}
	h.armed[id] = old // ingest's arm, after the PATCH re-armed: the schedule holds the old time
	h.clock.Add(time.Hour)
	h.fire(t, "shop", id, old)
	if got := h.armed[id]; !got.Equal(moved) {
		t.Fatalf("after the stale fire the schedule is armed for %v, want the stored %v", got, moved)
	}
	if n := h.get(t, id); n.Status != notify.StatusScheduled {
		t.Fatalf("the stale fire left it %s, want SCHEDULED", n.Status)
	}
}

// A send_at with a fraction of a second is kept whole (rounded up), so the fire the scheduler
// arms for it — whose at() has whole seconds — names it exactly, even when the schedule was moved
// earlier; a notification stored with a fraction before times were kept whole matches too.
func TestSubSecondSendAtMovedEarlierSends(t *testing.T) {
	t.Parallel()
	h := newFireHarness(t)
	asked := h.clock.Now().Add(time.Hour + 400*time.Millisecond)
	id := h.reserve(t, "shop", "fraction", asked)
	whole := asked.Truncate(time.Second).Add(time.Second)
	if n := h.get(t, id); !n.SendAt.Equal(whole) || !h.armed[id].Equal(whole) {
		t.Fatalf("stored send_at %v, armed %v; want both %v", n.SendAt, h.armed[id], whole)
	}
	h.clock.Add(30 * time.Minute) // moved earlier in the console
	h.fire(t, "shop", id, whole)
	if n := h.get(t, id); n.Status != notify.StatusProcessing || !n.SendAt.Equal(h.clock.Now()) {
		t.Fatalf("after the early fire: %s at %v, want PROCESSING at %v", n.Status, n.SendAt, h.clock.Now())
	}

	// Stored with its fraction (bypassing the rounding), armed for the rounded-up second.
	legacy := &notify.Notification{ID: "n_legacy", Service: "shop", Channels: []notify.Channel{notify.ChannelPush},
		Content: notify.Content{Body: "old"}, Recipients: []notify.Recipient{{UserID: "u1"}}, RecipientCount: 1,
		Status: notify.StatusScheduled, SendAt: &asked, CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now()}
	if _, _, err := h.st.CreateNotification(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	h.fire(t, "shop", legacy.ID, whole)
	if n := h.get(t, legacy.ID); n.Status != notify.StatusProcessing {
		t.Fatalf("legacy sub-second send_at moved earlier: %s, want PROCESSING", n.Status)
	}
}
