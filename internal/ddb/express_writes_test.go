package ddb

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

type acceptFCM struct{ sent int }

func (*acceptFCM) Provider() notify.Provider { return notify.ProviderFCM }
func (*acceptFCM) MaxBatch() int             { return 500 }
func (a *acceptFCM) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, ProviderMessageID: "projects/p/messages/" + m.DeliveryID}
		a.sent++
	}
	return out, nil
}

// countingQueue takes what the stages enqueue and counts it.
type countingQueue struct{ n int }

func (q *countingQueue) Send(_ context.Context, _ string, msgs ...notify.OutMessage) error {
	q.n += len(msgs)
	return nil
}

// A single transactional send on DynamoDB, counted the way it is billed: two items written for
// a push (the notification with its claimed delivery, then its verdict and status), three with
// the inbox, and nothing enqueued after ingest.
func TestExpressSingleSendItemWrites(t *testing.T) {
	t.Parallel()
	s, wc := countingStore(t)
	ctx := context.Background()
	if err := s.PutDevice(ctx, notify.Device{UserID: "u1", Token: "tok-u1-0001", App: "default", Platform: notify.PlatformFCM,
		Environment: "production", UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	fcm, q := &acceptFCM{}, &countingQueue{}
	p := pipeline.New(pipeline.Deps{Store: s, Queue: q, Senders: []notify.Sender{fcm},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
	for i, c := range []struct {
		channels []notify.Channel
		writes   int64
	}{{[]notify.Channel{notify.ChannelPush}, 2}, {[]notify.Channel{notify.ChannelPush, notify.ChannelInbox}, 3}} {
		body, _ := json.Marshal(notify.SendRequest{IdempotencyKey: "login-" + string(rune('a'+i)), Category: notify.CategoryTransactional,
			Channels: c.channels, Recipients: []notify.Recipient{{UserID: "u1"}}, Content: notify.Content{Title: "Your code", Body: "123456"}})
		before, sent := wc.Writes(), fcm.sent
		if fails := p.Ingest("shop", nil)(ctx, []notify.Message{{ID: "m", Body: body}}); len(fails) != 0 {
			t.Fatal(fails[0].Err)
		}
		if w := wc.Writes() - before; w != c.writes || fcm.sent != sent+1 || q.n != 0 {
			t.Fatalf("%v: %d items written (want %d), %d sent, %d enqueued", c.channels, w, c.writes, fcm.sent-sent, q.n)
		}
		t.Logf("%v: %d DynamoDB items written", c.channels, c.writes)
	}
}
