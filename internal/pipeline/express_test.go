package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// expressHarness is a bulk harness whose user u1 has one FCM device with the given token.
func expressHarness(t *testing.T, token string) *bulkHarness {
	t.Helper()
	b := newBulkHarness(t)
	if err := b.st.PutDevice(t.Context(), notify.Device{UserID: "u1", Token: token, App: "default",
		Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	return b
}

func singleSend(t *testing.T, key string, channels ...string) notify.Message {
	t.Helper()
	body, err := json.Marshal(map[string]any{"idempotency_key": key, "category": "transactional", "channels": channels,
		"recipients": []map[string]any{{"user_id": "u1"}}, "content": map[string]any{"title": "Your code", "body": "123456"}})
	if err != nil {
		t.Fatal(err)
	}
	return notify.Message{ID: "m-" + key, Body: body}
}

// writes runs f and returns how many store rows it wrote.
func (b *bulkHarness) writes(t *testing.T, f func()) int64 {
	t.Helper()
	w0, _ := b.st.TotalChanges(t.Context())
	f()
	w1, _ := b.st.TotalChanges(t.Context())
	return w1 - w0
}

func (b *bulkHarness) queued(t *testing.T, queue string) int {
	t.Helper()
	st, err := b.q.Stats(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return st.Visible + st.Delayed + st.InFlight
}

func (b *bulkHarness) ingest(t *testing.T, h pipeline.Handler, m notify.Message) []pipeline.ItemFailure {
	t.Helper()
	return h(t.Context(), []notify.Message{m})
}

func TestExpressSingleSendIsThreeWritesAndNoHops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		channels []string
		writes   int64
	}{
		{[]string{"push"}, 2},          // the notification with its claimed delivery; its verdict and status
		{[]string{"push", "inbox"}, 3}, // and the inbox item
	} {
		b := expressHarness(t, "tok-1")
		h := b.p.Ingest("shop", nil)
		m := singleSend(t, "login-1", c.channels...)
		var fails []pipeline.ItemFailure
		if w := b.writes(t, func() { fails = b.ingest(t, h, m) }); w != c.writes {
			t.Errorf("%v: %d store rows written, want %d", c.channels, w, c.writes)
		}
		if len(fails) != 0 {
			t.Fatalf("%v: ingest failed: %v", c.channels, fails[0].Err)
		}
		if got := b.fcm.accepted["tok-1"]; len(got) != 1 {
			t.Fatalf("%v: token sent %d times, want once", c.channels, len(got))
		}
		for _, q := range []string{"prepare-realtime", "send-realtime", "record-realtime", "cleanup"} {
			if k := b.queued(t, q); k != 0 {
				t.Errorf("%v: %d messages on %s, want none", c.channels, k, q)
			}
		}
		id := notify.NotificationIDFor("shop", "login-1", b.clock.Now())
		n, err := b.st.GetNotification(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != notify.StatusSent {
			t.Errorf("%v: status %s, want SENT", c.channels, n.Status)
		}
		for _, ch := range c.channels {
			if got := n.Stats.Channels[notify.Channel(ch)]; got != (notify.ChannelStats{Total: 1, Sent: 1}) {
				t.Errorf("%v: %s stats %+v, want one sent", c.channels, ch, got)
			}
		}
		ds, next, err := b.st.ListDeliveries(t.Context(), id, "", 10)
		if err != nil || next != "" || len(ds) != len(c.channels) {
			t.Fatalf("%v: ListDeliveries = %d deliveries, next %q, %v", c.channels, len(ds), next, err)
		}
		for _, d := range ds {
			if d.Status != notify.DeliverySent || d.NotificationID != id || d.AddressMasked == "tok-1" || d.Address != "" {
				t.Errorf("%v: delivery %+v", c.channels, d)
			}
			if d.Channel == notify.ChannelPush && (d.Attempts != 1 || d.AddressMasked == "") {
				t.Errorf("%v: push delivery %+v", c.channels, d)
			}
		}
		rs, err := b.st.GetRecipients(t.Context(), id, 0, 10)
		if err != nil || len(rs) != 1 || rs[0].UserID != "u1" {
			t.Errorf("%v: recipients %+v, %v", c.channels, rs, err)
		}
		// The same message again (SQS redelivery) and the same request again send nothing.
		m2 := m
		m2.ID = "another-message"
		for _, again := range []notify.Message{m, m2} {
			if w := b.writes(t, func() { fails = b.ingest(t, h, again) }); w != 0 || len(fails) != 0 {
				t.Errorf("%v: a repeated request wrote %d rows, failed %v", c.channels, w, fails)
			}
		}
		if got := b.fcm.accepted["tok-1"]; len(got) != 1 {
			t.Fatalf("%v: token sent %d times after repeats, want once", c.channels, len(got))
		}
	}
}

func TestExpressDeadTokenFailsAndGoesToCleanup(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "dead-1")
	if fails := b.ingest(t, b.p.Ingest("shop", nil), singleSend(t, "k", "push")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	n, _ := b.st.GetNotification(t.Context(), notify.NotificationIDFor("shop", "k", b.clock.Now()))
	if n.Status != notify.StatusFailed || n.Stats.FailedByReason[notify.ReasonUnregistered] != 1 {
		t.Fatalf("status %s, failed by reason %v", n.Status, n.Stats.FailedByReason)
	}
	if k := b.queued(t, "cleanup"); k != 1 {
		t.Fatalf("%d cleanup messages, want 1", k)
	}
}

// A retryable verdict leaves the express path: the delivery becomes a record the send stage
// retries with its backoff, and record finishes the notification.
func TestExpressRetryGoesToTheSendStage(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "flaky-1")
	if fails := b.ingest(t, b.p.Ingest("shop", nil), singleSend(t, "k", "push", "inbox")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	id := notify.NotificationIDFor("shop", "k", b.clock.Now())
	n, _ := b.st.GetNotification(t.Context(), id)
	if n.Status != notify.StatusProcessing || n.Express != nil {
		t.Fatalf("after a throttled send: status %s, express %v", n.Status, n.Express)
	}
	if k := b.queued(t, "send-realtime"); k != 1 {
		t.Fatalf("%d retry messages, want 1", k)
	}
	b.drain(t, "send-realtime", b.p.Send())
	b.drain(t, "record-realtime", b.p.Record())
	n, _ = b.st.GetNotification(t.Context(), id)
	if n.Status != notify.StatusSent || n.Stats.Channels[notify.ChannelPush] != (notify.ChannelStats{Total: 1, Sent: 1}) ||
		n.Stats.Channels[notify.ChannelInbox] != (notify.ChannelStats{Total: 1, Sent: 1}) {
		t.Fatalf("status %s, stats %+v", n.Status, n.Stats.Channels)
	}
	if got := b.fcm.accepted["flaky-1"]; len(got) != 1 {
		t.Fatalf("sent %d times, want once", len(got))
	}
	ds, _, _ := b.st.ListDeliveries(t.Context(), id, "", 10)
	if len(ds) != 2 {
		t.Fatalf("%d deliveries listed, want 2", len(ds))
	}
	for _, d := range ds {
		if d.Channel == notify.ChannelPush && (d.Status != notify.DeliverySent || d.Attempts != 2) {
			t.Fatalf("push delivery %+v, want SENT on its second attempt", d)
		}
		// The first attempt's answer travelled with the retry and is kept with the outcome.
		if d.Channel == notify.ChannelPush && (len(d.History) != 1 || d.History[0].Attempt != 1 ||
			d.History[0].Status != notify.DeliveryPending || d.History[0].Reason == "" || !d.History[0].RetryAt.After(d.History[0].At)) {
			t.Fatalf("push delivery history %+v, want its first attempt, retried later", d.History)
		}
		if d.Channel == notify.ChannelInbox && len(d.History) != 0 {
			t.Fatalf("inbox delivery history %+v, want none", d.History)
		}
	}
}

// failingComplete is a store whose verdict writes fail, batched or not: the worker "dies" after
// the send.
type failingComplete struct {
	notify.Store
}

func (failingComplete) CompleteExpress(context.Context, string, []notify.DeliveryUpdate) (int, error) {
	return 0, errors.New("killed")
}

func (failingComplete) CompleteExpressBatch(context.Context, string, []notify.ExpressDone) error {
	return errors.New("killed")
}

// A worker that dies mid-send: the message comes back; while the claim's lease runs it waits,
// after it the stage queues send what was left — once more, with the same collapse id — and the
// notification counts the recipient once.
func TestExpressWorkerDiedMidSendIsFinishedByTheStages(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	dying := pipeline.New(pipeline.Deps{Store: failingComplete{b.st}, Queue: b.q, Senders: []notify.Sender{b.fcm},
		Clock: b.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
	m := singleSend(t, "k", "push", "inbox")
	if fails := b.ingest(t, dying.Ingest("shop", nil), m); len(fails) != 1 {
		t.Fatalf("the dying ingest reported %d failures, want 1", len(fails))
	}
	h := b.p.Ingest("shop", nil)
	fails := b.ingest(t, h, m)
	if len(fails) != 1 || !notify.IsRetryable(fails[0].Err) {
		t.Fatalf("redelivery under the lease: %v, want a retryable failure", fails)
	}
	if k := b.queued(t, "prepare-realtime"); k != 0 {
		t.Fatalf("handed over under a live lease")
	}
	b.clock.Add(2 * time.Minute)
	if fails := b.ingest(t, h, m); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	b.drain(t, "prepare-realtime", b.p.Prepare())
	b.drain(t, "send-realtime", b.p.Send())
	b.drain(t, "record-realtime", b.p.Record())
	id := notify.NotificationIDFor("shop", "k", b.clock.Now())
	n, _ := b.st.GetNotification(t.Context(), id)
	if n.Status != notify.StatusSent || n.Stats.Channels[notify.ChannelPush] != (notify.ChannelStats{Total: 1, Sent: 1}) ||
		n.Stats.Channels[notify.ChannelInbox] != (notify.ChannelStats{Total: 1, Sent: 1}) {
		t.Fatalf("status %s, stats %+v", n.Status, n.Stats.Channels)
	}
	got := b.fcm.accepted["tok-1"]
	if len(got) != 2 || got[0] != got[1] || got[0] != id {
		t.Fatalf("sends %v: want the interrupted send and one resend, both collapsing on %s", got, id)
	}
	items, _, err := b.st.ListInbox(t.Context(), "u1", "", 10, b.clock.Now())
	if err != nil || len(items) != 1 {
		t.Fatalf("inbox %d items, %v; want one", len(items), err)
	}
}

// failingInbox is a store whose inbox writes fail.
type failingInbox struct {
	notify.Store
}

func (failingInbox) PutInboxItems(context.Context, []notify.InboxItem) error {
	return errors.New("disk full")
}

// An inbox-only send is finished by ingest; one whose inbox write fails is handed to prepare,
// which writes the item, and record finishes it.
func TestExpressInboxOnlyAndAFailedInboxWrite(t *testing.T) {
	t.Parallel()
	b := expressHarness(t, "tok-1")
	if fails := b.ingest(t, b.p.Ingest("shop", nil), singleSend(t, "inbox-only", "inbox")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	n, _ := b.st.GetNotification(t.Context(), notify.NotificationIDFor("shop", "inbox-only", b.clock.Now()))
	if n.Status != notify.StatusSent {
		t.Fatalf("inbox-only: status %s", n.Status)
	}
	broken := pipeline.New(pipeline.Deps{Store: failingInbox{b.st}, Queue: b.q, Senders: []notify.Sender{b.fcm},
		Clock: b.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
	if fails := b.ingest(t, broken.Ingest("shop", nil), singleSend(t, "k", "push", "inbox")); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	b.drain(t, "prepare-realtime", b.p.Prepare())
	b.drain(t, "send-realtime", b.p.Send())
	b.drain(t, "record-realtime", b.p.Record())
	id := notify.NotificationIDFor("shop", "k", b.clock.Now())
	n, _ = b.st.GetNotification(t.Context(), id)
	if n.Status != notify.StatusSent || n.Stats.Channels[notify.ChannelInbox] != (notify.ChannelStats{Total: 1, Sent: 1}) {
		t.Fatalf("status %s, stats %+v", n.Status, n.Stats.Channels)
	}
	if got := b.fcm.accepted["tok-1"]; len(got) != 1 {
		t.Fatalf("push sent %d times, want once", len(got))
	}
	items, _, err := b.st.ListInbox(t.Context(), "u1", "", 10, b.clock.Now())
	if err != nil || len(items) != 2 {
		t.Fatalf("inbox %d items, %v; want both sends' items", len(items), err)
	}
}
