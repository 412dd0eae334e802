// Package queuetest is the conformance suite for notify.Queue. Every adapter runs Run unchanged
// — the SQLite queue of the local runtime, and the SQS adapter against the in-repo SQS fake — so
// a stage that works locally works the same way in AWS.
//
// The suite speaks SQS's granularity: visibility timeouts, delays and waits are whole seconds
// (1 s is the shortest meaningful one), bodies are UTF-8 text (SQS carries only XML-legal
// characters), and timing is only checked as "not visible before X, visible by X plus generous
// slack". Subtests run in parallel on their own queues, so the whole suite takes a few seconds.
package queuetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/notify"
)

// Features states the honest differences between backends. The zero value is the strictest
// behaviour (the SQLite queue's); a backend sets a field only when it cannot do better.
type Features struct {
	// PeekReceives: the backend cannot browse a queue without receiving from it (SQS), so Peek
	// is a receive with a zero visibility timeout. It then raises ReceiveCount and turns earlier
	// receipts stale, and the suite does not check that Peek leaves messages untouched.
	PeekReceives bool
	// PeekOmitsAttributes: Peek returns ID, Body and SentAt but not Attributes and GroupID.
	PeekOmitsAttributes bool
	// NoOldestAge: Stats never reports OldestAgeSeconds (SQS has it only in CloudWatch).
	NoOldestAge bool
}

// Run runs the suite. newQueue must return a Queue holding exactly the queues in cfgs, empty;
// it is called once per subtest, with fresh names, and must clean up after itself (t.Cleanup).
func Run(t *testing.T, f Features, newQueue func(t *testing.T, cfgs []notify.QueueConfig) notify.Queue) {
	s := &suite{f: f, newQueue: newQueue}
	for _, c := range []struct {
		name string
		test func(*testing.T, *suite)
	}{
		{"RoundTrip", testRoundTrip},
		{"BodyLimit", testBodyLimit},
		{"UnknownQueue", testUnknownQueue},
		{"ReceiveMax", testReceiveMax},
		{"Batch25", testBatch25},
		{"Redelivery", testRedelivery},
		{"DefaultVisibility", testDefaultVisibility},
		{"ChangeVisibility", testChangeVisibility},
		{"Delay", testDelay},
		{"DeadLetter", testDeadLetter},
		{"DeadLetterOne", testDeadLetterOne},
		{"PurgeDeadLetters", testPurgeDeadLetters},
		{"Browse", testBrowse},
		{"Stats", testStats},
		{"Peek", testPeek},
		{"LongPollWakesOnSend", testLongPollWakesOnSend},
		{"LongPollTimesOut", testLongPollTimesOut},
		{"CancelWaitingReceive", testCancelWaitingReceive},
		{"ConcurrentConsumers", testConcurrentConsumers},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, s)
		})
	}
}

type suite struct {
	f        Features
	newQueue func(t *testing.T, cfgs []notify.QueueConfig) notify.Queue
}

// env is one subtest's queue pair: name dead-letters into dlq after MaxReceiveCount receives.
type env struct {
	t         *testing.T
	f         Features
	q         notify.Queue
	ctx       context.Context
	name, dlq string
}

const (
	long = 30 * time.Second // a visibility that never runs out during a subtest
	// collectFor bounds how long the suite waits for messages it expects; generous, because
	// it only matters when something is broken or the machine is very slow.
	collectFor = 10 * time.Second
)

// setup declares a queue with a 30 s visibility, 5 receives before dead-lettering, and its DLQ;
// tweak may change the source queue's config.
func (s *suite) setup(t *testing.T, tweak func(*notify.QueueConfig)) *env {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "q" + hex.EncodeToString(b[:])
	src := notify.QueueConfig{Name: name, VisibilityTimeout: long, MaxReceiveCount: 5, DLQ: name + "-dlq"}
	if tweak != nil {
		tweak(&src)
	}
	q := s.newQueue(t, []notify.QueueConfig{src, {Name: src.DLQ, VisibilityTimeout: long}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return &env{t: t, f: s.f, q: q, ctx: ctx, name: name, dlq: src.DLQ}
}

func (e *env) send(queue string, msgs ...notify.OutMessage) {
	e.t.Helper()
	if err := e.q.Send(e.ctx, queue, msgs...); err != nil {
		e.t.Fatalf("Send(%s, %d messages): %v", queue, len(msgs), err)
	}
}

func (e *env) sendBodies(queue string, bodies ...string) {
	e.t.Helper()
	msgs := make([]notify.OutMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = notify.OutMessage{Body: []byte(b)}
	}
	e.send(queue, msgs...)
}

func (e *env) receive(queue string, max int, visibility, wait time.Duration) []notify.Message {
	e.t.Helper()
	ms, err := e.q.Receive(e.ctx, queue, max, visibility, wait)
	if err != nil {
		e.t.Fatalf("Receive(%s, max %d): %v", queue, max, err)
	}
	if len(ms) > max {
		e.t.Fatalf("Receive(%s, max %d) returned %d messages", queue, max, len(ms))
	}
	return ms
}

// receiveN receives until it holds n messages, failing if they do not all come within
// collectFor or if more come than expected.
func (e *env) receiveN(queue string, n int, visibility time.Duration) []notify.Message {
	e.t.Helper()
	var got []notify.Message
	deadline := time.Now().Add(collectFor)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, e.receive(queue, min(10, n-len(got)), visibility, time.Second)...)
	}
	if len(got) != n {
		e.t.Fatalf("received %d messages from %s within %s, want %d", len(got), queue, collectFor, n)
	}
	return got
}

// expectEmpty checks that nothing is visible on queue right now.
func (e *env) expectEmpty(queue, why string) {
	e.t.Helper()
	if ms := e.receive(queue, 10, long, 0); len(ms) != 0 {
		e.t.Fatalf("%s: received %d messages from %s (first %q), want none", why, len(ms), queue, ms[0].Body)
	}
}

// expectStats polls Stats until it equals want: SQS reports approximate counts that may lag.
func (e *env) expectStats(queue string, want notify.QueueStats) {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		got, err := e.q.Stats(e.ctx, queue)
		if err != nil {
			e.t.Fatalf("Stats(%s): %v", queue, err)
		}
		age := got.OldestAgeSeconds
		got.OldestAgeSeconds = nil // checked by testStats
		if got == want {
			if age != nil && (want == (notify.QueueStats{}) || e.f.NoOldestAge) {
				e.t.Fatalf("Stats(%s) oldest age %d s, want none (empty queue, or a backend that does not report it)", queue, *age)
			}
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Stats(%s) = %+v, want %+v", queue, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) delete(queue string, ms ...notify.Message) {
	e.t.Helper()
	for _, m := range ms {
		if err := e.q.Delete(e.ctx, queue, m.ReceiptHandle); err != nil {
			e.t.Fatalf("Delete(%s, %q): %v", queue, m.Body, err)
		}
	}
}

func (e *env) changeVisibility(queue string, m notify.Message, d time.Duration) {
	e.t.Helper()
	if err := e.q.ChangeVisibility(e.ctx, queue, m.ReceiptHandle, d); err != nil {
		e.t.Fatalf("ChangeVisibility(%s, %q, %s): %v", queue, m.Body, d, err)
	}
}

func wantCode(t *testing.T, err error, code, what string) {
	t.Helper()
	if !notify.IsCode(err, code) {
		t.Fatalf("%s: error %v (code %q), want code %q", what, err, notify.ErrorCode(err), code)
	}
}

func byBody(ms []notify.Message) map[string]notify.Message {
	out := make(map[string]notify.Message, len(ms))
	for _, m := range ms {
		out[string(m.Body)] = m
	}
	return out
}

func bodies(ms []notify.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

func testRoundTrip(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	sent := []notify.OutMessage{
		{
			Body:       []byte("{\"text\":\"héllo \\\"wörld\\\"\\n漢字 🎉\"}\n\ttrailing  "),
			GroupID:    "svc-a",
			Attributes: map[string]string{"kind": "push", notify.AttrNotificationID: "n_123"},
		},
		{Body: []byte("plain")},
		{Body: []byte(strings.Repeat("0123456789abcdef", 4096))}, // 64 KiB
	}
	before := time.Now()
	e.send(e.name, sent...)
	after := time.Now()

	got := e.receiveN(e.name, len(sent), long)
	ids := map[string]bool{}
	received := byBody(got)
	for i, want := range sent {
		m, ok := received[string(want.Body)]
		if !ok {
			t.Fatalf("message %d (%.20q…) not received; got %q", i, want.Body, bodies(got))
		}
		if !bytes.Equal(m.Body, want.Body) {
			t.Errorf("message %d body = %q, want %q", i, m.Body, want.Body)
		}
		if m.GroupID != want.GroupID {
			t.Errorf("message %d GroupID = %q, want %q", i, m.GroupID, want.GroupID)
		}
		if len(m.Attributes) != 0 || len(want.Attributes) != 0 {
			if !maps.Equal(m.Attributes, want.Attributes) {
				t.Errorf("message %d Attributes = %v, want %v", i, m.Attributes, want.Attributes)
			}
		}
		if m.ReceiveCount != 1 {
			t.Errorf("message %d ReceiveCount = %d, want 1", i, m.ReceiveCount)
		}
		if m.ID == "" || m.ReceiptHandle == "" {
			t.Errorf("message %d: ID %q, ReceiptHandle %q: both must be set", i, m.ID, m.ReceiptHandle)
		}
		if ids[m.ID] {
			t.Errorf("message %d: ID %q not unique", i, m.ID)
		}
		ids[m.ID] = true
		// Backends keep SentAt in milliseconds or seconds; allow for that and for clock skew.
		if m.SentAt.Before(before.Add(-2*time.Second)) || m.SentAt.After(after.Add(2*time.Second)) {
			t.Errorf("message %d SentAt = %v, want between %v and %v", i, m.SentAt, before, after)
		}
	}
	e.expectEmpty(e.name, "received messages are invisible")
	e.delete(e.name, got...)
	e.expectStats(e.name, notify.QueueStats{})

	// As in SQS, deleting a message that is already gone is not an error: a consumer may repeat
	// a Delete whose answer it lost.
	if err := e.q.Delete(e.ctx, e.name, got[0].ReceiptHandle); err != nil {
		t.Fatalf("second Delete of the same receipt: %v, want nil", err)
	}
}

func testBodyLimit(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	limit := bytes.Repeat([]byte("x"), 1<<20)
	wantCode(t, e.q.Send(e.ctx, e.name, notify.OutMessage{Body: append(limit, 'y')}), notify.ETOOLARGE, "Send of 1 MiB + 1 byte")
	e.expectStats(e.name, notify.QueueStats{})

	e.send(e.name, notify.OutMessage{Body: limit})
	// A short visibility: if a loaded machine loses one 1 MiB response (the client retries the
	// call), the message comes back within the wait instead of hiding for `long`.
	m := e.receiveN(e.name, 1, 2*time.Second)[0]
	if !bytes.Equal(m.Body, limit) {
		t.Fatalf("1 MiB body came back as %d bytes, not equal to what was sent", len(m.Body))
	}
}

func testUnknownQueue(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	e.sendBodies(e.name, "known")
	m := e.receiveN(e.name, 1, long)[0]
	unknown := e.name + "-unknown"
	wantCode(t, e.q.Send(e.ctx, unknown, notify.OutMessage{Body: []byte("x")}), notify.ENOTFOUND, "Send")
	_, err := e.q.Receive(e.ctx, unknown, 1, long, 0)
	wantCode(t, err, notify.ENOTFOUND, "Receive")
	wantCode(t, e.q.Delete(e.ctx, unknown, m.ReceiptHandle), notify.ENOTFOUND, "Delete")
	wantCode(t, e.q.ChangeVisibility(e.ctx, unknown, m.ReceiptHandle, 0), notify.ENOTFOUND, "ChangeVisibility")
	_, err = e.q.Peek(e.ctx, unknown, 1)
	wantCode(t, err, notify.ENOTFOUND, "Peek")
	_, err = e.q.Redrive(e.ctx, unknown)
	wantCode(t, err, notify.ENOTFOUND, "Redrive")
	_, err = e.q.Stats(e.ctx, unknown)
	wantCode(t, err, notify.ENOTFOUND, "Stats")
}

func testReceiveMax(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	const n = 15
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("m%02d", i)
	}
	e.sendBodies(e.name, all...)

	got := e.receive(e.name, 3, long, time.Second) // receive fails the test on more than max
	if len(got) == 0 {
		t.Fatal("Receive(max 3) returned nothing from a queue of 15")
	}
	ten := e.receive(e.name, 10, long, time.Second)
	if len(ten) == 0 {
		t.Fatal("Receive(max 10) returned nothing from a queue of 12 or more")
	}
	got = append(got, ten...)
	got = append(got, e.receiveN(e.name, n-len(got), long)...)
	seen := map[string]bool{}
	for _, b := range bodies(got) {
		if seen[b] {
			t.Fatalf("%s received twice", b)
		}
		seen[b] = true
	}
	for _, max := range []int{0, 11} {
		_, err := e.q.Receive(e.ctx, e.name, max, long, 0)
		wantCode(t, err, notify.EINVALID, fmt.Sprintf("Receive(max %d)", max))
	}
}

func testBatch25(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	want := make([]string, 25)
	for i := range want {
		want[i] = fmt.Sprintf("batch-%02d", i)
	}
	e.sendBodies(e.name, want...)
	got := byBody(e.receiveN(e.name, len(want), long))
	for _, b := range want {
		if _, ok := got[b]; !ok {
			t.Errorf("%s missing", b)
		}
	}
}

func testRedelivery(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	e.sendBodies(e.name, "again")
	start := time.Now()
	first := e.receive(e.name, 1, time.Second, time.Second)
	if len(first) != 1 {
		t.Fatalf("first Receive got %d messages, want 1", len(first))
	}
	e.expectEmpty(e.name, "within its visibility timeout")

	second := e.receiveN(e.name, 1, long)[0]
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("received again after %s, before the 1 s visibility timeout ran out", d)
	}
	if second.ID != first[0].ID || string(second.Body) != "again" {
		t.Fatalf("second receive got %s %q, want %s \"again\"", second.ID, second.Body, first[0].ID)
	}
	if second.ReceiveCount != 2 {
		t.Errorf("ReceiveCount = %d, want 2", second.ReceiveCount)
	}
	if second.ReceiptHandle == first[0].ReceiptHandle {
		t.Error("the second receive returned the same receipt handle")
	}

	wantCode(t, e.q.Delete(e.ctx, e.name, first[0].ReceiptHandle), notify.ECONFLICT, "Delete with the stale receipt")
	wantCode(t, e.q.ChangeVisibility(e.ctx, e.name, first[0].ReceiptHandle, 0), notify.ECONFLICT, "ChangeVisibility with the stale receipt")
	e.expectStats(e.name, notify.QueueStats{InFlight: 1}) // the stale Delete deleted nothing
	e.expectEmpty(e.name, "after a stale ChangeVisibility(0)")

	e.delete(e.name, second)
	e.expectStats(e.name, notify.QueueStats{})
}

func testDefaultVisibility(t *testing.T, s *suite) {
	e := s.setup(t, func(c *notify.QueueConfig) { c.VisibilityTimeout = time.Second })
	e.sendBodies(e.name, "default")
	first := e.receive(e.name, 1, 0, time.Second) // 0: the queue's VisibilityTimeout
	if len(first) != 1 {
		t.Fatalf("Receive got %d messages, want 1", len(first))
	}
	e.expectEmpty(e.name, "within the queue's visibility timeout")
	if m := e.receiveN(e.name, 1, long)[0]; m.ReceiveCount != 2 {
		t.Errorf("ReceiveCount = %d, want 2", m.ReceiveCount)
	}
}

func testChangeVisibility(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	e.sendBodies(e.name, "cv")
	m := e.receiveN(e.name, 1, long)[0]
	e.changeVisibility(e.name, m, 0)
	// Visible at once: with a 30 s visibility, only ChangeVisibility(0) can explain a receive now.
	m = e.receiveN(e.name, 1, time.Second)[0]
	if m.ReceiveCount != 2 {
		t.Errorf("after ChangeVisibility(0): ReceiveCount = %d, want 2", m.ReceiveCount)
	}

	extended := time.Now()
	e.changeVisibility(e.name, m, 3*time.Second)
	time.Sleep(1500 * time.Millisecond) // past the original 1 s
	e.expectEmpty(e.name, "1.5 s after extending the visibility to 3 s")
	m = e.receiveN(e.name, 1, long)[0]
	if d := time.Since(extended); d < 2500*time.Millisecond {
		t.Errorf("visible again %s after extending to 3 s", d)
	}
	if m.ReceiveCount != 3 {
		t.Errorf("ReceiveCount = %d, want 3", m.ReceiveCount)
	}
	e.delete(e.name, m)
}

func testDelay(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	start := time.Now()
	e.send(e.name, notify.OutMessage{Body: []byte("later"), Delay: 2 * time.Second}, notify.OutMessage{Body: []byte("now")})
	got := e.receiveN(e.name, 1, long)
	if string(got[0].Body) != "now" {
		t.Fatalf("first receive got %q, want \"now\" (the other is delayed 2 s)", got[0].Body)
	}
	e.expectEmpty(e.name, "before the delay ran out")
	later := e.receiveN(e.name, 1, long)[0]
	if string(later.Body) != "later" {
		t.Fatalf("got %q, want \"later\"", later.Body)
	}
	if d := time.Since(start); d < 1900*time.Millisecond {
		t.Errorf("delayed message visible after %s, before its 2 s delay", d)
	}
}

func testDeadLetter(t *testing.T, s *suite) {
	e := s.setup(t, func(c *notify.QueueConfig) { c.MaxReceiveCount = 2 })
	sent := []notify.OutMessage{
		{Body: []byte("poison-1"), GroupID: "svc-p", Attributes: map[string]string{"kind": "poison"}},
		{Body: []byte("poison-2")},
	}
	e.send(e.name, sent...)
	ids := map[string]string{} // body → id
	for i := 1; i <= 2; i++ {
		for _, m := range e.receiveN(e.name, 2, long) {
			if m.ReceiveCount != i {
				t.Fatalf("receive %d: ReceiveCount = %d", i, m.ReceiveCount)
			}
			ids[string(m.Body)] = m.ID
			e.changeVisibility(e.name, m, 0) // "fail" fast instead of waiting out the timeout
		}
	}
	// The third receive would exceed MaxReceiveCount 2: both move to the DLQ instead.
	e.expectEmpty(e.name, "after MaxReceiveCount receives")
	e.expectStats(e.name, notify.QueueStats{})
	if ps, err := e.q.Peek(e.ctx, e.name, 10); err != nil || len(ps) != 0 {
		t.Fatalf("Peek(source) = %d messages, %v; want none", len(ps), err)
	}

	peeked, err := e.q.Peek(e.ctx, e.dlq, 10)
	if err != nil {
		t.Fatalf("Peek(dlq): %v", err)
	}
	if len(peeked) != 2 {
		t.Fatalf("Peek(dlq) = %q, want both poison messages", bodies(peeked))
	}
	for _, p := range peeked {
		if id, ok := ids[string(p.Body)]; !ok || p.ID != id {
			t.Errorf("DLQ holds %s %q; want the source's messages with their IDs %v", p.ID, p.Body, ids)
		}
		if string(p.Body) == "poison-1" && !s.f.PeekOmitsAttributes {
			if p.GroupID != "svc-p" || !maps.Equal(p.Attributes, sent[0].Attributes) {
				t.Errorf("Peek(dlq): GroupID %q, Attributes %v; want svc-p, %v", p.GroupID, p.Attributes, sent[0].Attributes)
			}
		}
	}
	// Consumers may receive from a DLQ too. Release the messages again before redriving: a
	// backend may redrive by receiving (SQS), which cannot see in-flight messages.
	for _, m := range e.receiveN(e.dlq, 2, long) {
		if _, ok := ids[string(m.Body)]; !ok {
			t.Errorf("received %q from the DLQ", m.Body)
		}
		e.changeVisibility(e.dlq, m, 0)
	}

	n, err := e.q.Redrive(e.ctx, e.dlq)
	if err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v; want 2, nil", n, err)
	}
	back := e.receiveN(e.name, 2, long)
	for _, m := range back {
		if _, ok := ids[string(m.Body)]; !ok {
			t.Errorf("redriven queue returned %q", m.Body)
		}
		if m.ReceiveCount != 1 {
			t.Errorf("redriven %q: ReceiveCount = %d, want 1 (reset)", m.Body, m.ReceiveCount)
		}
	}
	e.expectStats(e.dlq, notify.QueueStats{})
	if n, err := e.q.Redrive(e.ctx, e.dlq); err != nil || n != 0 {
		t.Fatalf("Redrive of an empty DLQ = %d, %v; want 0, nil", n, err)
	}
	e.delete(e.name, back...)
}

func testStats(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	e.expectStats(e.name, notify.QueueStats{})
	e.send(e.name,
		notify.OutMessage{Body: []byte("s1")},
		notify.OutMessage{Body: []byte("s2")},
		notify.OutMessage{Body: []byte("s3")},
		notify.OutMessage{Body: []byte("s4"), Delay: time.Minute},
	)
	if ms := e.receive(e.name, 1, long, time.Second); len(ms) != 1 {
		t.Fatalf("Receive(max 1) got %d messages", len(ms))
	}
	e.expectStats(e.name, notify.QueueStats{Visible: 2, InFlight: 1, Delayed: 1})
	e.expectStats(e.dlq, notify.QueueStats{})
	if s.f.NoOldestAge {
		return
	}
	// The oldest message was sent moments ago; a second later it is at least a second old.
	time.Sleep(1100 * time.Millisecond)
	got, err := e.q.Stats(e.ctx, e.name)
	if err != nil || got.OldestAgeSeconds == nil || *got.OldestAgeSeconds < 1 || *got.OldestAgeSeconds > 60 {
		t.Fatalf("Stats oldest age = %v, %v; want 1–60 s", got.OldestAgeSeconds, err)
	}
}

func testPeek(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	attrs := map[string]string{"kind": "peek"}
	e.send(e.name,
		notify.OutMessage{Body: []byte("p0"), GroupID: "g", Attributes: attrs},
		notify.OutMessage{Body: []byte("p1")},
		notify.OutMessage{Body: []byte("p2")},
	)
	two, err := e.q.Peek(e.ctx, e.name, 2)
	if err != nil || len(two) == 0 || len(two) > 2 {
		t.Fatalf("Peek(max 2) = %q, %v; want one or two messages", bodies(two), err)
	}
	all, err := e.q.Peek(e.ctx, e.name, 10)
	if err != nil || len(all) != 3 {
		t.Fatalf("Peek(max 10) = %q, %v; want the 3 messages", bodies(all), err)
	}
	p0, ok := byBody(all)["p0"]
	if !ok {
		t.Fatalf("Peek = %q, want p0 among them", bodies(all))
	}
	if !s.f.PeekOmitsAttributes && (p0.GroupID != "g" || !maps.Equal(p0.Attributes, attrs)) {
		t.Errorf("Peek p0: GroupID %q, Attributes %v; want g, %v", p0.GroupID, p0.Attributes, attrs)
	}
	if s.f.PeekReceives {
		return
	}
	for _, p := range all {
		if p.ReceiveCount != 0 {
			t.Errorf("Peek %q: ReceiveCount = %d, want 0 (never received)", p.Body, p.ReceiveCount)
		}
	}
	for _, m := range e.receiveN(e.name, 3, long) {
		if m.ReceiveCount != 1 {
			t.Errorf("receive after Peek: %q ReceiveCount = %d, want 1 (Peek is not a receive)", m.Body, m.ReceiveCount)
		}
	}
}

func testLongPollWakesOnSend(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	type result struct {
		ms  []notify.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		ms, err := e.q.Receive(e.ctx, e.name, 10, long, 10*time.Second)
		done <- result{ms, err}
	}()
	time.Sleep(200 * time.Millisecond) // let it start waiting; if it has not, it finds the message at once
	e.sendBodies(e.name, "wake")
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("waiting Receive: %v", r.err)
		}
		if len(r.ms) != 1 || string(r.ms[0].Body) != "wake" {
			t.Fatalf("waiting Receive returned %q, want the message sent while it waited", bodies(r.ms))
		}
	case <-time.After(8 * time.Second):
		t.Fatal("a Receive waiting 10 s did not return the message sent while it waited")
	}
}

func testLongPollTimesOut(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	start := time.Now()
	ms := e.receive(e.name, 10, long, time.Second)
	if len(ms) != 0 {
		t.Fatalf("Receive on an empty queue returned %q", bodies(ms))
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("Receive with a 1 s wait returned empty after %s", d)
	}
}

func testCancelWaitingReceive(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.q.Receive(ctx, e.name, 10, long, 20*time.Second)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Receive returned %v, want an error wrapping context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling ctx did not end a Receive waiting 20 s")
	}
}

// testConcurrentConsumers: with a visibility that never runs out, four consumers together see
// every message exactly once.
func testConcurrentConsumers(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	const n, consumers = 500, 4
	msgs := make([]notify.OutMessage, n)
	for i := range msgs {
		msgs[i] = notify.OutMessage{Body: fmt.Appendf(nil, "c%03d", i)}
	}
	e.send(e.name, msgs...)

	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		total atomic.Int64
		wg    sync.WaitGroup
	)
	for range consumers {
		wg.Go(func() {
			for total.Load() < n && ctx.Err() == nil {
				ms, err := e.q.Receive(ctx, e.name, 10, long, time.Second)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Receive: %v", err)
					}
					return
				}
				for _, m := range ms {
					mu.Lock()
					seen[string(m.Body)]++
					mu.Unlock()
					if err := e.q.Delete(ctx, e.name, m.ReceiptHandle); err != nil {
						t.Errorf("Delete %q: %v", m.Body, err)
					}
				}
				total.Add(int64(len(ms)))
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("consumers saw %d distinct messages, want %d", len(seen), n)
	}
	for b, c := range seen {
		if c != 1 {
			t.Errorf("%s seen %d times", b, c)
		}
	}
	e.expectEmpty(e.name, "after all were deleted")
	e.expectStats(e.name, notify.QueueStats{})
}

// testDeadLetterOne: an operator redrives one dead letter, and deletes another, by ID; the rest
// stay. A backend that is a notify.Queue must also be a notify.DeadLetters.
func testDeadLetterOne(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	dl, ok := e.q.(notify.DeadLetters)
	if !ok {
		t.Fatalf("%T does not implement notify.DeadLetters", e.q)
	}
	attrs := map[string]string{"herald-error": "boom"}
	e.send(e.dlq,
		notify.OutMessage{Body: []byte("dl-a"), GroupID: "svc-a", Attributes: attrs},
		notify.OutMessage{Body: []byte("dl-b")},
		notify.OutMessage{Body: []byte("dl-c")},
	)
	peeked, err := e.q.Peek(e.ctx, e.dlq, 10)
	if err != nil || len(peeked) != 3 {
		t.Fatalf("Peek(dlq) = %q, %v; want 3", bodies(peeked), err)
	}
	ids := map[string]string{}
	for _, p := range peeked {
		ids[string(p.Body)] = p.ID
	}

	if err := dl.RedriveDeadLetter(e.ctx, e.dlq, ids["dl-a"]); err != nil {
		t.Fatalf("RedriveDeadLetter(dl-a): %v", err)
	}
	back := e.receiveN(e.name, 1, long)
	if string(back[0].Body) != "dl-a" || back[0].ReceiveCount != 1 || back[0].GroupID != "svc-a" || !maps.Equal(back[0].Attributes, attrs) {
		t.Errorf("redriven message = %q receive count %d group %q attributes %v; want dl-a, 1, svc-a, %v",
			back[0].Body, back[0].ReceiveCount, back[0].GroupID, back[0].Attributes, attrs)
	}
	if err := dl.DeleteDeadLetter(e.ctx, e.dlq, ids["dl-b"]); err != nil {
		t.Fatalf("DeleteDeadLetter(dl-b): %v", err)
	}
	for name, err := range map[string]error{
		"delete again":      dl.DeleteDeadLetter(e.ctx, e.dlq, ids["dl-b"]),
		"redrive deleted":   dl.RedriveDeadLetter(e.ctx, e.dlq, ids["dl-b"]),
		"redrive again":     dl.RedriveDeadLetter(e.ctx, e.dlq, ids["dl-a"]),
		"unknown id":        dl.DeleteDeadLetter(e.ctx, e.dlq, "no-such-message"),
		"unknown queue":     dl.DeleteDeadLetter(e.ctx, "no-such-queue-dlq", ids["dl-c"]),
		"unknown queue too": dl.RedriveDeadLetter(e.ctx, "no-such-queue-dlq", ids["dl-c"]),
	} {
		if !notify.IsCode(err, notify.ENOTFOUND) {
			t.Errorf("%s: %v, want ENOTFOUND", name, err)
		}
	}
	left, err := e.q.Peek(e.ctx, e.dlq, 10)
	if err != nil || len(left) != 1 || string(left[0].Body) != "dl-c" {
		t.Fatalf("DLQ after one redrive and one delete = %q, %v; want only dl-c", bodies(left), err)
	}
	e.expectEmpty(e.name, "after the one redriven message was received")
}

// testPurgeDeadLetters: an operator purges a DLQ — every message goes, received or not, and the
// count says how many — and nothing else: the source queue keeps its messages.
func testPurgeDeadLetters(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	dl := e.q.(notify.DeadLetters)
	e.send(e.dlq, notify.OutMessage{Body: []byte("p-a")}, notify.OutMessage{Body: []byte("p-b")}, notify.OutMessage{Body: []byte("p-c")})
	e.send(e.name, notify.OutMessage{Body: []byte("keep")})
	n, err := dl.PurgeDeadLetters(e.ctx, e.dlq)
	if err != nil || n != 3 {
		t.Fatalf("PurgeDeadLetters = %d, %v; want 3", n, err)
	}
	deadline := time.Now().Add(70 * time.Second) // SQS finishes a purge within a minute
	for {
		left, err := e.q.Peek(e.ctx, e.dlq, 10)
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the DLQ still holds %q (%v)", bodies(left), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.receiveN(e.name, 1, long); string(got[0].Body) != "keep" {
		t.Fatalf("the source queue lost its message: %q", bodies(got))
	}
	if _, err := dl.PurgeDeadLetters(e.ctx, "no-such-queue-dlq"); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("purge of an unknown queue: %v, want ENOTFOUND", err)
	}
}

// testBrowse: a queue that can list its messages without receiving them (notify.QueueBrowser)
// lists each state apart, oldest first, in pages, and receives nothing doing so.
func testBrowse(t *testing.T, s *suite) {
	e := s.setup(t, nil)
	b, ok := e.q.(notify.QueueBrowser)
	if !ok {
		t.Skipf("%T lists no messages (SQS shows a message only by receiving it)", e.q)
	}
	e.send(e.name, notify.OutMessage{Body: []byte("b-1")}, notify.OutMessage{Body: []byte("b-2")}, notify.OutMessage{Body: []byte("b-3")})
	e.send(e.name, notify.OutMessage{Body: []byte("b-later"), Delay: 10 * time.Minute})
	got := e.receiveN(e.name, 1, long) // b-1 in flight
	list := func(state string) []string {
		var out []string
		after := ""
		for range 10 {
			page, next, err := b.Browse(e.ctx, e.name, state, after, 1)
			if err != nil {
				t.Fatalf("Browse(%s): %v", state, err)
			}
			out = append(out, bodies(page)...)
			if next == "" {
				return out
			}
			after = next
		}
		t.Fatalf("Browse(%s) did not end", state)
		return nil
	}
	if v := list(notify.MessageVisible); !slices.Equal(v, []string{"b-2", "b-3"}) {
		t.Errorf("visible = %q, want b-2, b-3", v)
	}
	if v := list(notify.MessageInFlight); !slices.Equal(v, []string{string(got[0].Body)}) {
		t.Errorf("in flight = %q, want %q", v, got[0].Body)
	}
	if v := list(notify.MessageDelayed); !slices.Equal(v, []string{"b-later"}) {
		t.Errorf("delayed = %q, want b-later", v)
	}
	if _, _, err := b.Browse(e.ctx, e.name, "asleep", "", 10); !notify.IsCode(err, notify.EINVALID) {
		t.Errorf("an unknown state: %v, want EINVALID", err)
	}
	e.expectStats(e.name, notify.QueueStats{Visible: 2, InFlight: 1, Delayed: 1})
}
