package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

// lateAlimTalk accepts every AlimTalk with its verdict pending, as Solapi does, and answers
// Verdicts by the number's ending: 0011 is pending at the first look and unreachable from the
// second, 0010 pending and then delivered, 0013 never has a verdict, 0014's first send fails
// transiently (its second is delivered), 0015 is refused; any other number is delivered at the
// first look.
type lateAlimTalk struct {
	mu    sync.Mutex
	got   map[string]int    // address -> AlimTalks accepted
	looks map[string]int    // provider message id -> times asked
	calls [][]string        // the provider message ids of each Verdicts call
	addr  map[string]string // provider message id -> address
}

func newLateAlimTalk() *lateAlimTalk {
	return &lateAlimTalk{got: map[string]int{}, looks: map[string]int{}, addr: map[string]string{}}
}

func (f *lateAlimTalk) Provider() notify.Provider { return notify.ProviderAlimTalk }
func (f *lateAlimTalk) MaxBatch() int             { return 10 }
func (f *lateAlimTalk) MaxVerdictBatch() int      { return 10 }
func (f *lateAlimTalk) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		f.got[m.Address]++
		id := fmt.Sprintf("M4V%s-%d", m.DeliveryID, f.got[m.Address])
		f.addr[id] = m.Address
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, ProviderMessageID: id, VerdictPending: true}
	}
	return out, nil
}

func (f *lateAlimTalk) Verdicts(_ context.Context, qs []notify.VerdictQuery) ([]notify.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	out := make([]notify.SendResult, len(qs))
	for i, q := range qs {
		ids = append(ids, q.ProviderMessageID)
		f.looks[q.ProviderMessageID]++
		first := f.looks[q.ProviderMessageID] == 1
		r := notify.SendResult{DeliveryID: q.DeliveryID, ProviderMessageID: q.ProviderMessageID}
		switch a := f.addr[q.ProviderMessageID]; {
		case a == "":
			return nil, notify.Errorf(notify.EINTERNAL, "asked about %s, never sent", q.ProviderMessageID)
		case strings.HasSuffix(a, "0013"), first && (strings.HasSuffix(a, "0011") || strings.HasSuffix(a, "0010")):
			r.VerdictPending = true
		case strings.HasSuffix(a, "0011"):
			r.Err = notify.Errorf(notify.EUNREACHABLE, "3104 not a KakaoTalk user")
		case strings.HasSuffix(a, "0014") && f.got[a] == 1:
			r.Err = notify.Errorf(notify.EUNAVAILABLE, "3043 handset off")
		case strings.HasSuffix(a, "0015"):
			r.Err = notify.Errorf(notify.EREJECTED, "3103 message does not match the template")
		}
		out[i] = r
	}
	f.calls = append(f.calls, ids)
	return out, nil
}

var _ notify.VerdictChecker = (*lateAlimTalk)(nil)

// laneHarness is a pipeline on a fresh SQLite store and queue with both lanes' queues.
type laneHarness struct {
	p     *pipeline.Pipeline
	st    *sqlite.Store
	q     *sqlite.Queue
	clock *stepClock
}

func newLaneHarness(t *testing.T, senders []notify.Sender, cfg pipeline.Config) *laneHarness {
	t.Helper()
	b := newBulkHarnessWith(t, senders, cfg) // both lanes' queues
	return &laneHarness{p: b.p, st: b.st, q: b.q, clock: b.clock}
}

// step handles what queue holds now, once; it returns the bodies handled.
func (h *laneHarness) step(t *testing.T, queue string, fn pipeline.Handler) [][]byte {
	t.Helper()
	msgs, err := h.q.Receive(t.Context(), queue, 10, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]byte
	for _, f := range fn(t.Context(), msgs) {
		t.Fatalf("%s: message %s failed: %v", queue, f.MessageID, f.Err)
	}
	for _, m := range msgs {
		bodies = append(bodies, m.Body)
		if err := h.q.Delete(t.Context(), queue, m.ReceiptHandle); err != nil {
			t.Fatal(err)
		}
	}
	return bodies
}

// drain handles queue until it holds nothing, delayed messages included (the clock moves on
// while only delayed ones are left).
func (h *laneHarness) drain(t *testing.T, queue string, fn pipeline.Handler) [][]byte {
	t.Helper()
	var bodies [][]byte
	for range 500 {
		got := h.step(t, queue, fn)
		if len(got) == 0 {
			st, _ := h.q.Stats(t.Context(), queue)
			if st.Delayed == 0 {
				return bodies
			}
			h.clock.Add(2 * time.Second)
			continue
		}
		bodies = append(bodies, got...)
	}
	t.Fatalf("%s never drained", queue)
	return nil
}

func lateNotification(clock *stepClock, l notify.Lane, phones ...string) *notify.Notification {
	rs := make([]notify.Recipient, len(phones))
	for i, p := range phones {
		rs[i] = notify.Recipient{Phone: p}
	}
	return &notify.Notification{
		ID: notify.NewID("n_", clock.Now()), Service: "shop", Category: notify.CategoryTransactional, Lane: l,
		Channels:   []notify.Channel{notify.ChannelAlimTalk},
		Content:    notify.Content{Body: "배송이 시작되었습니다", Data: map[string]string{notify.AlimTalkTemplateKey: "TPL"}},
		Recipients: rs, RecipientCount: len(rs), Status: notify.StatusProcessing, CreatedAt: clock.Now(), UpdatedAt: clock.Now(),
	}
}

func createAndPrepare(t *testing.T, h *laneHarness, n *notify.Notification) {
	t.Helper()
	if _, _, err := h.st.CreateNotification(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	if err := h.st.SetChunksTotal(t.Context(), n.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.p.EnqueuePrepare(t.Context(), n, 0, 1, nil); err != nil {
		t.Fatal(err)
	}
}

func isCheck(body []byte) bool { return strings.Contains(string(body), `"kind":"verdict_check"`) }

// On the realtime lane an AlimTalk Solapi accepted stays SENDING, and its notification
// unfinished, until a verdict check reads Kakao's verdict: a late "not a KakaoTalk user" gets
// one SMS with the same text (both deliveries on the notification), a late delivery is SENT
// with no SMS, one that never gets a verdict is SENT "verdict_unknown" at the deadline — and a
// redelivery of every check sends and counts nothing twice.
func TestLateVerdictsRealtime(t *testing.T) {
	t.Parallel()
	alim := newLateAlimTalk()
	sms := &fakeText{prov: notify.ProviderTwilio, got: map[string][]string{}}
	h := newLaneHarness(t, []notify.Sender{alim, sms}, pipeline.Config{RetryBase: time.Second, RetryMax: time.Second,
		AlimTalkFallback: true, VerdictCheck: 2 * time.Second, VerdictDeadline: 5 * time.Minute})
	ctx := t.Context()
	const ok, lateOK, lateGone, never = "+821012345678", "+821055550010", "+821055550011", "+821055550013"
	n := lateNotification(h.clock, notify.LaneRealtime, ok, lateOK, lateGone, never)
	createAndPrepare(t, h, n)
	h.drain(t, "prepare-realtime", h.p.Prepare())

	// The send: every AlimTalk accepted, none done.
	first := h.step(t, "send-realtime", h.p.Send())
	if len(first) != 1 || isCheck(first[0]) {
		t.Fatalf("first send step handled %d messages", len(first))
	}
	h.drain(t, "record-realtime", h.p.Record())
	stored, err := h.st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.Final() || stored.Stats.Complete() {
		t.Fatalf("verdicts pending, yet status %s, complete %v, stats %+v", stored.Status, stored.Stats.Complete(), stored.Stats.Channels)
	}
	ds, _, err := h.st.ListDeliveries(ctx, n.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Status != notify.DeliverySending || !strings.HasPrefix(d.ProviderMessageID, "M4V") || !strings.Contains(d.Detail, "verdict") {
			t.Fatalf("delivery %+v before its verdict, want SENDING with its provider message id", d)
		}
	}
	// A duplicate of the send message, two minutes on (past the send lease): the accepted
	// deliveries are still claimed, so nothing is sent again.
	h.clock.Add(2 * time.Minute)
	if err := h.q.Send(ctx, "send-realtime", notify.OutMessage{Body: first[0]}); err != nil {
		t.Fatal(err)
	}

	sends := h.drain(t, "send-realtime", h.p.Send())
	h.drain(t, "record-realtime", h.p.Record())
	var checks [][]byte
	for _, b := range sends {
		if isCheck(b) {
			checks = append(checks, b)
		}
	}
	if len(checks) < 3 {
		t.Fatalf("%d verdict checks, want one per look until the deadline", len(checks))
	}
	if len(alim.calls) == 0 || len(alim.calls[0]) != 4 {
		t.Fatalf("verdict calls %v: want the first to ask about all 4 at once", alim.calls)
	}
	for _, b := range checks { // every check again: nothing twice
		if err := h.q.Send(ctx, "send-realtime", notify.OutMessage{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	h.drain(t, "send-realtime", h.p.Send())
	h.drain(t, "record-realtime", h.p.Record())

	for _, a := range []string{ok, lateOK, lateGone, never} {
		if got := alim.got["0"+strings.TrimPrefix(a, "+82")]; got != 1 {
			t.Errorf("%s: %d AlimTalks, want 1", a, got)
		}
	}
	if got := sms.got[lateGone]; len(got) != 1 || got[0] != "배송이 시작되었습니다" {
		t.Errorf("late unreachable: sms %v, want the AlimTalk's text once", got)
	}
	if len(sms.got) != 1 {
		t.Errorf("sms sent to %v, want only the unreachable number", sms.got)
	}

	stored, err = h.st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != notify.StatusSent {
		t.Errorf("status %s, want SENT", stored.Status)
	}
	if got, want := stored.Stats.Channels[notify.ChannelAlimTalk], (notify.ChannelStats{Total: 4, Sent: 3, Skipped: 1}); got != want {
		t.Errorf("alimtalk stats %+v, want %+v", got, want)
	}
	if got, want := stored.Stats.Channels[notify.ChannelSMS], (notify.ChannelStats{Total: 1, Sent: 1}); got != want {
		t.Errorf("sms stats %+v, want %+v", got, want)
	}
	if stored.Stats.SkippedByReason[notify.ReasonUnreachable] != 1 {
		t.Errorf("skipped by reason %v", stored.Stats.SkippedByReason)
	}
	ds, _, err = h.st.ListDeliveries(ctx, n.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 {
		t.Fatalf("%d deliveries, want 4 AlimTalk and 1 SMS: %+v", len(ds), ds)
	}
	byAddr := map[string][]notify.Delivery{}
	for _, d := range ds {
		byAddr[d.AddressMasked] = append(byAddr[d.AddressMasked], d)
	}
	for _, d := range ds {
		switch {
		case d.Channel == notify.ChannelSMS:
			if d.Status != notify.DeliverySent || !strings.Contains(d.Detail, "fallback of alimtalk delivery") {
				t.Errorf("sms delivery %+v", d)
			}
		case d.Status == notify.DeliverySkipped:
			if d.Reason != notify.ReasonUnreachable || !strings.Contains(d.Detail, "3104") || !strings.Contains(d.Detail, "fell back to SMS delivery") ||
				!strings.HasPrefix(d.ProviderMessageID, "M4V") {
				t.Errorf("unreachable alimtalk delivery %+v", d)
			}
		case d.Status == notify.DeliverySent && d.Reason == notify.ReasonVerdictUnknown:
			if !strings.Contains(d.Detail, "no final verdict") {
				t.Errorf("verdict-unknown delivery %+v", d)
			}
		case d.Status == notify.DeliverySent:
			if d.Reason != "" || !strings.HasPrefix(d.ProviderMessageID, "M4V") {
				t.Errorf("delivered alimtalk %+v", d)
			}
		default:
			t.Errorf("delivery %+v", d)
		}
	}
	var unknown int
	for _, d := range ds {
		if d.Reason == notify.ReasonVerdictUnknown {
			unknown++
		}
	}
	if unknown != 1 {
		t.Errorf("%d deliveries verdict_unknown, want the one never reported", unknown)
	}
}

// On the bulk lane a batch's late verdicts are counted once, with the check's own batch record:
// the notification stays unfinished until they are in, a late unreachable member gets one SMS,
// and a redelivery of every send and check message counts and sends nothing twice.
func TestLateVerdictsBulk(t *testing.T) {
	t.Parallel()
	alim := newLateAlimTalk()
	sms := &fakeText{prov: notify.ProviderTwilio, got: map[string][]string{}}
	h := newLaneHarness(t, []notify.Sender{alim, sms}, pipeline.Config{RetryBase: time.Second, RetryMax: time.Second,
		AlimTalkFallback: true, VerdictCheck: 2 * time.Second, VerdictDeadline: time.Hour})
	ctx := t.Context()
	var phones []string
	gone := 0
	for i := range 7 {
		suffix := []string{"0011", "0010", "1000"}[i%3]
		if suffix == "0011" {
			gone++
		}
		phones = append(phones, fmt.Sprintf("+82105%03d%s", i, suffix))
	}
	n := lateNotification(h.clock, notify.LaneBulk, phones...)
	createAndPrepare(t, h, n)
	h.drain(t, "prepare-bulk", h.p.Prepare())
	h.step(t, "send-bulk", h.p.Send())
	h.drain(t, "record-bulk", h.p.Record())
	if stored, err := h.st.GetNotification(ctx, n.ID); err != nil || stored.Status.Final() || stored.Stats.Complete() {
		t.Fatalf("verdicts pending, yet %+v, %v", stored, err)
	}
	sends := h.drain(t, "send-bulk", h.p.Send())
	h.drain(t, "record-bulk", h.p.Record())
	for _, b := range sends {
		if err := h.q.Send(ctx, "send-bulk", notify.OutMessage{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	h.drain(t, "send-bulk", h.p.Send())
	h.drain(t, "record-bulk", h.p.Record())

	for _, p := range phones {
		national := "0" + strings.TrimPrefix(p, "+82")
		if strings.HasSuffix(p, "0011") {
			if got := sms.got[p]; len(got) != 1 {
				t.Errorf("late unreachable %s: sms %v", p, got)
			}
		} else if len(sms.got[p]) != 0 {
			t.Errorf("delivered %s got an sms", p)
		}
		if alim.got[national] != 1 {
			t.Errorf("%s: %d AlimTalks, want 1", p, alim.got[national])
		}
	}
	stored, err := h.st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stored.Stats.Channels[notify.ChannelAlimTalk], (notify.ChannelStats{Total: 7, Sent: 7 - gone, Skipped: gone}); got != want {
		t.Errorf("alimtalk stats %+v, want %+v", got, want)
	}
	if got, want := stored.Stats.Channels[notify.ChannelSMS], (notify.ChannelStats{Total: gone, Sent: gone}); got != want {
		t.Errorf("sms stats %+v, want %+v", got, want)
	}
	if stored.Status != notify.StatusSent {
		t.Errorf("status %s, want SENT", stored.Status)
	}
}

// A late verdict is classified like an immediate answer: a transient failure (the handset was
// off) sends the AlimTalk again, whose own verdict is then read; a refusal ends FAILED with no
// fallback.
func TestLateVerdictRetryAndRefusal(t *testing.T) {
	t.Parallel()
	alim := newLateAlimTalk()
	sms := &fakeText{prov: notify.ProviderTwilio, got: map[string][]string{}}
	h := newLaneHarness(t, []notify.Sender{alim, sms}, pipeline.Config{RetryBase: time.Second, RetryMax: time.Second,
		AlimTalkFallback: true, VerdictCheck: 2 * time.Second})
	n := lateNotification(h.clock, notify.LaneRealtime, "+821055550014", "+821055550015")
	createAndPrepare(t, h, n)
	h.drain(t, "prepare-realtime", h.p.Prepare())
	h.drain(t, "send-realtime", h.p.Send())
	h.drain(t, "record-realtime", h.p.Record())

	if got := alim.got["01055550014"]; got != 2 {
		t.Errorf("transient late failure: %d AlimTalks, want 2 (sent again)", got)
	}
	if got := alim.got["01055550015"]; got != 1 || len(sms.got) != 0 {
		t.Errorf("refused: %d AlimTalks, sms %v; want 1 and none", got, sms.got)
	}
	stored, err := h.st.GetNotification(t.Context(), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != notify.StatusPartiallySent || stored.Stats.FailedByReason[notify.ReasonRejected] != 1 {
		t.Errorf("status %s, failed %v; want PARTIALLY_SENT, 1 rejected", stored.Status, stored.Stats.FailedByReason)
	}
	ds, _, err := h.st.ListDeliveries(t.Context(), n.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		switch {
		case d.Status == notify.DeliverySent && d.Attempts == 2:
		case d.Status == notify.DeliveryFailed && d.Reason == notify.ReasonRejected && strings.Contains(d.Detail, "3103"):
		default:
			t.Errorf("delivery %+v", d)
		}
	}
}
