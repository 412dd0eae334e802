package storetest

import (
	"errors"
	"testing"
	"time"

	"herald/internal/notify"
)

// recordCases cover BatchStore.RecordBatch: a realtime send batch claimed whole whose
// deliveries are stored once, with their outcomes.
var recordCases = []storeCase{
	{"RecordBatch/StoresAndCountsOnce", testRecordBatchOnce},
	{"RecordBatch/RetryOverPending", testRecordBatchRetry},
	{"RecordBatch/UnclaimedChangesNothing", testRecordBatchUnclaimed},
	{"RecordBatch/BadInput", testRecordBatchBadInput},
}

// recorded is ds with status st (and reason, for a failure) at attempt.
func recorded(ds []notify.Delivery, st notify.DeliveryStatus, reason string, attempt int) []notify.Delivery {
	out := make([]notify.Delivery, len(ds))
	for i, d := range ds {
		d.Status, d.Reason, d.Attempts, d.UpdatedAt = st, reason, attempt, t0
		if st == notify.DeliverySent {
			d.ProviderMessageID = "pm-" + d.ID
		}
		out[i] = d
	}
	return out
}

// listed lists nid's deliveries keyed by id.
func listed(t *testing.T, s notify.Store, nid string) map[string]notify.Delivery {
	t.Helper()
	return byID(listAll(t, s, nid, 100))
}

func testRecordBatchOnce(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 1))
	pending := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "r", 5)
	chunk := map[notify.Channel]notify.ChannelStats{}
	for range pending {
		notify.CountDelivery(chunk, notify.ChannelPush, notify.DeliveryPending, "", true)
	}
	_, err := s.AddChunk(t.Context(), n.ID, 0, chunk)
	noErr(t, err)
	if got := listed(t, s, n.ID); len(got) != 0 {
		t.Fatalf("deliveries before their batch is recorded = %d, want 0", len(got))
	}

	claimBatch(t, s, n.ID, "b1", t0)
	ds := concat(recorded(pending[:3], notify.DeliverySent, "", 1),
		recorded(pending[3:4], notify.DeliveryFailed, notify.ReasonUnregistered, 1),
		recorded(pending[4:], notify.DeliveryPending, notify.EUNAVAILABLE, 1))
	ok, err := s.RecordBatch(t.Context(), n.ID, "b1", ds, t0.Add(time.Second))
	noErr(t, err)
	if !ok {
		t.Fatal("RecordBatch of a claimed batch = false")
	}
	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 5, Sent: 3, Failed: 1})
	if st.FailedByReason[notify.ReasonUnregistered] != 1 {
		t.Fatalf("FailedByReason = %v, want unregistered 1", st.FailedByReason)
	}
	got := listed(t, s, n.ID)
	if len(got) != 5 {
		t.Fatalf("deliveries listed = %d, want 5", len(got))
	}
	for _, want := range ds {
		d := got[want.ID]
		if d.Status != want.Status || d.Reason != want.Reason || d.Attempts != 1 || d.AddressMasked != want.AddressMasked ||
			d.UserID != want.UserID || d.Channel != notify.ChannelPush || d.ProviderMessageID != want.ProviderMessageID {
			t.Fatalf("delivery %s = %+v, want %+v", want.ID, d, want)
		}
		if d.Address != "" {
			t.Fatalf("delivery %s came back with a raw address", want.ID)
		}
	}

	// Recorded twice (a redelivered message whose first run finished): nothing changes.
	again := recorded(pending, notify.DeliveryFailed, notify.ReasonRejected, 2)
	ok, err = s.RecordBatch(t.Context(), n.ID, "b1", again, t0.Add(2*time.Second))
	noErr(t, err)
	if ok {
		t.Fatal("RecordBatch of a batch already done = true")
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{Total: 5, Sent: 3, Failed: 1})
	if d := listed(t, s, n.ID)[pending[0].ID]; d.Status != notify.DeliverySent {
		t.Fatalf("a done batch's delivery after a second record = %s, want SENT", d.Status)
	}
	if c := claimBatch(t, s, n.ID, "b1", t0.Add(time.Hour)); c.State != notify.BatchDone {
		t.Fatalf("claim of a recorded batch = %+v, want DONE", c)
	}
}

func testRecordBatchRetry(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 1))
	pending := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "q", 4)
	fresh := pending[3:] // stored first by the retry batch, beside the ones it writes over
	pending = pending[:3]
	_, err := s.AddChunk(t.Context(), n.ID, 0, push(4, 0, 0, 0))
	noErr(t, err)
	claimBatch(t, s, n.ID, "b1", t0)
	_, err = s.RecordBatch(t.Context(), n.ID, "b1", concat(
		recorded(pending[:1], notify.DeliverySent, "", 1),
		recorded(pending[1:], notify.DeliveryPending, notify.EUNAVAILABLE, 1)), t0)
	noErr(t, err)
	if getStats(t, s, n.ID).Complete() {
		t.Fatal("Complete() with two deliveries retrying")
	}

	// The retry batch holds the two PENDING ones; it also names the SENT one (as a batch re-run
	// after a crash would), which keeps its first outcome and is not counted again, and one
	// stored for the first time.
	claimBatch(t, s, n.ID, "b1.r1", t0.Add(time.Second))
	ok, err := s.RecordBatch(t.Context(), n.ID, "b1.r1", concat(
		recorded(fresh, notify.DeliverySent, "", 1),
		recorded(pending[:1], notify.DeliveryFailed, notify.ReasonRejected, 2),
		recorded(pending[1:2], notify.DeliverySent, "", 2),
		recorded(pending[2:], notify.DeliveryFailed, notify.ReasonRetriesExhausted, 2)), t0.Add(2*time.Second))
	noErr(t, err)
	if !ok {
		t.Fatal("RecordBatch of a claimed retry batch = false")
	}
	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 4, Sent: 3, Failed: 1})
	if !st.Complete() || st.FinalStatus() != notify.StatusPartiallySent {
		t.Fatalf("Complete %v FinalStatus %s, want true PARTIALLY_SENT", st.Complete(), st.FinalStatus())
	}
	got := listed(t, s, n.ID)
	for id, want := range map[string]notify.DeliveryStatus{
		pending[0].ID: notify.DeliverySent, pending[1].ID: notify.DeliverySent, pending[2].ID: notify.DeliveryFailed,
		fresh[0].ID: notify.DeliverySent,
	} {
		if got[id].Status != want {
			t.Fatalf("delivery %s = %s, want %s", id, got[id].Status, want)
		}
	}
	if got[pending[1].ID].Attempts != 2 || got[pending[0].ID].Attempts != 1 {
		t.Fatalf("attempts = %d and %d, want 2 (retried) and 1 (kept)", got[pending[1].ID].Attempts, got[pending[0].ID].Attempts)
	}

	// A delivery of another notification with the same id is never written over.
	other := mustCreateNotification(t, s, newNotification("billing", ""))
	claimBatch(t, s, other.ID, "b1", t0)
	stolen := recorded(pending[2:], notify.DeliverySent, "", 1)
	stolen[0].NotificationID = ""
	_, err = s.RecordBatch(t.Context(), other.ID, "b1", stolen, t0)
	noErr(t, err)
	if d := listed(t, s, n.ID)[pending[2].ID]; d.Status != notify.DeliveryFailed {
		t.Fatalf("a delivery recorded by another notification's batch = %s, want FAILED kept", d.Status)
	}
}

func testRecordBatchUnclaimed(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := recorded(makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "u", 2), notify.DeliverySent, "", 1)
	ok, err := s.RecordBatch(t.Context(), n.ID, "never-claimed", ds, t0)
	noErr(t, err)
	if ok {
		t.Fatal("RecordBatch of a batch never claimed = true")
	}
	if got := listed(t, s, n.ID); len(got) != 0 {
		t.Fatalf("deliveries stored by an unclaimed batch = %d, want 0", len(got))
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{})
	for i := range ds {
		ds[i].NotificationID = ""
	}
	if _, err := s.RecordBatch(t.Context(), "n_missing", "b1", ds, t0); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("RecordBatch of an unknown notification: %v, want ENOTFOUND", err)
	}
}

func testRecordBatchBadInput(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	claimBatch(t, s, n.ID, "b1", t0)
	ds := recorded(makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "v", 2), notify.DeliverySent, "", 1)
	ds[1].Status = notify.DeliverySending
	_, err := s.RecordBatch(t.Context(), n.ID, "b1", ds, t0)
	var e *notify.Error
	if !errors.As(err, &e) || e.Code != notify.EINVALID || e.Field != "deliveries[1].status" {
		t.Fatalf("RecordBatch with a SENDING delivery: %v, want EINVALID on deliveries[1].status", err)
	}
	if got := listed(t, s, n.ID); len(got) != 0 {
		t.Fatalf("deliveries stored by a refused record = %d, want 0", len(got))
	}
	if c := claimBatch(t, s, n.ID, "b1", t0.Add(time.Hour)); c.State != notify.BatchClaimed {
		t.Fatalf("claim after a refused record = %+v, want CLAIMED again (not done)", c)
	}
}
