package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// A realtime notification with BatchClaims: its send batches are claimed whole and each
// delivery is stored once, with its outcome — about one store row a delivery instead of three —
// while every delivery is still listed with its status, a retry is sent once, a dead token never,
// and a redelivery of every message sends and counts nothing again.
func TestRealtimeBatchClaimsStoreEachDeliveryOnce(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	ctx := t.Context()
	const tokens = 1200
	rs := scriptedTokens(tokens)
	// Two users: one with a device (pushed, and an inbox item), one without (skipped at prepare).
	if err := b.st.PutDevice(ctx, notify.Device{UserID: "u-ann", Token: "tok-ann", Platform: notify.PlatformFCM, App: "default"}); err != nil {
		t.Fatal(err)
	}
	rs = append(rs, notify.Recipient{UserID: "u-ann"}, notify.Recipient{UserID: "u-bob"})
	n := &notify.Notification{
		ID: notify.NewID("n_", b.clock.Now()), Service: "shop", Category: notify.CategoryTransactional, Lane: notify.LaneRealtime,
		BatchClaims: true, Channels: []notify.Channel{notify.ChannelPush, notify.ChannelInbox},
		Content:    notify.Content{Title: "Service notice", Body: "Back at 10:00"},
		Recipients: rs, RecipientCount: len(rs), Status: notify.StatusProcessing, CreatedAt: b.clock.Now(), UpdatedAt: b.clock.Now(),
	}
	if _, _, err := b.st.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	chunks := (len(rs) + b.p.ChunkSize() - 1) / b.p.ChunkSize()
	if err := b.st.SetChunksTotal(ctx, n.ID, chunks); err != nil {
		t.Fatal(err)
	}
	w0, _ := b.st.TotalChanges(ctx)
	if err := b.p.EnqueuePrepare(ctx, n, 0, chunks, nil); err != nil {
		t.Fatal(err)
	}
	prepared := b.drain(t, "prepare-realtime", b.p.Prepare())
	sends := b.drain(t, "send-realtime", b.p.Send())
	b.drain(t, "record-realtime", b.p.Record())

	dead := b.acceptedOnce(t, rs[:tokens], n.ID)
	if got := b.fcm.accepted["tok-ann"]; len(got) != 1 {
		t.Fatalf("u-ann's device accepted %d times, want 1", len(got))
	}
	stored, err := b.st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantPush := notify.ChannelStats{Total: tokens + 2, Sent: tokens - dead + 1, Failed: dead, Skipped: 1}
	if got := stored.Stats.Channels[notify.ChannelPush]; got != wantPush {
		t.Fatalf("push stats = %+v, want %+v", got, wantPush)
	}
	if got := stored.Stats.Channels[notify.ChannelInbox]; got.Total != 2 || got.Done() != 2 {
		t.Fatalf("inbox stats = %+v, want 2 of 2 done", got)
	}
	if stored.Status != notify.StatusPartiallySent {
		t.Fatalf("status = %s, want %s", stored.Status, notify.StatusPartiallySent)
	}

	// Every delivery is listed once, with its outcome.
	listed := map[string]notify.Delivery{}
	for cursor := ""; ; {
		ds, next, err := b.st.ListDeliveries(ctx, n.ID, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if _, dup := listed[d.ID]; dup {
				t.Fatalf("delivery %s listed twice", d.ID)
			}
			listed[d.ID] = d
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if want := tokens + 2 + 2; len(listed) != want {
		t.Fatalf("%d deliveries listed, want %d", len(listed), want)
	}
	counts := map[notify.DeliveryStatus]int{}
	for _, d := range listed {
		counts[d.Status]++
		addr := ""
		for _, r := range rs[:tokens] {
			if notify.DeliveryID(n.ID, notify.ChannelPush, r.FCMToken) == d.ID {
				addr = r.FCMToken
			}
		}
		switch {
		case strings.HasPrefix(addr, "flaky-"):
			if d.Status != notify.DeliverySent || d.Attempts != 2 {
				t.Fatalf("flaky delivery %s: %s after %d attempts, want SENT after 2", d.ID, d.Status, d.Attempts)
			}
		case strings.HasPrefix(addr, "dead-"):
			if d.Status != notify.DeliveryFailed || d.Reason != notify.ReasonUnregistered {
				t.Fatalf("dead delivery %s: %s %s, want FAILED unregistered", d.ID, d.Status, d.Reason)
			}
		case addr != "":
			if d.Status != notify.DeliverySent || d.Attempts != 1 || d.AddressMasked == "" || d.AddressMasked == addr {
				t.Fatalf("delivery %s = %+v, want SENT at the first attempt with a masked address", d.ID, d)
			}
		}
	}
	if counts[notify.DeliveryPending]+counts[notify.DeliverySending] != 0 {
		t.Fatalf("deliveries by status %v: some never ended", counts)
	}

	// About one row a delivery (the old path wrote three): the deliveries, one batch record a
	// send batch, chunk markers and counters.
	w1, _ := b.st.TotalChanges(ctx)
	perDelivery := float64(w1-w0) / float64(len(listed))
	t.Logf("%d store rows written for %d deliveries (%.3f per delivery), %d send messages", w1-w0, len(listed), perDelivery, len(sends))
	if perDelivery > 1.1 {
		t.Fatalf("%.3f store writes per delivery, want ≤ 1.1", perDelivery)
	}

	// Redelivery of everything sends nothing and counts nothing twice.
	b.redeliver(t, notify.LaneRealtime, prepared, sends, n.ID, wantPush)
}

// Ingest sets BatchClaims on a realtime notification it hands to the stage queues, and on no
// other: not on a bulk one, or one with the AlimTalk channel (an express one is stored with
// its deliveries in its own record, and its hand-over prepares it one delivery at a time).
func TestIngestChoosesBatchClaims(t *testing.T) {
	t.Parallel()
	st, _, _, _, ingest := newIngestHarness(t)
	ctx := t.Context()
	for _, c := range []struct {
		key  string
		body string
		want bool
	}{
		{"fan-out", string(sendRequest(t, "fan-out", 40)), true},
		{"marketing", `{"idempotency_key":"marketing","category":"marketing","channels":["push"],"content":{"title":"Sale","body":"Today"},"recipients":[` +
			strings.Repeat(`{"user_id":"u1"},`, 9) + `{"user_id":"u2"}]}`, false},
		{"alimtalk", `{"idempotency_key":"alimtalk","channels":["alimtalk"],"content":{"body":"Your code is 1234","data":{"alimtalk_template":"T1"}},"recipients":[` +
			strings.Repeat(`{"phone":"+821012345678"},`, 9) + `{"phone":"+821012345679"}]}`, false},
	} {
		if f := ingest(ctx, []notify.Message{{ID: "m-" + c.key, Body: []byte(c.body)}}); len(f) != 0 {
			t.Fatalf("%s: %v", c.key, f[0].Err)
		}
		n, err := st.GetNotification(ctx, notify.NotificationIDFor("orders", c.key, time.Now()))
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		if n.BatchClaims != c.want {
			t.Fatalf("%s: BatchClaims = %v, want %v", c.key, n.BatchClaims, c.want)
		}
	}
}
