package storetest

import (
	"testing"
	"time"

	"herald/internal/notify"
)

// historyCases cover Delivery.History: a retried delivery keeps its earlier attempts, stored
// with the outcome of the attempt after them, on the realtime lane's RecordBatch and on the
// claimed deliveries' CompleteDeliveries.
var historyCases = []storeCase{
	{"History/RecordBatchKeepsEarlierAttempts", testRecordBatchHistory},
	{"History/CompleteDeliveriesKeepsEarlierAttempts", testCompleteDeliveriesHistory},
}

// firstAttempt is a delivery's first attempt: the provider unavailable, a retry due a minute on.
func firstAttempt() notify.Attempt {
	return notify.Attempt{Attempt: 1, At: t0.Add(time.Second), Status: notify.DeliveryPending, Reason: notify.EUNAVAILABLE,
		Detail: "fcm: 503 Service Unavailable", RetryAt: t0.Add(time.Minute)}
}

func wantHistory(t *testing.T, d notify.Delivery, want ...notify.Attempt) {
	t.Helper()
	if len(d.History) != len(want) {
		t.Fatalf("delivery %s history = %+v, want %+v", d.ID, d.History, want)
	}
	for i, w := range want {
		g := d.History[i]
		if g.Attempt != w.Attempt || !g.At.Equal(w.At) || g.Status != w.Status || g.Reason != w.Reason ||
			g.Detail != w.Detail || !g.RetryAt.Equal(w.RetryAt) {
			t.Fatalf("delivery %s attempt %d = %+v, want %+v", d.ID, i, g, w)
		}
	}
}

func testRecordBatchHistory(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 1))
	pending := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "h", 2)
	_, err := s.AddChunk(t.Context(), n.ID, 0, push(2, 0, 0, 0))
	noErr(t, err)
	claimBatch(t, s, n.ID, "b1", t0)
	_, err = s.RecordBatch(t.Context(), n.ID, "b1", concat(
		recorded(pending[:1], notify.DeliveryPending, notify.EUNAVAILABLE, 1),
		recorded(pending[1:], notify.DeliverySent, "", 1)), t0)
	noErr(t, err)
	got := listed(t, s, n.ID)
	wantHistory(t, got[pending[0].ID]) // its own fields say how the first attempt went
	wantHistory(t, got[pending[1].ID])

	claimBatch(t, s, n.ID, "b1.r1", t0.Add(time.Minute))
	retried := recorded(pending[:1], notify.DeliverySent, "", 2)
	retried[0].History = []notify.Attempt{firstAttempt()}
	_, err = s.RecordBatch(t.Context(), n.ID, "b1.r1", retried, t0.Add(time.Minute))
	noErr(t, err)
	got = listed(t, s, n.ID)
	if d := got[pending[0].ID]; d.Status != notify.DeliverySent || d.Attempts != 2 {
		t.Fatalf("the retried delivery = %+v, want SENT on attempt 2", d)
	}
	wantHistory(t, got[pending[0].ID], firstAttempt())
	wantHistory(t, got[pending[1].ID])
}

func testCompleteDeliveriesHistory(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelAlimTalk, notify.DeliveryPending, "h", 1)
	_, err := s.CreateDeliveries(t.Context(), n.ID, 0, ds)
	noErr(t, err)
	id := ds[0].ID
	claim := func(at time.Time) {
		t.Helper()
		claimed, _, err := s.ClaimDeliveries(t.Context(), n.ID, []string{id}, at, at.Add(time.Minute))
		noErr(t, err)
		if len(claimed) != 1 {
			t.Fatalf("claimed %d at %v, want 1", len(claimed), at)
		}
	}
	complete := func(u notify.DeliveryUpdate) {
		t.Helper()
		u.ID = id
		k, err := s.CompleteDeliveries(t.Context(), n.ID, []notify.DeliveryUpdate{u})
		noErr(t, err)
		if k != 1 {
			t.Fatalf("CompleteDeliveries(%+v) applied %d, want 1", u, k)
		}
	}
	claim(t0)
	complete(notify.DeliveryUpdate{Status: notify.DeliveryPending, Reason: notify.EUNAVAILABLE, Detail: "503", At: t0.Add(time.Second)})
	wantHistory(t, listed(t, s, n.ID)[id])
	// The retry is accepted, its verdict to come: it carries the first attempt.
	claim(t0.Add(2 * time.Minute))
	complete(notify.DeliveryUpdate{Status: notify.DeliverySending, LeaseUntil: t0.Add(time.Hour), ProviderMessageID: "pm-1",
		At: t0.Add(2 * time.Minute), History: []notify.Attempt{firstAttempt()}})
	wantHistory(t, listed(t, s, n.ID)[id], firstAttempt())
	// The verdict carries no history: the earlier attempts stay.
	complete(notify.DeliveryUpdate{Status: notify.DeliverySent, ProviderMessageID: "pm-1", At: t0.Add(3 * time.Minute)})
	d := listed(t, s, n.ID)[id]
	if d.Status != notify.DeliverySent || d.Attempts != 2 {
		t.Fatalf("the delivery = %+v, want SENT after 2 attempts", d)
	}
	wantHistory(t, d, firstAttempt())
}
