package pipeline_test

import (
	"testing"
	"time"

	"herald/internal/notify"
)

// bulkWithTTL stores and prepares a marketing notification with ttl on the bulk lane.
func (b *bulkHarness) bulkWithTTL(t *testing.T, ttl time.Duration, qh *notify.QuietHours, tokens ...string) *notify.Notification {
	t.Helper()
	ctx := t.Context()
	var rs []notify.Recipient
	for _, tok := range tokens {
		rs = append(rs, notify.Recipient{FCMToken: tok})
	}
	n := &notify.Notification{
		ID: notify.NewID("n_", b.clock.Now()), Service: "shop", Category: notify.CategoryMarketing, Lane: notify.LaneBulk,
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "Today only"},
		Recipients: rs, RecipientCount: len(rs), TTL: ttl, QuietHours: qh,
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
	return n
}

func (b *bulkHarness) wantExpired(t *testing.T, id string, stats notify.ChannelStats, expired int, status notify.NotificationStatus) {
	t.Helper()
	b.drain(t, "record-bulk", b.p.Record())
	n, err := b.st.GetNotification(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Stats.Channels[notify.ChannelPush]; got != stats {
		t.Fatalf("push stats = %+v, want %+v", got, stats)
	}
	if got := n.Stats.FailedByReason[notify.ReasonExpired]; got != expired {
		t.Fatalf("failed by reason = %v, want expired %d", n.Stats.FailedByReason, expired)
	}
	if n.Status != status {
		t.Fatalf("status = %s, want %s", n.Status, status)
	}
}

// A retry that would come after the TTL is not scheduled: the delivery ends EXPIRED and is
// never sent late, while the one that went through on time is sent.
func TestRetryPastTTLExpires(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	n := b.bulkWithTTL(t, time.Second, nil, "tok-ok", "flaky-late")
	b.drain(t, "send-bulk", b.p.Send())
	if got := b.fcm.accepted["flaky-late"]; len(got) != 0 {
		t.Fatalf("flaky-late accepted %d times after its ttl", len(got))
	}
	if got := b.fcm.accepted["tok-ok"]; len(got) != 1 {
		t.Fatalf("tok-ok accepted %d times, want 1", len(got))
	}
	b.wantExpired(t, n.ID, notify.ChannelStats{Total: 2, Sent: 1, Failed: 1}, 1, notify.StatusPartiallySent)
}

// A batch still queued when the TTL runs out is recorded EXPIRED, not sent.
func TestQueuedPastTTLExpires(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	n := b.bulkWithTTL(t, time.Minute, nil, "tok-a", "tok-b")
	b.clock.Add(time.Minute)
	b.drain(t, "send-bulk", b.p.Send())
	if len(b.fcm.accepted) != 0 {
		t.Fatalf("sent %v after the ttl", b.fcm.accepted)
	}
	b.wantExpired(t, n.ID, notify.ChannelStats{Total: 2, Failed: 2}, 2, notify.StatusFailed)
}

// A batch held for quiet hours past the TTL comes back when the TTL ends — not at the end of
// the night — and is recorded EXPIRED.
func TestHeldPastTTLExpires(t *testing.T) {
	t.Parallel()
	b := newBulkHarness(t)
	// 19:00 in Seoul on the harness clock: inside a window that starts at 18:00.
	qh := &notify.QuietHours{Enabled: true, Start: "18:00", End: "08:00", TimeZone: "Asia/Seoul"}
	n := b.bulkWithTTL(t, 10*time.Minute, qh, "tok-night")
	msgs, err := b.q.Receive(t.Context(), "send-bulk", 10, time.Minute, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("send-bulk: %d messages, %v", len(msgs), err)
	}
	if f := b.p.Send()(t.Context(), msgs); len(f) != 0 {
		t.Fatalf("send: %+v", f)
	}
	_ = b.q.Delete(t.Context(), "send-bulk", msgs[0].ReceiptHandle)
	if len(b.fcm.accepted) != 0 {
		t.Fatalf("sent during quiet hours: %v", b.fcm.accepted)
	}
	b.clock.Add(10 * time.Minute)
	b.drain(t, "send-bulk", b.p.Send())
	if len(b.fcm.accepted) != 0 {
		t.Fatalf("sent %v after the ttl", b.fcm.accepted)
	}
	b.wantExpired(t, n.ID, notify.ChannelStats{Total: 1, Failed: 1}, 1, notify.StatusFailed)
}
