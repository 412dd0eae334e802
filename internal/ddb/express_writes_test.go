package ddb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/guregu/dynamo/v2"

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

// getCounter counts GetItem requests.
type getCounter struct{ n atomic.Int64 }

func (g *getCounter) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("HeraldGetCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if _, ok := in.Parameters.(*dynamodb.GetItemInput); ok {
					g.n.Add(1)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// countingQueue takes what the stages enqueue and counts it.
type countingQueue struct{ n int }

func (q *countingQueue) Send(_ context.Context, _ string, msgs ...notify.OutMessage) error {
	q.n += len(msgs)
	return nil
}

// A single transactional send on DynamoDB, counted the way it is billed: two items written for
// a push (the notification with its claimed delivery, then its invocation's verdicts), three with
// the inbox, and nothing enqueued after ingest. Ten sends in one invocation share the verdicts'
// item: eleven items.
func TestExpressSingleSendItemWrites(t *testing.T) {
	t.Parallel()
	s, wc := countingStore(t)
	gets := &getCounter{}
	s.db = dynamo.New(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("heraldtest", "heraldtest", "")},
		func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(os.Getenv(endpointEnv))
			o.DisableValidateResponseChecksum = true
		}, wc.Option, gets.option)
	s.client = s.db.Client()
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
		before, sent, getsBefore := wc.Writes(), fcm.sent, gets.n.Load()
		if fails := p.Ingest("shop", nil)(ctx, []notify.Message{{ID: "m", Body: body}}); len(fails) != 0 {
			t.Fatal(fails[0].Err)
		}
		if w := wc.Writes() - before; w != c.writes || fcm.sent != sent+1 || q.n != 0 {
			t.Fatalf("%v: %d items written (want %d), %d sent, %d enqueued", c.channels, w, c.writes, fcm.sent-sent, q.n)
		}
		// The verdicts are written without reading anything back.
		if g := gets.n.Load() - getsBefore; g != 0 {
			t.Fatalf("%v: %d GetItem requests, want none", c.channels, g)
		}
		t.Logf("%v: %d DynamoDB items written", c.channels, c.writes)
	}
	var msgs []notify.Message
	for i := range 10 {
		body, _ := json.Marshal(notify.SendRequest{IdempotencyKey: fmt.Sprintf("ten-%d", i), Category: notify.CategoryTransactional,
			Channels: []notify.Channel{notify.ChannelPush}, Recipients: []notify.Recipient{{UserID: "u1"}}, Content: notify.Content{Title: "Your code", Body: "123456"}})
		msgs = append(msgs, notify.Message{ID: fmt.Sprintf("m-%d", i), Body: body})
	}
	before := wc.Writes()
	if fails := p.Ingest("shop", nil)(ctx, msgs); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	if w := wc.Writes() - before; w != 11 {
		t.Fatalf("ten sends in one invocation wrote %d items, want 11", w)
	}
	for i := range 10 {
		n, err := s.GetNotification(ctx, notify.NotificationIDFor("shop", fmt.Sprintf("ten-%d", i), time.Now()))
		if err != nil || n.Status != notify.StatusSent || n.Stats.Channels[notify.ChannelPush].Sent != 1 {
			t.Fatalf("ten-%d: %+v, %v; want SENT", i, n, err)
		}
	}
}
