package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// scriptedFCM accepts every token except those named "dead-…" (unregistered) and, the first
// time it sees them, "flaky-…" (throttled). It records every accepted send with its collapse id.
type scriptedFCM struct {
	mu       sync.Mutex
	accepted map[string][]string // token -> collapse ids of accepted sends
	seen     map[string]bool
}

func (s *scriptedFCM) Provider() notify.Provider { return notify.ProviderFCM }
func (s *scriptedFCM) MaxBatch() int             { return 500 }
func (s *scriptedFCM) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i].DeliveryID = m.DeliveryID
		switch {
		case strings.HasPrefix(m.Address, "dead-"):
			out[i].Err = notify.Errorf(notify.EDEADADDRESS, "unregistered")
		case strings.HasPrefix(m.Address, "flaky-") && !s.seen[m.Address]:
			s.seen[m.Address] = true
			out[i].Err = notify.Errorf(notify.ETHROTTLED, "slow down")
		default:
			s.accepted[m.Address] = append(s.accepted[m.Address], m.CollapseID)
		}
	}
	return out, nil
}

type bulkHarness struct {
	p     *pipeline.Pipeline
	st    *sqlite.Store
	q     *sqlite.Queue
	fcm   *scriptedFCM
	clock *stepClock
}

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newBulkHarness(t *testing.T) *bulkHarness {
	t.Helper()
	fcm := &scriptedFCM{accepted: map[string][]string{}, seen: map[string]bool{}}
	b := newBulkHarnessWith(t, []notify.Sender{fcm}, pipeline.Config{RetryBase: time.Second, RetryMax: time.Second})
	b.fcm = fcm
	return b
}

// newBulkHarnessWith is a bulk harness on a fresh SQLite store and queue whose pipeline sends
// through senders under cfg.
func newBulkHarnessWith(t *testing.T, senders []notify.Sender, cfg pipeline.Config) *bulkHarness {
	t.Helper()
	dir := t.TempDir()
	sdb, err := sqlite.Open(filepath.Join(dir, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	qdb, err := sqlite.Open(filepath.Join(dir, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qdb.Close() })
	box, _ := seal.New(make([]byte, 32))
	st, err := sqlite.NewStore(sdb, box)
	if err != nil {
		t.Fatal(err)
	}
	clock := &stepClock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	var qcfgs []notify.QueueConfig
	for _, name := range []string{"prepare-bulk", "send-bulk", "record-bulk", "cleanup", "prepare-realtime", "send-realtime", "record-realtime"} {
		qcfgs = append(qcfgs, notify.QueueConfig{Name: name, MaxReceiveCount: 5})
	}
	q, err := sqlite.NewQueue(qdb, qcfgs, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	p := pipeline.New(pipeline.Deps{Store: st, Queue: q, Senders: senders, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, cfg)
	return &bulkHarness{p: p, st: st, q: q, clock: clock}
}

// drain runs every visible message of queue through h until the queue stays empty, moving the
// clock past retry delays; it returns the bodies it handled.
func (b *bulkHarness) drain(t *testing.T, queue string, h pipeline.Handler) [][]byte {
	t.Helper()
	var bodies [][]byte
	for range 200 {
		msgs, err := b.q.Receive(t.Context(), queue, 10, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			st, _ := b.q.Stats(t.Context(), queue)
			if st.Delayed == 0 {
				return bodies
			}
			b.clock.Add(2 * time.Second)
			continue
		}
		for _, f := range h(t.Context(), msgs) {
			t.Fatalf("%s: message %s failed: %v", queue, f.MessageID, f.Err)
		}
		for _, m := range msgs {
			bodies = append(bodies, m.Body)
			if err := b.q.Delete(t.Context(), queue, m.ReceiptHandle); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("%s never drained", queue)
	return nil
}

func TestBulkLaneRecordsBatchesNotRecipients(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	ctx := t.Context()
	const tokens = 2000
	rs := scriptedTokens(tokens)
	n := &notify.Notification{
		ID: notify.NewID("n_", b.clock.Now()), Service: "shop", Category: notify.CategoryMarketing, Lane: notify.LaneBulk,
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "Today only"},
		Recipients: rs, RecipientCount: len(rs), Status: notify.StatusProcessing, CreatedAt: b.clock.Now(), UpdatedAt: b.clock.Now(),
	}
	if _, _, err := b.st.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	chunks := (tokens + b.p.ChunkSize() - 1) / b.p.ChunkSize()
	if err := b.st.SetChunksTotal(ctx, n.ID, chunks); err != nil {
		t.Fatal(err)
	}
	w0, _ := b.st.TotalChanges(ctx)
	if err := b.p.EnqueuePrepare(ctx, n, 0, chunks, nil); err != nil {
		t.Fatal(err)
	}
	prepared := b.drain(t, "prepare-bulk", b.p.Prepare())
	sends := b.drain(t, "send-bulk", b.p.Send())
	b.drain(t, "record-bulk", b.p.Record())

	// Every live token exactly once, the dead ones never, the flaky ones after their retry.
	dead := b.acceptedOnce(t, rs, n.ID)
	stored, err := b.st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := notify.ChannelStats{Total: tokens, Sent: tokens - dead, Failed: dead}
	if got := stored.Stats.Channels[notify.ChannelPush]; got != want {
		t.Fatalf("push stats = %+v, want %+v", got, want)
	}
	if stored.Status != notify.StatusPartiallySent {
		t.Fatalf("status = %s, want %s", stored.Status, notify.StatusPartiallySent)
	}
	// Per batch, not per recipient: a few rows per 500-token batch and per chunk.
	w1, _ := b.st.TotalChanges(ctx)
	perRecipient := float64(w1-w0) / tokens
	t.Logf("%d store rows written for %d recipients (%.4f per recipient), %d send messages", w1-w0, tokens, perRecipient, len(sends))
	if perRecipient > 0.05 {
		t.Fatalf("%.4f store writes per recipient, want ≤ 0.05", perRecipient)
	}

	// Redelivery of everything — every prepare and every send message again — sends nothing
	// and counts nothing twice.
	b.redeliver(t, notify.LaneBulk, prepared, sends, n.ID, want)
}

// scriptedTokens is n direct FCM recipients, tok-…, with every 400th (from the 8th) a dead-…
// token and every 250th (from the 4th) a flaky-… one (scriptedFCM).
func scriptedTokens(n int) []notify.Recipient {
	rs := make([]notify.Recipient, n)
	for i := range rs {
		tok := fmt.Sprintf("tok-%05d", i)
		switch {
		case i%400 == 7:
			tok = fmt.Sprintf("dead-%05d", i)
		case i%250 == 3:
			tok = fmt.Sprintf("flaky-%05d", i)
		}
		rs[i] = notify.Recipient{FCMToken: tok}
	}
	return rs
}

// acceptedOnce checks that scriptedFCM accepted every live token of rs exactly once, with
// collapse id id, and no dead one; it returns how many were dead.
func (b *bulkHarness) acceptedOnce(t *testing.T, rs []notify.Recipient, id string) (dead int) {
	t.Helper()
	for _, r := range rs {
		got := b.fcm.accepted[r.FCMToken]
		if strings.HasPrefix(r.FCMToken, "dead-") {
			dead++
			if len(got) != 0 {
				t.Fatalf("dead token %s accepted %d times", r.FCMToken, len(got))
			}
			continue
		}
		if len(got) != 1 || got[0] != id {
			t.Fatalf("token %s accepted %v, want once with collapse id %s", r.FCMToken, got, id)
		}
	}
	return dead
}

// redeliver puts every prepare and send message of lane back on its queue and drains them, and
// checks that no token was accepted twice and that the push counts of notification id are
// still want.
func (b *bulkHarness) redeliver(t *testing.T, lane notify.Lane, prepared, sends [][]byte, id string, want notify.ChannelStats) {
	t.Helper()
	ctx := t.Context()
	prepare, send := notify.LaneQueue(notify.StagePrepare, lane), notify.LaneQueue(notify.StageSend, lane)
	for queue, bodies := range map[string][][]byte{prepare: prepared, send: sends} {
		for _, body := range bodies {
			if err := b.q.Send(ctx, queue, notify.OutMessage{Body: body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.drain(t, prepare, b.p.Prepare())
	b.drain(t, send, b.p.Send())
	for tok, got := range b.fcm.accepted {
		if len(got) != 1 {
			t.Fatalf("after redelivery token %s accepted %d times", tok, len(got))
		}
	}
	again, _ := b.st.GetNotification(ctx, id)
	if got := again.Stats.Channels[notify.ChannelPush]; got != want {
		t.Fatalf("after redelivery push stats = %+v, want %+v", got, want)
	}
}

// A worker that died holding a batch: the batch is busy until its lease ends, then sent again
// whole, with the notification's collapse id so the device shows one message.
func TestBulkBatchOfADeadWorkerIsResentAfterItsLease(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	ctx := t.Context()
	n := &notify.Notification{
		ID: notify.NewID("n_", b.clock.Now()), Service: "shop", Category: notify.CategoryMarketing, Lane: notify.LaneBulk,
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "Today only"},
		Recipients: []notify.Recipient{{FCMToken: "tok-a"}, {FCMToken: "tok-b"}}, RecipientCount: 2,
		Status: notify.StatusProcessing, CreatedAt: b.clock.Now(), UpdatedAt: b.clock.Now(),
	}
	if _, _, err := b.st.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := b.st.SetChunksTotal(ctx, n.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.p.EnqueuePrepare(ctx, n, 0, 1, nil); err != nil {
		t.Fatal(err)
	}
	b.drain(t, "prepare-bulk", b.p.Prepare())
	msgs, err := b.q.Receive(ctx, "send-bulk", 10, time.Minute, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("send-bulk: %d messages, %v; want 1", len(msgs), err)
	}
	// The "dead worker": it claimed the batch and vanished before sending.
	var batch struct {
		ID string `json:"batch"`
	}
	if err := json.Unmarshal(msgs[0].Body, &batch); err != nil || batch.ID == "" {
		t.Fatalf("send message %s has no batch id (%v)", msgs[0].Body, err)
	}
	if c, err := b.st.ClaimBatch(ctx, n.ID, batch.ID, b.clock.Now(), b.clock.Now().Add(time.Minute)); err != nil || c.State != notify.BatchClaimed {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	// Its message comes back (visibility) 45 s into the lease: nothing is sent, and it is back
	// when the lease ends (and a second), not a whole lease later.
	b.clock.Add(45 * time.Second)
	if f := b.p.Send()(ctx, msgs); len(f) != 0 {
		t.Fatalf("send: %+v", f)
	}
	if len(b.fcm.accepted) != 0 {
		t.Fatalf("sent %v under another worker's live lease", b.fcm.accepted)
	}
	_ = b.q.Delete(ctx, "send-bulk", msgs[0].ReceiptHandle)
	b.clock.Add(15 * time.Second)
	if again, err := b.q.Receive(ctx, "send-bulk", 10, time.Minute, 0); err != nil || len(again) != 0 {
		t.Fatalf("send-bulk at the lease's end: %d messages, %v; want none before the second after it", len(again), err)
	}
	b.clock.Add(time.Second)
	back, err := b.q.Receive(ctx, "send-bulk", 10, time.Minute, 0)
	if err != nil || len(back) != 1 {
		t.Fatalf("send-bulk a second after the lease: %d messages, %v; want the batch back", len(back), err)
	}
	if f := b.p.Send()(ctx, back); len(f) != 0 {
		t.Fatalf("send after the lease: %+v", f)
	}
	_ = b.q.Delete(ctx, "send-bulk", back[0].ReceiptHandle)
	for _, tok := range []string{"tok-a", "tok-b"} {
		if got := b.fcm.accepted[tok]; len(got) != 1 || got[0] != n.ID {
			t.Fatalf("%s accepted %v, want once with collapse id %s", tok, got, n.ID)
		}
	}
}

// A campaign page is one prepare message for its run of chunks: each chunk is prepared once,
// a redelivery prepares nothing again, and a count out of range is refused.
func TestPrepareMessageForARunOfChunks(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	ctx := t.Context()
	const tokens = 1200 // chunks of 500: 0, 1 and 2
	rs := make([]notify.Recipient, tokens)
	for i := range rs {
		rs[i] = notify.Recipient{FCMToken: fmt.Sprintf("run-%04d-token-padding-to-a-realistic-length", i)}
	}
	n := &notify.Notification{ID: notify.NewID("n_", b.clock.Now()), Service: "shop", Category: notify.CategoryMarketing,
		Lane: notify.LaneBulk, Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "t", Body: "b"},
		Recipients: rs, Status: notify.StatusProcessing, Stats: notify.Stats{ChunksTotal: 3}, CreatedAt: b.clock.Now(), UpdatedAt: b.clock.Now()}
	if _, _, err := b.st.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"notification_id":%q,"chunk":0,"count":3}`, n.ID))
	for range 2 { // the second: a redelivery
		if err := b.q.Send(ctx, "prepare-bulk", notify.OutMessage{Body: body}); err != nil {
			t.Fatal(err)
		}
		b.drain(t, "prepare-bulk", b.p.Prepare())
		b.drain(t, "send-bulk", b.p.Send())
		b.drain(t, "record-bulk", b.p.Record())
	}
	for _, r := range rs {
		if got := b.fcm.accepted[r.FCMToken]; len(got) != 1 {
			t.Fatalf("token %s sent %d times, want once", r.FCMToken, len(got))
		}
	}
	stored, _ := b.st.GetNotification(ctx, n.ID)
	if stored.Status != notify.StatusSent || stored.Stats.ChunksPrepared != 3 {
		t.Fatalf("status %s, chunks prepared %d", stored.Status, stored.Stats.ChunksPrepared)
	}
	for _, bad := range []string{`{"notification_id":%q,"chunk":0,"count":11}`, `{"notification_id":%q,"chunk":2,"count":2}`} {
		fails := b.p.Prepare()(ctx, []notify.Message{{ID: "x", Body: []byte(fmt.Sprintf(bad, n.ID))}})
		if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EINVALID) {
			t.Fatalf("%s: %v, want invalid", bad, fails)
		}
	}
}
