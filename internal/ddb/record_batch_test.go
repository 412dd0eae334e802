package ddb

import (
	"context"
	"testing"
	"time"

	"herald/internal/notify"
)

// A realtime batch whose worker died after storing its deliveries and before marking the batch
// done: they are stored, tagged with the batch, and counted nowhere. The batch re-run once its
// lease ends writes them again as its own and counts its outcomes once; a delivery another
// batch stored meanwhile keeps that outcome.
func TestRecordBatchAfterACrashBeforeItsCompletion(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	n := &notify.Notification{ID: notify.NewID("n_", t0), Service: "billing", Status: notify.StatusProcessing,
		Channels: []notify.Channel{notify.ChannelPush}, BatchClaims: true, CreatedAt: t0, UpdatedAt: t0}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.SetChunksTotal(ctx, n.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddChunk(ctx, n.ID, 0, map[notify.Channel]notify.ChannelStats{notify.ChannelPush: {Total: 3}}); err != nil {
		t.Fatal(err)
	}
	ds := make([]notify.Delivery, 3)
	for i, tok := range []string{"tok-a", "tok-b", "tok-c"} {
		ds[i] = notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelPush, tok), UserID: "u-" + tok, Channel: notify.ChannelPush,
			Provider: notify.ProviderFCM, App: "default", AddressMasked: notify.MaskToken(tok), Status: notify.DeliveryFailed,
			Reason: notify.ReasonRejected, Attempts: 1, UpdatedAt: t0}
	}
	if c, err := s.ClaimBatch(ctx, n.ID, "b1", t0, t0.Add(time.Minute)); err != nil || c.State != notify.BatchClaimed {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	// The first attempt stores its outcomes and dies.
	if stored, err := s.putRecorded(ctx, n.ID, "b1", ds, t0); err != nil || !stored[0] || !stored[1] || !stored[2] {
		t.Fatalf("first attempt stored %v, %v", stored, err)
	}
	// Meanwhile another batch of the notification (a retry of an earlier one) records tok-c.
	if _, err := s.ClaimBatch(ctx, n.ID, "b0.r1", t0, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	other := ds[2]
	other.Status, other.Reason, other.Attempts = notify.DeliverySent, "", 2
	if _, err := s.RecordBatch(ctx, n.ID, "b0.r1", []notify.Delivery{other}, t0); err != nil {
		t.Fatal(err)
	}

	// The re-run, after the lease, sends again: every one SENT this time.
	t1 := t0.Add(2 * time.Minute)
	if c, err := s.ClaimBatch(ctx, n.ID, "b1", t1, t1.Add(time.Minute)); err != nil || c.State != notify.BatchClaimed || c.Attempts != 2 {
		t.Fatalf("re-claim: %+v, %v", c, err)
	}
	again := make([]notify.Delivery, len(ds))
	for i, d := range ds {
		d.Status, d.Reason, d.Attempts, d.UpdatedAt = notify.DeliverySent, "", 2, t1
		again[i] = d
	}
	ok, err := s.RecordBatch(ctx, n.ID, "b1", again, t1)
	if err != nil || !ok {
		t.Fatalf("record after the crash: %v, %v", ok, err)
	}
	got, err := s.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if push := got.Stats.Channels[notify.ChannelPush]; push != (notify.ChannelStats{Total: 3, Sent: 3}) {
		t.Fatalf("push stats = %+v, want 3 of 3 sent, each counted once", push)
	}
	listed, _, err := s.ListDeliveries(ctx, n.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 {
		t.Fatalf("%d deliveries listed, want 3", len(listed))
	}
	for _, d := range listed {
		if d.Status != notify.DeliverySent || d.Attempts != 2 {
			t.Fatalf("delivery %s: %s after %d attempts, want SENT after 2", d.ID, d.Status, d.Attempts)
		}
	}
}
