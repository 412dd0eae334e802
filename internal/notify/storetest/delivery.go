package storetest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

var deliveryCases = []storeCase{
	{"CreateDeliveries/InsertsAndCounts", testCreateDeliveriesCounts},
	{"CreateDeliveries/SameChunkChangesNothing", testCreateDeliveriesSameChunk},
	{"CreateDeliveries/OnlyNewIDs", testCreateDeliveriesOnlyNew},
	{"CreateDeliveries/NoChunk", testCreateDeliveriesNoChunk},
	{"CreateDeliveries/TerminalNotPending", testCreateDeliveriesTerminalNotPending},
	{"ClaimDeliveries/Pending", testClaimPending},
	{"ClaimDeliveries/LeaseHeld", testClaimLeaseHeld},
	{"ClaimDeliveries/LeaseExpired", testClaimLeaseExpired},
	{"ClaimDeliveries/SomeBusy", testClaimSomeBusy},
	{"ClaimDeliveries/TerminalNeverClaimed", testClaimTerminal},
	{"ClaimDeliveries/Concurrent", testClaimConcurrent},
	{"ClaimDeliveries/OtherNotification", testClaimOtherNotification},
	{"CompleteDeliveries/TerminalCountsOnce", testCompleteCountsOnce},
	{"CompleteDeliveries/PendingReleases", testCompletePendingReleases},
	{"CompleteDeliveries/SendingRenewsLease", testCompleteSendingRenewsLease},
	{"CompleteDeliveries/IgnoresNotSending", testCompleteIgnoresNotSending},
	{"CompleteDeliveries/ExpiredCountsAsFailedExpired", testCompleteExpired},
	{"Stats/CompleteAndFinalStatus", testStatsComplete},
	{"ListDeliveries/Paging", testListDeliveriesPaging},
	{"ListDeliveries/RoundTrip", testListDeliveriesRoundTrip},
}

// testCreateDeliveriesCounts: inserted deliveries count into Total, those created terminal into
// Sent/Failed/Skipped, the chunk into ChunksPrepared; only the PENDING ones come back.
func testCreateDeliveriesCounts(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 3)
	email := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 2)
	sms := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryFailed, "a", 1)
	inbox := makeDeliveries(n.ID, notify.ChannelInbox, notify.DeliverySent, "a", 4)

	pending := createChunk(t, s, n.ID, 0, concat(push, email, sms, inbox))
	sameSet(t, "pending", pending, deliveryIDs(push))

	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 3})
	wantChannel(t, st, notify.ChannelEmail, notify.ChannelStats{Total: 2, Skipped: 2})
	wantChannel(t, st, notify.ChannelSMS, notify.ChannelStats{Total: 1, Failed: 1})
	wantChannel(t, st, notify.ChannelInbox, notify.ChannelStats{Total: 4, Sent: 4})
	if st.ChunksPrepared != 1 {
		t.Fatalf("ChunksPrepared = %d, want 1", st.ChunksPrepared)
	}
}

// testCreateDeliveriesSameChunk: a redelivered prepare message submits the same chunk again.
func testCreateDeliveriesSameChunk(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 3)
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 2)
	ds := concat(push, skipped)
	first := createChunk(t, s, n.ID, 0, ds)
	before := getStats(t, s, n.ID)

	for range 2 {
		again := createChunk(t, s, n.ID, 0, ds)
		sameSet(t, "pending on resubmit", again, first)
		after := getStats(t, s, n.ID)
		wantChannel(t, after, notify.ChannelPush, before.Channels[notify.ChannelPush])
		wantChannel(t, after, notify.ChannelEmail, before.Channels[notify.ChannelEmail])
		if after.ChunksPrepared != 1 {
			t.Fatalf("ChunksPrepared = %d after resubmitting chunk 0, want 1", after.ChunksPrepared)
		}
	}

	// A marked chunk changes nothing, even if the resubmission differs (e.g. a device was
	// registered in between): the counters keep matching the rows.
	extra := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryPending, "late", 1)
	again := createChunk(t, s, n.ID, 0, concat(ds, extra))
	sameSet(t, "pending on changed resubmit", again, first)
	if got := len(listAll(t, s, n.ID, 100)); got != len(ds) {
		t.Fatalf("%d deliveries stored, want %d", got, len(ds))
	}
	if _, ok := getStats(t, s, n.ID).Channels[notify.ChannelSMS]; ok {
		t.Fatal("a delivery of an already prepared chunk was counted")
	}
}

// testCreateDeliveriesNoChunk: deliveries created after prepare (NoChunk) are inserted and
// counted once per id, however often they are submitted, and mark no chunk.
func testCreateDeliveriesNoChunk(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2)
	createChunk(t, s, n.ID, 0, push)

	late := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryPending, "fallback", 1)
	for range 2 {
		pending := createChunk(t, s, n.ID, notify.NoChunk, late)
		sameSet(t, "pending", pending, deliveryIDs(late))
	}
	more := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryPending, "fallback2", 1)
	createChunk(t, s, n.ID, notify.NoChunk, concat(late, more))

	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelSMS, notify.ChannelStats{Total: 2})
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 2})
	if st.ChunksPrepared != 1 {
		t.Fatalf("ChunksPrepared = %d after NoChunk creates, want 1", st.ChunksPrepared)
	}
	if got := len(listAll(t, s, n.ID, 100)); got != 4 {
		t.Fatalf("%d deliveries stored, want 4", got)
	}
}

// testCreateDeliveriesOnlyNew: a later chunk overlapping an earlier one inserts and counts only
// the new ids, and reports the overlap's still-PENDING ones.
func testCreateDeliveriesOnlyNew(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 4)
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 2)
	createChunk(t, s, n.ID, 0, concat(push[:2], skipped))

	pending := createChunk(t, s, n.ID, 1, concat(push, skipped[:1]))
	sameSet(t, "pending", pending, deliveryIDs(push))

	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 4})
	wantChannel(t, st, notify.ChannelEmail, notify.ChannelStats{Total: 2, Skipped: 2})
	if st.ChunksPrepared != 2 {
		t.Fatalf("ChunksPrepared = %d, want 2", st.ChunksPrepared)
	}
}

// testCreateDeliveriesTerminalNotPending: deliveries that finished since an earlier attempt are
// not handed out again.
func testCreateDeliveriesTerminalNotPending(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 4)
	createChunk(t, s, n.ID, 0, push)
	claim(t, s, n.ID, deliveryIDs(push[:3]), t0)
	complete(t, s, n.ID, concat(
		verdicts(deliveryIDs(push[:1]), notify.DeliverySent, t0),
		verdicts(deliveryIDs(push[1:2]), notify.DeliveryFailed, t0),
	))
	// push[2] is SENDING, push[3] PENDING.

	again := createChunk(t, s, n.ID, 0, push)
	sameSet(t, "pending on resubmit", again, deliveryIDs(push[3:]))

	fresh := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "b", 1)
	next := createChunk(t, s, n.ID, 1, concat(push, fresh))
	sameSet(t, "pending in next chunk", next, deliveryIDs(concat(push[3:], fresh)))
}

func testClaimPending(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := concat(
		makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2),
		makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliveryPending, "a", 1),
	)
	createChunk(t, s, n.ID, 0, ds)

	lease := t0.Add(5 * time.Minute)
	got, busy, err := s.ClaimDeliveries(t.Context(), n.ID, append(deliveryIDs(ds), "d_unknown"), t0, lease)
	noErr(t, err)
	sameSet(t, "claimed", deliveryIDs(got), deliveryIDs(ds))
	if len(busy) != 0 {
		t.Fatalf("busy = %v on a first claim, want none", busy)
	}
	want := byID(ds)
	for _, d := range got {
		w := want[d.ID]
		if d.Status != notify.DeliverySending || d.Attempts != 1 || !d.LeaseUntil.Equal(lease) {
			t.Fatalf("claimed %s: status %s attempts %d lease %v; want SENDING 1 %v", d.ID, d.Status, d.Attempts, d.LeaseUntil, lease)
		}
		if d.NotificationID != n.ID || d.Channel != w.Channel || d.Provider != w.Provider || d.App != w.App ||
			d.UserID != w.UserID || d.AddressMasked != w.AddressMasked {
			t.Fatalf("claimed %+v, want fields of %+v", d, w)
		}
		if d.Address != "" {
			t.Fatalf("claimed %s carries raw Address %q; stores persist only AddressMasked", d.ID, d.Address)
		}
	}
}

func testClaimLeaseHeld(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 3)
	createChunk(t, s, n.ID, 0, ds)
	if got := claim(t, s, n.ID, deliveryIDs(ds), t0); len(got) != 3 {
		t.Fatalf("first claim got %d, want 3", len(got))
	}
	// Lease runs to t0+1m; 30s in, another worker gets nothing, and learns they are busy.
	got, busy, err := s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0.Add(30*time.Second), t0.Add(90*time.Second))
	noErr(t, err)
	if len(got) != 0 {
		t.Fatalf("claim under a valid lease got %d deliveries, want 0", len(got))
	}
	sameSet(t, "busy", busy, deliveryIDs(ds))
	// Exactly at the lease's end it is still held; once terminal it is neither claimed nor busy.
	_, busy, err = s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0.Add(time.Minute), t0.Add(2*time.Minute))
	noErr(t, err)
	sameSet(t, "busy at lease end", busy, deliveryIDs(ds))
	complete(t, s, n.ID, verdicts(deliveryIDs(ds), notify.DeliverySent, t0))
	got, busy, err = s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0.Add(2*time.Minute), t0.Add(3*time.Minute))
	noErr(t, err)
	if len(got) != 0 || len(busy) != 0 {
		t.Fatalf("terminal deliveries: claimed %d busy %v, want none", len(got), busy)
	}
}

// testClaimOtherNotification: a claim names the notification; another notification's deliveries,
// pending or leased, are neither claimed nor busy under it, and are left as they were.
func testClaimOtherNotification(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	other := mustCreateNotification(t, s, newNotification("billing", "other"))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2)
	createChunk(t, s, n.ID, 0, ds)
	claim(t, s, n.ID, deliveryIDs(ds[:1]), t0) // ds[0] leased until t0+1m, ds[1] pending
	got, busy, err := s.ClaimDeliveries(t.Context(), other.ID, deliveryIDs(ds), t0.Add(time.Second), t0.Add(time.Minute))
	noErr(t, err)
	if len(got) != 0 || len(busy) != 0 {
		t.Fatalf("claimed under another notification: %d claimed, busy %v; want none", len(got), busy)
	}
	got = claim(t, s, n.ID, deliveryIDs(ds[1:]), t0.Add(time.Second))
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("its own notification's claim: %+v, want ds[1] at attempt 1", got)
	}
}

// testClaimSomeBusy: one call that claims some deliveries and finds the others leased reports
// only those as busy, never what it has just claimed itself.
func testClaimSomeBusy(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 4)
	createChunk(t, s, n.ID, 0, ds)
	claim(t, s, n.ID, deliveryIDs(ds[:1]), t0) // lease until t0+1m
	got, busy, err := s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0.Add(30*time.Second), t0.Add(90*time.Second))
	noErr(t, err)
	sameSet(t, "claimed", deliveryIDs(got), deliveryIDs(ds[1:]))
	sameSet(t, "busy", busy, deliveryIDs(ds[:1]))
}

func testClaimLeaseExpired(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 3)
	createChunk(t, s, n.ID, 0, ds)
	claim(t, s, n.ID, deliveryIDs(ds[:2]), t0) // lease until t0+1m

	later := t0.Add(2 * time.Minute)
	lease := later.Add(time.Minute)
	got, busy, err := s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), later, lease)
	if len(busy) != 0 {
		t.Fatalf("expired leases reported busy: %v", busy)
	}
	noErr(t, err)
	sameSet(t, "re-claimed", deliveryIDs(got), deliveryIDs(ds))
	for _, d := range got {
		wantAttempts := 2
		if d.ID == ds[2].ID {
			wantAttempts = 1
		}
		if d.Attempts != wantAttempts || !d.LeaseUntil.Equal(lease) || d.Status != notify.DeliverySending {
			t.Fatalf("%s: attempts %d lease %v status %s; want %d %v SENDING", d.ID, d.Attempts, d.LeaseUntil, d.Status,
				wantAttempts, lease)
		}
	}
}

func testClaimTerminal(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 2)
	sentOnCreate := makeDeliveries(n.ID, notify.ChannelInbox, notify.DeliverySent, "a", 1)
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 3)
	createChunk(t, s, n.ID, 0, concat(skipped, sentOnCreate, push))
	claim(t, s, n.ID, deliveryIDs(push), t0)
	complete(t, s, n.ID, concat(
		verdicts(deliveryIDs(push[:1]), notify.DeliverySent, t0),
		verdicts(deliveryIDs(push[1:2]), notify.DeliveryFailed, t0),
		verdicts(deliveryIDs(push[2:]), notify.DeliverySkipped, t0),
	))

	all := deliveryIDs(concat(skipped, sentOnCreate, push))
	for _, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(365 * 24 * time.Hour)} {
		if got := claim(t, s, n.ID, all, at); len(got) != 0 {
			t.Fatalf("claim at %v got %d terminal deliveries, want 0", at, len(got))
		}
	}
}

// testClaimConcurrent: claimers racing for the same ids never both win one delivery.
func testClaimConcurrent(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 300)
	createChunk(t, s, n.ID, 0, ds)
	ids := deliveryIDs(ds)

	const workers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = map[string]int{}
		errs []error
	)
	ctx := t.Context()
	for w := range workers {
		wg.Go(func() {
			// Each worker walks the ids in its own order and batch size, as overlapping send
			// batches would.
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			order := make([]string, len(ids))
			for i, j := range rng.Perm(len(ids)) {
				order[i] = ids[j]
			}
			batch := 20 + w*10
			for lo := 0; lo < len(order); lo += batch {
				got, _, err := s.ClaimDeliveries(ctx, n.ID, order[lo:min(lo+batch, len(order))], t0, t0.Add(time.Minute))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, d := range got {
					wins[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	for id, k := range wins {
		if k != 1 {
			t.Fatalf("delivery %s claimed %d times", id, k)
		}
	}
	if len(wins) != len(ids) {
		t.Fatalf("%d deliveries claimed, want %d", len(wins), len(ids))
	}
}

func testCompleteCountsOnce(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 5)
	createChunk(t, s, n.ID, 0, ds)
	claim(t, s, n.ID, deliveryIDs(ds), t0)

	us := concat(
		verdicts(deliveryIDs(ds[:2]), notify.DeliverySent, t0),
		verdicts(deliveryIDs(ds[2:3]), notify.DeliveryFailed, t0),
		verdicts(deliveryIDs(ds[3:4]), notify.DeliverySkipped, t0),
	)
	if got := complete(t, s, n.ID, us); got != 4 {
		t.Fatalf("applied = %d, want 4", got)
	}
	want := notify.ChannelStats{Total: 5, Sent: 2, Failed: 1, Skipped: 1}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, want)

	// A redelivered record message carries the same verdicts again.
	if got := complete(t, s, n.ID, us); got != 0 {
		t.Fatalf("applied = %d on the second application, want 0", got)
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, want)

	// The same verdict twice within one call also counts once.
	dup := verdicts(deliveryIDs(ds[4:]), notify.DeliverySent, t0)
	complete(t, s, n.ID, concat(dup, dup))
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{Total: 5, Sent: 3, Failed: 1, Skipped: 1})
}

func testCompletePendingReleases(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryPending, "a", 2)
	createChunk(t, s, n.ID, 0, ds)
	if _, _, err := s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	release := []notify.DeliveryUpdate{{ID: ds[0].ID, Status: notify.DeliveryPending, Reason: "throttled",
		Detail: "429 from provider", At: t0.Add(time.Second)}}
	if got := complete(t, s, n.ID, release); got != 1 {
		t.Fatalf("applied = %d, want 1", got)
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelSMS, notify.ChannelStats{Total: 2})
	if d := byID(listAll(t, s, n.ID, 10))[ds[0].ID]; d.Status != notify.DeliveryPending {
		t.Fatalf("released delivery is %s, want PENDING", d.Status)
	}

	// Released well before its old lease ran out: claimable at once, the other one is not.
	got := claim(t, s, n.ID, deliveryIDs(ds), t0.Add(2*time.Second))
	if len(got) != 1 || got[0].ID != ds[0].ID || got[0].Attempts != 2 {
		t.Fatalf("claim after release = %+v, want only %s with 2 attempts", got, ds[0].ID)
	}
}

// testCompleteSendingRenewsLease: a message the provider accepted with its verdict to come
// stays SENDING under the new lease — claimed by nobody else, counted nowhere — with its
// provider message id recorded, until its verdict completes it, once.
func testCompleteSendingRenewsLease(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := makeDeliveries(n.ID, notify.ChannelAlimTalk, notify.DeliveryPending, "a", 2)
	createChunk(t, s, n.ID, 0, ds)
	if got := claim(t, s, n.ID, deliveryIDs(ds), t0); len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	accepted := notify.DeliveryUpdate{ID: ds[0].ID, Status: notify.DeliverySending, ProviderMessageID: "M4V-accepted",
		Detail: "accepted; verdict to come", At: t0.Add(time.Second), LeaseUntil: t0.Add(2 * time.Hour)}
	if got := complete(t, s, n.ID, []notify.DeliveryUpdate{accepted}); got != 1 {
		t.Fatalf("applied = %d, want 1", got)
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelAlimTalk, notify.ChannelStats{Total: 2})
	if st := getStats(t, s, n.ID); st.Complete() {
		t.Fatal("stats complete while a verdict is to come")
	}
	d := byID(listAll(t, s, n.ID, 10))[ds[0].ID]
	if d.Status != notify.DeliverySending || d.ProviderMessageID != "M4V-accepted" || d.Detail != "accepted; verdict to come" {
		t.Fatalf("accepted delivery = %+v", d)
	}

	// Half an hour on, the other delivery's one-minute lease is over; the accepted one's is not.
	got, busy, err := s.ClaimDeliveries(t.Context(), n.ID, deliveryIDs(ds), t0.Add(30*time.Minute), t0.Add(31*time.Minute))
	noErr(t, err)
	if len(got) != 1 || got[0].ID != ds[1].ID || len(busy) != 1 || busy[0] != ds[0].ID {
		t.Fatalf("claim = %+v, busy %v; want %s claimed, %s busy", got, busy, ds[1].ID, ds[0].ID)
	}

	// Its verdict completes it and counts; a late repeat of "accepted" changes nothing.
	done := notify.DeliveryUpdate{ID: ds[0].ID, Status: notify.DeliverySent, ProviderMessageID: "M4V-accepted", At: t0.Add(40 * time.Minute)}
	if got := complete(t, s, n.ID, []notify.DeliveryUpdate{done}); got != 1 {
		t.Fatalf("verdict applied = %d, want 1", got)
	}
	if got := complete(t, s, n.ID, []notify.DeliveryUpdate{accepted}); got != 0 {
		t.Fatalf("accepted again after the verdict: applied = %d, want 0", got)
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelAlimTalk, notify.ChannelStats{Total: 2, Sent: 1})
	if d := byID(listAll(t, s, n.ID, 10))[ds[0].ID]; d.Status != notify.DeliverySent || d.ProviderMessageID != "M4V-accepted" {
		t.Fatalf("delivered = %+v", d)
	}

	// SENDING needs its lease.
	_, err = s.CompleteDeliveries(t.Context(), n.ID, []notify.DeliveryUpdate{{ID: ds[1].ID, Status: notify.DeliverySending, At: t0}})
	if !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("SENDING without a lease: %v, want EINVALID", err)
	}
}

func testCompleteIgnoresNotSending(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	pending := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2)
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 1)
	createChunk(t, s, n.ID, 0, concat(pending, skipped))
	before := getStats(t, s, n.ID)

	us := concat(
		verdicts(deliveryIDs(pending), notify.DeliverySent, t0),   // never claimed
		verdicts(deliveryIDs(skipped), notify.DeliveryFailed, t0), // terminal
		verdicts([]string{"d_unknown"}, notify.DeliverySent, t0),
		[]notify.DeliveryUpdate{{ID: pending[0].ID, Status: notify.DeliveryPending, At: t0}},
	)
	if got := complete(t, s, n.ID, us); got != 0 {
		t.Fatalf("applied = %d, want 0", got)
	}
	after := getStats(t, s, n.ID)
	wantChannel(t, after, notify.ChannelPush, before.Channels[notify.ChannelPush])
	wantChannel(t, after, notify.ChannelEmail, before.Channels[notify.ChannelEmail])
	stored := byID(listAll(t, s, n.ID, 10))
	for _, d := range pending {
		if got := stored[d.ID]; got.Status != notify.DeliveryPending || got.ProviderMessageID != "" {
			t.Fatalf("%s is %s (%q) after an ignored verdict, want PENDING", d.ID, got.Status, got.ProviderMessageID)
		}
	}
	if got := stored[skipped[0].ID]; got.Status != notify.DeliverySkipped || got.Reason != notify.ReasonOptedOut {
		t.Fatalf("skipped delivery became %s (%s)", got.Status, got.Reason)
	}
}

// testStatsComplete drives a notification to the end and checks what Stats then imply.
func testStatsComplete(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 2))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2)
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 1)
	sms := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliveryPending, "a", 2)

	createChunk(t, s, n.ID, 0, concat(push, skipped))
	if getStats(t, s, n.ID).Complete() {
		t.Fatal("Complete() with one of two chunks prepared")
	}
	createChunk(t, s, n.ID, 1, sms)
	claim(t, s, n.ID, deliveryIDs(concat(push, sms)), t0)
	complete(t, s, n.ID, concat(
		verdicts(deliveryIDs(push), notify.DeliverySent, t0),
		verdicts(deliveryIDs(sms[:1]), notify.DeliveryFailed, t0),
		[]notify.DeliveryUpdate{{ID: sms[1].ID, Status: notify.DeliveryPending, At: t0}},
	))
	if getStats(t, s, n.ID).Complete() {
		t.Fatal("Complete() with a delivery released for retry")
	}
	claim(t, s, n.ID, deliveryIDs(sms[1:]), t0.Add(time.Second))
	complete(t, s, n.ID, verdicts(deliveryIDs(sms[1:]), notify.DeliveryFailed, t0.Add(time.Second)))

	st := getStats(t, s, n.ID)
	if !st.Complete() {
		t.Fatalf("Complete() = false for %+v", st)
	}
	if got := st.Sum(); got != (notify.ChannelStats{Total: 5, Sent: 2, Failed: 2, Skipped: 1}) {
		t.Fatalf("Sum() = %+v", got)
	}
	if got := st.FinalStatus(); got != notify.StatusPartiallySent {
		t.Fatalf("FinalStatus() = %s, want %s", got, notify.StatusPartiallySent)
	}

	// Everything skipped at prepare time: complete at once, nothing sent.
	m := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), m.ID, 1))
	if pending := createChunk(t, s, m.ID, 0, makeDeliveries(m.ID, notify.ChannelEmail, notify.DeliverySkipped, "b", 3)); len(pending) != 0 {
		t.Fatalf("pending = %v for skipped deliveries", pending)
	}
	if st := getStats(t, s, m.ID); !st.Complete() || st.FinalStatus() != notify.StatusSkipped {
		t.Fatalf("all skipped: Complete %v FinalStatus %s, want true SKIPPED", st.Complete(), st.FinalStatus())
	}
}

// testCompleteExpired: an EXPIRED verdict is terminal, reads back EXPIRED, and counts once as
// failed under the reason "expired"; the bulk lane's batch delta counts it the same way.
func testCompleteExpired(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 1))
	ds := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "x", 2)
	createChunk(t, s, n.ID, 0, ds)
	claim(t, s, n.ID, deliveryIDs(ds), t0)
	us := []notify.DeliveryUpdate{{ID: ds[0].ID, Status: notify.DeliveryExpired, Reason: notify.ReasonExpired,
		Detail: "its ttl ran out", At: t0.Add(time.Second)}}
	for range 2 {
		complete(t, s, n.ID, us)
	}
	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 2, Failed: 1})
	if st.FailedByReason[notify.ReasonExpired] != 1 || len(st.FailedByReason) != 1 {
		t.Fatalf("FailedByReason = %v, want expired 1", st.FailedByReason)
	}
	if d := byID(listAll(t, s, n.ID, 10))[ds[0].ID]; d.Status != notify.DeliveryExpired || d.Reason != notify.ReasonExpired {
		t.Fatalf("expired delivery reads back %s (%s)", d.Status, d.Reason)
	}
	if got := claim(t, s, n.ID, deliveryIDs(ds[:1]), t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("an EXPIRED delivery was claimed again: %+v", got)
	}
	complete(t, s, n.ID, verdicts(deliveryIDs(ds[1:]), notify.DeliveryExpired, t0))
	if st := getStats(t, s, n.ID); !st.Complete() || st.FinalStatus() != notify.StatusFailed {
		t.Fatalf("all expired: Complete %v FinalStatus %s, want true FAILED", st.Complete(), st.FinalStatus())
	}

	m := mustCreateNotification(t, s, newNotification("marketing", ""))
	_, err := s.AddChunk(t.Context(), m.ID, 0, push(3, 0, 0, 0))
	noErr(t, err)
	claimBatch(t, s, m.ID, "b1", t0)
	delta := map[notify.Channel]notify.ChannelStats{}
	for range 3 {
		notify.CountDelivery(delta, notify.ChannelPush, notify.DeliveryExpired, "", false)
	}
	_, err = s.CompleteBatch(t.Context(), m.ID, "b1", delta, t0)
	noErr(t, err)
	st = getStats(t, s, m.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 3, Failed: 3})
	if st.FailedByReason[notify.ReasonExpired] != 3 {
		t.Fatalf("bulk FailedByReason = %v, want expired 3", st.FailedByReason)
	}
}

func testListDeliveriesPaging(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	other := mustCreateNotification(t, s, newNotification("billing", ""))
	ds := concat(
		makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 15),
		makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "a", 10),
	)
	createChunk(t, s, n.ID, 0, ds)
	createChunk(t, s, other.ID, 0, makeDeliveries(other.ID, notify.ChannelPush, notify.DeliveryPending, "a", 5))

	var order []string // the store's order, the same whatever the page size
	for _, limit := range []int{1, 7, 10, 25, 100} {
		all := listAll(t, s, n.ID, limit)
		seen := map[string]bool{}
		if order == nil {
			order = deliveryIDs(all)
		}
		for i, d := range all {
			if seen[d.ID] {
				t.Fatalf("limit %d: %s listed twice", limit, d.ID)
			}
			seen[d.ID] = true
			if i < len(order) && order[i] != d.ID {
				t.Fatalf("limit %d: %s listed at %d, where pages of 1 had %s: want one stable order", limit, d.ID, i, order[i])
			}
			if d.NotificationID != n.ID {
				t.Fatalf("limit %d: listed %s of notification %s", limit, d.ID, d.NotificationID)
			}
		}
		sameSet(t, fmt.Sprintf("listed ids (limit %d)", limit), deliveryIDs(all), deliveryIDs(ds))
	}

	first, next, err := s.ListDeliveries(t.Context(), n.ID, "", 10)
	noErr(t, err)
	if len(first) != 10 || next == "" {
		t.Fatalf("first page: %d deliveries, next %q; want 10 and a cursor", len(first), next)
	}
	empty, next, err := s.ListDeliveries(t.Context(), "n_unknown", "", 10)
	noErr(t, err)
	if len(empty) != 0 || next != "" {
		t.Fatalf("unknown notification: %d deliveries, next %q", len(empty), next)
	}
}

// testListDeliveriesRoundTrip: what the pipeline records comes back, the raw address never.
func testListDeliveriesRoundTrip(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "a", 2)
	email := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliveryPending, "a", 1)
	skipped := makeDeliveries(n.ID, notify.ChannelSMS, notify.DeliverySkipped, "a", 1)
	skipped[0].Reason, skipped[0].Detail = notify.ReasonQuietHours, "21:00-08:00 Asia/Seoul"
	ds := concat(push, email, skipped)
	createChunk(t, s, n.ID, 0, ds)

	claim(t, s, n.ID, deliveryIDs(concat(push, email)), t0)
	claim(t, s, n.ID, deliveryIDs(email), t0.Add(2*time.Minute)) // lease expired: attempt 2
	at := t0.Add(3 * time.Minute)
	complete(t, s, n.ID, []notify.DeliveryUpdate{
		{ID: push[0].ID, Status: notify.DeliverySent, ProviderMessageID: "projects/x/messages/1", At: at},
		{ID: push[1].ID, Status: notify.DeliveryFailed, Reason: notify.ReasonUnregistered, Detail: "UNREGISTERED", At: at},
		{ID: email[0].ID, Status: notify.DeliverySent, ProviderMessageID: "ses-0001", At: at},
	})

	got := byID(listAll(t, s, n.ID, 2))
	if len(got) != len(ds) {
		t.Fatalf("listed %d deliveries, want %d", len(got), len(ds))
	}
	check := func(id string, status notify.DeliveryStatus, reason, detail, pmid string, attempts int) {
		t.Helper()
		d := got[id]
		if d.Status != status || d.Reason != reason || d.Detail != detail || d.ProviderMessageID != pmid || d.Attempts != attempts {
			t.Fatalf("%s = status %s reason %q detail %q pmid %q attempts %d; want %s %q %q %q %d",
				id, d.Status, d.Reason, d.Detail, d.ProviderMessageID, d.Attempts, status, reason, detail, pmid, attempts)
		}
	}
	check(push[0].ID, notify.DeliverySent, "", "", "projects/x/messages/1", 1)
	check(push[1].ID, notify.DeliveryFailed, notify.ReasonUnregistered, "UNREGISTERED", "", 1)
	check(email[0].ID, notify.DeliverySent, "", "", "ses-0001", 2)
	check(skipped[0].ID, notify.DeliverySkipped, notify.ReasonQuietHours, "21:00-08:00 Asia/Seoul", "", 0)
	for _, w := range ds {
		d := got[w.ID]
		if d.Address != "" {
			t.Fatalf("%s listed with raw Address %q; stores persist only AddressMasked", d.ID, d.Address)
		}
		if d.AddressMasked != w.AddressMasked || d.Channel != w.Channel || d.Provider != w.Provider ||
			d.App != w.App || d.UserID != w.UserID || d.NotificationID != n.ID {
			t.Fatalf("listed %+v, want fields of %+v", d, w)
		}
	}
}
