package storetest

import (
	"testing"
	"time"

	"herald/internal/notify"
)

var expressCases = []storeCase{
	{"Express/CreateReadList", testExpressCreateReadList},
	{"Express/CompleteSetsFinalStatus", testExpressComplete},
	{"Express/CompleteKeepsCanceled", testExpressCompleteKeepsCanceled},
	{"Express/CompleteWithNothingLeft", testExpressCompleteNothingLeft},
	{"Express/HandOverToDeliveryRecords", testExpressHandOver},
	{"Express/HandOverToPrepareAgain", testExpressHandOverReprepare},
	{"Express/Unknown", testExpressUnknown},
	{"Express/KeyOfAnotherID", testExpressKeyOfAnotherID},
	{"Express/CompleteBatch", testExpressCompleteBatch},
	{"Express/ListingAcrossHandOver", testExpressListingAcrossHandOver},
}

// A listing begun while the deliveries are in the notification's record goes on after a
// hand-over moved them into delivery records, with the same cursor: each listed once.
func testExpressListingAcrossHandOver(t *testing.T, s notify.Store) {
	n, push, inbox := newExpress("billing", "")
	mustCreateNotification(t, s, n)
	first, next, err := s.ListDeliveries(t.Context(), n.ID, "", 1)
	noErr(t, err)
	if len(first) != 1 || next == "" {
		t.Fatalf("first page: %d deliveries, next %q; want 1 and a cursor", len(first), next)
	}
	noErr(t, s.HandOverExpress(t.Context(), n.ID, nil, true))
	rest, next, err := s.ListDeliveries(t.Context(), n.ID, next, 10)
	noErr(t, err)
	if next != "" {
		t.Fatalf("second page: next %q, want the end", next)
	}
	sameSet(t, "listed across the hand-over", deliveryIDs(concat(first, rest)), []string{push.ID, inbox.ID})
}

// newExpress is an express notification as ingest stores it: a push delivery claimed under a
// lease and an inbox delivery written SENT, counted.
func newExpress(service, key string) (*notify.Notification, notify.Delivery, notify.Delivery) {
	n := newNotification(service, key)
	n.Channels = []notify.Channel{notify.ChannelPush, notify.ChannelInbox}
	if key != "" {
		n.ID = notify.NotificationIDFor(service, key, t0)
	}
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliverySending, "x", 1)[0]
	push.Attempts, push.LeaseUntil, push.UserID = 1, t0.Add(time.Minute), "u1"
	inbox := makeDeliveries(n.ID, notify.ChannelInbox, notify.DeliverySent, "x", 1)[0]
	inbox.UserID = "u1"
	n.Express = &notify.Express{Deliveries: []notify.Delivery{push, inbox}, Lease: push.LeaseUntil}
	n.Status = notify.StatusProcessing
	n.Stats.ChunksTotal, n.Stats.ChunksPrepared = 1, 1
	return n, push, inbox
}

func testExpressCreateReadList(t *testing.T, s notify.Store) {
	n, push, inbox := newExpress("billing", "login-1")
	stored := mustCreateNotification(t, s, n)
	wantChannel(t, stored.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1})
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if got.Express == nil || len(got.Express.Deliveries) != 2 || got.Status != notify.StatusProcessing {
		t.Fatalf("read back: status %s, express %+v", got.Status, got.Express)
	}
	sameTime(t, "express lease", got.Express.Lease, push.LeaseUntil)
	if got.Stats.ChunksTotal != 1 || got.Stats.ChunksPrepared != 1 || !got.Express.Pending() {
		t.Fatalf("stats %+v, pending %v", got.Stats, got.Express.Pending())
	}
	wantChannel(t, got.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1})
	wantChannel(t, got.Stats, notify.ChannelInbox, notify.ChannelStats{Total: 1, Sent: 1})
	rs, err := s.GetRecipients(t.Context(), n.ID, 0, 10)
	noErr(t, err)
	if len(rs) != 1 || rs[0].UserID != "u1" {
		t.Fatalf("recipients %+v", rs)
	}
	// A second create with the same id is the first one, express and all.
	again, _, _ := newExpress("billing", "login-1")
	dup, created, err := s.CreateNotification(t.Context(), again)
	noErr(t, err)
	if created || dup.ID != n.ID || dup.Express == nil {
		t.Fatalf("second create: created %v, id %s, express %v", created, dup.ID, dup.Express)
	}
	// Listed like any deliveries: in id order, paged, masked.
	var listed []notify.Delivery
	cursor := ""
	for range 3 {
		page, next, err := s.ListDeliveries(t.Context(), n.ID, cursor, 1)
		noErr(t, err)
		listed = append(listed, page...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(listed) != 2 || listed[0].ID > listed[1].ID {
		t.Fatalf("listed %+v", listed)
	}
	for _, d := range listed {
		want := push
		if d.Channel == notify.ChannelInbox {
			want = inbox
		}
		if d.ID != want.ID || d.NotificationID != n.ID || d.Status != want.Status || d.AddressMasked != want.AddressMasked ||
			d.Address != "" || d.UserID != "u1" || d.Provider != want.Provider {
			t.Fatalf("listed %+v, want %+v", d, want)
		}
	}
}

func testExpressComplete(t *testing.T, s notify.Store) {
	n, push, _ := newExpress("billing", "k")
	mustCreateNotification(t, s, n)
	at := t0.Add(time.Second)
	k, err := s.CompleteExpress(t.Context(), n.ID, []notify.DeliveryUpdate{
		{ID: push.ID, Status: notify.DeliverySent, ProviderMessageID: "projects/p/messages/1", At: at},
		{ID: "d_unknown", Status: notify.DeliverySent, At: at},
	})
	noErr(t, err)
	if k != 1 {
		t.Fatalf("applied %d, want 1", k)
	}
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if got.Status != notify.StatusSent || got.Express.Pending() {
		t.Fatalf("status %s, pending %v", got.Status, got.Express.Pending())
	}
	wantChannel(t, got.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
	// A verdict again (a redelivery) changes nothing.
	k, err = s.CompleteExpress(t.Context(), n.ID, []notify.DeliveryUpdate{{ID: push.ID, Status: notify.DeliveryFailed, Reason: "rejected", At: at}})
	noErr(t, err)
	if k != 0 {
		t.Fatalf("a second verdict applied %d", k)
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
	ds, _, err := s.ListDeliveries(t.Context(), n.ID, "", 10)
	noErr(t, err)
	for _, d := range ds {
		if d.ID == push.ID && (d.Status != notify.DeliverySent || d.ProviderMessageID != "projects/p/messages/1" || d.Attempts != 1) {
			t.Fatalf("push after completion %+v", d)
		}
	}
	// A failure is counted by reason, and decides the status.
	m, push2, _ := newExpress("billing", "k2")
	mustCreateNotification(t, s, m)
	_, err = s.CompleteExpress(t.Context(), m.ID, []notify.DeliveryUpdate{{ID: push2.ID, Status: notify.DeliveryFailed, Reason: notify.ReasonUnregistered, At: at}})
	noErr(t, err)
	got, err = s.GetNotification(t.Context(), m.ID)
	noErr(t, err)
	if got.Status != notify.StatusPartiallySent || got.Stats.FailedByReason[notify.ReasonUnregistered] != 1 {
		t.Fatalf("status %s, failed by reason %v (the inbox item was delivered, the push failed)", got.Status, got.Stats.FailedByReason)
	}
}

func testExpressCompleteKeepsCanceled(t *testing.T, s notify.Store) {
	n, push, _ := newExpress("billing", "")
	mustCreateNotification(t, s, n)
	noErr(t, s.SetNotificationStatus(t.Context(), n.ID, notify.StatusCanceled, notify.StatusProcessing))
	_, err := s.CompleteExpress(t.Context(), n.ID, []notify.DeliveryUpdate{{ID: push.ID, Status: notify.DeliverySent, At: t0}})
	noErr(t, err)
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if got.Status != notify.StatusCanceled {
		t.Fatalf("status %s, want CANCELED kept", got.Status)
	}
	wantChannel(t, got.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
}

// A retry: the deliveries become records (the retried one PENDING), counted once, and the
// ordinary claim and completion take it from there.
func testExpressHandOver(t *testing.T, s notify.Store) {
	n, push, inbox := newExpress("billing", "")
	mustCreateNotification(t, s, n)
	noErr(t, s.HandOverExpress(t.Context(), n.ID, []notify.DeliveryUpdate{
		{ID: push.ID, Status: notify.DeliveryPending, Reason: notify.ETHROTTLED, Detail: "slow down", At: t0}}, false))
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if got.Express != nil || got.Stats.ChunksPrepared != 1 || got.Status != notify.StatusProcessing {
		t.Fatalf("after hand-over: express %v, stats %+v, status %s", got.Express, got.Stats, got.Status)
	}
	wantChannel(t, got.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1})
	wantChannel(t, got.Stats, notify.ChannelInbox, notify.ChannelStats{Total: 1, Sent: 1})
	ds, _, err := s.ListDeliveries(t.Context(), n.ID, "", 10)
	noErr(t, err)
	if len(ds) != 2 {
		t.Fatalf("%d delivery records, want 2", len(ds))
	}
	for _, d := range ds {
		switch d.ID {
		case push.ID:
			if d.Status != notify.DeliveryPending || d.Attempts != 1 || d.Reason != notify.ETHROTTLED || d.AddressMasked != push.AddressMasked {
				t.Fatalf("push record %+v", d)
			}
		case inbox.ID:
			if d.Status != notify.DeliverySent {
				t.Fatalf("inbox record %+v", d)
			}
		default:
			t.Fatalf("unexpected record %+v", d)
		}
	}
	claimed, busy, err := s.ClaimDeliveries(t.Context(), n.ID, []string{push.ID, inbox.ID}, t0.Add(time.Second), t0.Add(time.Minute))
	noErr(t, err)
	if len(claimed) != 1 || claimed[0].ID != push.ID || claimed[0].Attempts != 2 || len(busy) != 0 {
		t.Fatalf("claimed %+v, busy %v", claimed, busy)
	}
	_, err = s.CompleteDeliveries(t.Context(), n.ID, []notify.DeliveryUpdate{{ID: push.ID, Status: notify.DeliverySent, At: t0.Add(2 * time.Second)}})
	noErr(t, err)
	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
	if !st.Complete() || st.FinalStatus() != notify.StatusSent {
		t.Fatalf("stats %+v: complete %v, final %s", st, st.Complete(), st.FinalStatus())
	}
	// No longer express: a second hand-over is a no-op, a completion is refused.
	noErr(t, s.HandOverExpress(t.Context(), n.ID, nil, true))
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
	_, err = s.CompleteExpress(t.Context(), n.ID, nil)
	wantCode(t, err, notify.EINVALID)
}

// A worker died mid-send: what it held is released, and prepare, run again over chunk 0, finds
// it pending without counting anything twice.
func testExpressHandOverReprepare(t *testing.T, s notify.Store) {
	n, push, inbox := newExpress("billing", "")
	mustCreateNotification(t, s, n)
	noErr(t, s.HandOverExpress(t.Context(), n.ID, nil, true))
	st := getStats(t, s, n.ID)
	if st.ChunksPrepared != 0 || st.Complete() {
		t.Fatalf("after a hand-over to prepare: %+v", st)
	}
	again := []notify.Delivery{push, inbox}
	again[0].Status, again[0].Attempts, again[0].LeaseUntil = notify.DeliveryPending, 0, time.Time{}
	pending, err := s.CreateDeliveries(t.Context(), n.ID, 0, again)
	noErr(t, err)
	sameSet(t, "pending", pending, []string{push.ID})
	st = getStats(t, s, n.ID)
	if st.ChunksPrepared != 1 {
		t.Fatalf("chunks prepared %d, want 1", st.ChunksPrepared)
	}
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 1})
	wantChannel(t, st, notify.ChannelInbox, notify.ChannelStats{Total: 1, Sent: 1})
	claimed, _, err := s.ClaimDeliveries(t.Context(), n.ID, pending, t0.Add(time.Hour), t0.Add(time.Hour+time.Minute))
	noErr(t, err)
	if len(claimed) != 1 || claimed[0].Attempts != 2 {
		t.Fatalf("claimed %+v: the released delivery keeps its attempt", claimed)
	}
}

func testExpressUnknown(t *testing.T, s notify.Store) {
	_, err := s.CompleteExpress(t.Context(), "n_unknown", nil)
	wantCode(t, err, notify.ENOTFOUND)
	wantCode(t, s.HandOverExpress(t.Context(), "n_unknown", nil, false), notify.ENOTFOUND)
	ds, _, err := s.ListDeliveries(t.Context(), "n_unknown", "", 10)
	noErr(t, err)
	if len(ds) != 0 {
		t.Fatalf("listed %d deliveries of an unknown notification", len(ds))
	}
	// An ordinary notification is not express.
	m := mustCreateNotification(t, s, newNotification("billing", ""))
	_, err = s.CompleteExpress(t.Context(), m.ID, nil)
	wantCode(t, err, notify.EINVALID)
}

// An express notification whose deliveries were all decided at creation (its inbox items) is
// finished by a completion with no verdicts; once final, a completion changes nothing.
func testExpressCompleteNothingLeft(t *testing.T, s notify.Store) {
	n, _, inbox := newExpress("billing", "")
	n.Channels = []notify.Channel{notify.ChannelInbox}
	n.Express = &notify.Express{Deliveries: []notify.Delivery{inbox}, Lease: t0.Add(time.Minute)}
	mustCreateNotification(t, s, n)
	k, err := s.CompleteExpress(t.Context(), n.ID, nil)
	noErr(t, err)
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if k != 0 || got.Status != notify.StatusSent {
		t.Fatalf("applied %d, status %s; want 0 and SENT", k, got.Status)
	}
	_, err = s.CompleteExpress(t.Context(), n.ID, nil)
	noErr(t, err)
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelInbox, notify.ChannelStats{Total: 1, Sent: 1})
}

// An express notification whose id is not the one its key derives (made before ids were derived,
// or by another path) still dedupes on (service, key): a second one with the key is the first.
func testExpressKeyOfAnotherID(t *testing.T, s notify.Store) {
	first, _, _ := newExpress("billing", "")
	first.IdempotencyKey = "legacy-key"
	mustCreateNotification(t, s, first)
	again, _, _ := newExpress("billing", "")
	again.IdempotencyKey = "legacy-key"
	stored, created, err := s.CreateNotification(t.Context(), again)
	noErr(t, err)
	if created || stored.ID != first.ID || stored.Express == nil {
		t.Fatalf("second create with the key: created %v, id %s (first %s), express %v", created, stored.ID, first.ID, stored.Express)
	}
	// Another service may use the same key.
	other, _, _ := newExpress("shipping", "")
	other.IdempotencyKey = "legacy-key"
	mustCreateNotification(t, s, other)
}

// Verdicts recorded for a batch at once read as if each notification had been completed: its
// status, counts and deliveries, its place in a listing by status; one the batch does not name
// is left as it was, and a hand-over after the batch finds nothing to resend.
func testExpressCompleteBatch(t *testing.T, s notify.Store) {
	sent, sentPush, _ := newExpress("billing", "b-sent")
	failed, failedPush, _ := newExpress("billing", "b-failed")
	left, _, _ := newExpress("billing", "b-left")
	for _, n := range []*notify.Notification{sent, failed, left} {
		n.Express.Verdicts = "batch-1"
		mustCreateNotification(t, s, n)
	}
	if got, err := s.GetNotification(t.Context(), sent.ID); err != nil || got.Status != notify.StatusProcessing || !got.Express.Pending() {
		t.Fatalf("before the batch: %+v, %v", got, err)
	}
	at := t0.Add(time.Second)
	noErr(t, s.CompleteExpressBatch(t.Context(), "batch-1", []notify.ExpressDone{
		{ID: sent.ID, Updates: []notify.DeliveryUpdate{{ID: sentPush.ID, Status: notify.DeliverySent, ProviderMessageID: "projects/p/messages/7", At: at}}},
		{ID: failed.ID, Updates: []notify.DeliveryUpdate{{ID: failedPush.ID, Status: notify.DeliveryFailed, Reason: notify.ReasonUnregistered, At: at}}},
	}))
	for _, c := range []struct {
		id     string
		status notify.NotificationStatus
		push   notify.ChannelStats
	}{
		{sent.ID, notify.StatusSent, notify.ChannelStats{Total: 1, Sent: 1}},
		{failed.ID, notify.StatusPartiallySent, notify.ChannelStats{Total: 1, Failed: 1}}, // the inbox item was sent
		{left.ID, notify.StatusProcessing, notify.ChannelStats{Total: 1}},
	} {
		got, err := s.GetNotification(t.Context(), c.id)
		noErr(t, err)
		if got.Status != c.status {
			t.Errorf("%s: status %s, want %s", c.id, got.Status, c.status)
		}
		wantChannel(t, got.Stats, notify.ChannelPush, c.push)
	}
	ds, _, err := s.ListDeliveries(t.Context(), sent.ID, "", 10)
	noErr(t, err)
	for _, d := range ds {
		if d.ID == sentPush.ID && (d.Status != notify.DeliverySent || d.ProviderMessageID != "projects/p/messages/7") {
			t.Fatalf("push delivery after the batch: %+v", d)
		}
	}
	l := notificationLister(t, s)
	for status, want := range map[notify.NotificationStatus]string{notify.StatusSent: sent.ID, notify.StatusPartiallySent: failed.ID, notify.StatusProcessing: left.ID} {
		got := listNotificationsAll(t, l, notify.NotificationFilter{Status: status})
		if _, ok := got[want]; !ok || len(got) != 1 {
			t.Errorf("listed as %s: %v, want %s alone", status, got, want)
		}
	}
	// The batch is written once: recorded again, with other verdicts, nothing changes.
	noErr(t, s.CompleteExpressBatch(t.Context(), "batch-1", []notify.ExpressDone{
		{ID: sent.ID, Updates: []notify.DeliveryUpdate{{ID: sentPush.ID, Status: notify.DeliveryFailed, Reason: "rejected", At: at}}},
	}))
	if got := getStats(t, s, sent.ID); got.FinalStatus() != notify.StatusSent {
		t.Fatalf("after the batch again: %+v", got)
	}
	// A hand-over (a redelivered ingest message once the lease ran out) resends nothing.
	noErr(t, s.HandOverExpress(t.Context(), sent.ID, nil, true))
	got, err := s.GetNotification(t.Context(), sent.ID)
	noErr(t, err)
	if got.Status != notify.StatusSent {
		t.Fatalf("after a hand-over: %s", got.Status)
	}
	wantChannel(t, got.Stats, notify.ChannelPush, notify.ChannelStats{Total: 1, Sent: 1})
}
