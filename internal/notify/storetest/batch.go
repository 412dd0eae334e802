package storetest

import (
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

var batchCases = []storeCase{
	{"AddChunkCountsOnce", testAddChunkCountsOnce},
	{"AddChunkUnknownNotification", testAddChunkUnknown},
	{"ChunkPreparedSeesBothWriters", testChunkPreparedBothWriters},
	{"ClaimBatchNewThenBusyThenExpired", testClaimBatchLease},
	{"CompleteBatchCountsOnce", testCompleteBatchCountsOnce},
	{"CompleteBatchUnclaimedIgnored", testCompleteBatchUnclaimed},
	{"ClaimBatchConcurrentOneWinner", testClaimBatchConcurrent},
	{"BatchesScopedToNotification", testBatchesScoped},
	{"BatchStatsComplete", testBatchStatsComplete},
	{"StatsByReason", testStatsByReason},
}

func push(total, sent, failed, skipped int) map[notify.Channel]notify.ChannelStats {
	return map[notify.Channel]notify.ChannelStats{notify.ChannelPush: {Total: total, Sent: sent, Failed: failed, Skipped: skipped}}
}

func claimBatch(t *testing.T, s notify.Store, nid, bid string, now time.Time) notify.BatchClaim {
	t.Helper()
	c, err := s.ClaimBatch(t.Context(), nid, bid, now, now.Add(time.Minute))
	noErr(t, err)
	return c
}

func testAddChunkCountsOnce(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	delta := map[notify.Channel]notify.ChannelStats{
		notify.ChannelPush:  {Total: 500, Skipped: 3},
		notify.ChannelInbox: {Total: 40, Sent: 40},
	}
	added, err := s.AddChunk(t.Context(), n.ID, 0, delta)
	noErr(t, err)
	if !added {
		t.Fatal("AddChunk of a new chunk: added = false")
	}
	added, err = s.AddChunk(t.Context(), n.ID, 0, delta)
	noErr(t, err)
	if added {
		t.Fatal("AddChunk of a marked chunk: added = true")
	}
	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 500, Skipped: 3})
	wantChannel(t, st, notify.ChannelInbox, notify.ChannelStats{Total: 40, Sent: 40})
	if st.ChunksPrepared != 1 {
		t.Fatalf("ChunksPrepared = %d, want 1", st.ChunksPrepared)
	}
	// An empty chunk (every recipient without an address, say) is still marked.
	added, err = s.AddChunk(t.Context(), n.ID, 1, nil)
	noErr(t, err)
	if !added || getStats(t, s, n.ID).ChunksPrepared != 2 {
		t.Fatalf("empty chunk: added %v, ChunksPrepared %d, want true 2", added, getStats(t, s, n.ID).ChunksPrepared)
	}
}

func testAddChunkUnknown(t *testing.T, s notify.Store) {
	_, err := s.AddChunk(t.Context(), "n_missing", 0, push(1, 0, 0, 0))
	wantCode(t, err, notify.ENOTFOUND)
	_, err = s.ChunkPrepared(t.Context(), "n_missing", 0)
	wantCode(t, err, notify.ENOTFOUND)
	_, err = s.ClaimBatch(t.Context(), "n_missing", "b1", t0, t0.Add(time.Minute))
	wantCode(t, err, notify.ENOTFOUND)
}

func testChunkPreparedBothWriters(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	for chunk := range 2 {
		ok, err := s.ChunkPrepared(t.Context(), n.ID, chunk)
		noErr(t, err)
		if ok {
			t.Fatalf("ChunkPrepared(%d) = true before any write", chunk)
		}
	}
	_, err := s.AddChunk(t.Context(), n.ID, 0, push(2, 0, 0, 0))
	noErr(t, err)
	createChunk(t, s, n.ID, 1, makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliveryPending, "c", 2))
	for chunk := range 2 {
		ok, err := s.ChunkPrepared(t.Context(), n.ID, chunk)
		noErr(t, err)
		if !ok {
			t.Fatalf("ChunkPrepared(%d) = false after it was written", chunk)
		}
	}
}

func testClaimBatchLease(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	if c := claimBatch(t, s, n.ID, "b1", t0); c.State != notify.BatchClaimed || c.Attempts != 1 {
		t.Fatalf("first claim = %+v, want CLAIMED attempt 1", c)
	}
	if c := claimBatch(t, s, n.ID, "b1", t0.Add(30*time.Second)); c.State != notify.BatchBusy || !c.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claim under a live lease = %+v, want BUSY until the holder's lease ends, %v", c, t0.Add(time.Minute))
	}
	// The first holder died: once its lease ends the batch can be taken again.
	if c := claimBatch(t, s, n.ID, "b1", t0.Add(2*time.Minute)); c.State != notify.BatchClaimed || c.Attempts != 2 {
		t.Fatalf("claim after the lease = %+v, want CLAIMED attempt 2", c)
	}
	ok, err := s.CompleteBatch(t.Context(), n.ID, "b1", push(0, 1, 0, 0), t0.Add(2*time.Minute))
	noErr(t, err)
	if !ok {
		t.Fatal("CompleteBatch of a claimed batch = false")
	}
	if c := claimBatch(t, s, n.ID, "b1", t0.Add(time.Hour)); c.State != notify.BatchDone {
		t.Fatalf("claim of a completed batch = %+v, want DONE", c)
	}
}

func testCompleteBatchCountsOnce(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	_, err := s.AddChunk(t.Context(), n.ID, 0, push(500, 0, 0, 0))
	noErr(t, err)
	claimBatch(t, s, n.ID, "b1", t0)
	delta := push(0, 495, 5, 0)
	for i := range 3 { // a redelivered message completes the same batch again
		ok, err := s.CompleteBatch(t.Context(), n.ID, "b1", delta, t0)
		noErr(t, err)
		if ok != (i == 0) {
			t.Fatalf("CompleteBatch #%d = %v", i+1, ok)
		}
	}
	wantChannel(t, getStats(t, s, n.ID), notify.ChannelPush, notify.ChannelStats{Total: 500, Sent: 495, Failed: 5})
}

func testCompleteBatchUnclaimed(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	ok, err := s.CompleteBatch(t.Context(), n.ID, "never-claimed", push(0, 10, 0, 0), t0)
	noErr(t, err)
	if ok {
		t.Fatal("CompleteBatch of a batch never claimed = true")
	}
	if got := getStats(t, s, n.ID).Sum(); got.Sent != 0 {
		t.Fatalf("Sent = %d after an ignored completion", got.Sent)
	}
}

func testClaimBatchConcurrent(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	const workers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for range workers {
		wg.Go(func() {
			c, err := s.ClaimBatch(t.Context(), n.ID, "b-hot", t0, t0.Add(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			if c.State == notify.BatchClaimed {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", claimed, workers)
	}
}

func testBatchesScoped(t *testing.T, s notify.Store) {
	a := mustCreateNotification(t, s, newNotification("marketing", ""))
	b := mustCreateNotification(t, s, newNotification("marketing", ""))
	claimBatch(t, s, a.ID, "c0-0", t0)
	if c := claimBatch(t, s, b.ID, "c0-0", t0); c.State != notify.BatchClaimed {
		t.Fatalf("the same batch id of another notification = %+v, want CLAIMED", c)
	}
}

func testBatchStatsComplete(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	noErr(t, s.SetChunksTotal(t.Context(), n.ID, 1))
	_, err := s.AddChunk(t.Context(), n.ID, 0, push(3, 0, 0, 1))
	noErr(t, err)
	claimBatch(t, s, n.ID, "b1", t0)
	_, err = s.CompleteBatch(t.Context(), n.ID, "b1", push(0, 1, 0, 0), t0)
	noErr(t, err)
	if getStats(t, s, n.ID).Complete() {
		t.Fatal("Complete() with one address still to send")
	}
	claimBatch(t, s, n.ID, "b1.r1", t0)
	_, err = s.CompleteBatch(t.Context(), n.ID, "b1.r1", push(0, 0, 1, 0), t0)
	noErr(t, err)
	st := getStats(t, s, n.ID)
	if !st.Complete() || st.FinalStatus() != notify.StatusPartiallySent {
		t.Fatalf("Complete %v FinalStatus %s for %+v, want true PARTIALLY_SENT", st.Complete(), st.FinalStatus(), st)
	}
}

func testStatsByReason(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("marketing", ""))
	skipped := makeDeliveries(n.ID, notify.ChannelEmail, notify.DeliverySkipped, "r", 2)
	for i := range skipped {
		skipped[i].Reason = notify.ReasonOptedOut
	}
	push := makeDeliveries(n.ID, notify.ChannelPush, notify.DeliveryPending, "r", 3)
	createChunk(t, s, n.ID, 0, concat(skipped, push))
	claim(t, s, n.ID, deliveryIDs(push), t0)
	complete(t, s, n.ID, []notify.DeliveryUpdate{
		{ID: push[0].ID, Status: notify.DeliverySent, At: t0},
		{ID: push[1].ID, Status: notify.DeliveryFailed, Reason: notify.ReasonUnregistered, At: t0},
		{ID: push[2].ID, Status: notify.DeliveryFailed, Reason: notify.ReasonUnregistered, At: t0},
	})
	// The bulk lane counts the same way through its chunk and batch deltas.
	chunk := map[notify.Channel]notify.ChannelStats{}
	notify.CountDelivery(chunk, notify.ChannelPush, notify.DeliveryPending, "", true)
	notify.CountDelivery(chunk, notify.ChannelPush, notify.DeliverySkipped, notify.ReasonQuietHours, true)
	_, err := s.AddChunk(t.Context(), n.ID, 1, chunk)
	noErr(t, err)
	claimBatch(t, s, n.ID, "b1", t0)
	batch := map[notify.Channel]notify.ChannelStats{}
	notify.CountDelivery(batch, notify.ChannelPush, notify.DeliveryFailed, notify.ReasonRejected, false)
	_, err = s.CompleteBatch(t.Context(), n.ID, "b1", batch, t0)
	noErr(t, err)

	st := getStats(t, s, n.ID)
	wantChannel(t, st, notify.ChannelPush, notify.ChannelStats{Total: 5, Sent: 1, Failed: 3, Skipped: 1})
	wantChannel(t, st, notify.ChannelEmail, notify.ChannelStats{Total: 2, Skipped: 2})
	if len(st.Channels) != 2 {
		t.Fatalf("Channels = %v: reason counters must not show as channels", st.Channels)
	}
	if got := st.SkippedByReason; len(got) != 2 || got[notify.ReasonOptedOut] != 2 || got[notify.ReasonQuietHours] != 1 {
		t.Fatalf("SkippedByReason = %v, want opted_out 2, quiet_hours 1", got)
	}
	if got := st.FailedByReason; len(got) != 2 || got[notify.ReasonUnregistered] != 2 || got[notify.ReasonRejected] != 1 {
		t.Fatalf("FailedByReason = %v, want unregistered 2, rejected 1", got)
	}
	if got := st.Sum(); got != (notify.ChannelStats{Total: 7, Sent: 1, Failed: 3, Skipped: 3}) {
		t.Fatalf("Sum() = %+v", got)
	}
}
