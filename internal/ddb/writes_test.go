package ddb

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// The bulk lane's cost on DynamoDB, counted the way it is billed: a 2,000-recipient notification
// in 4 chunks of 500 and 4 send batches writes a fixed handful of items per chunk and per batch.
func TestWriteCounterCountsBulkLaneWrites(t *testing.T) {
	t.Parallel()
	s, wc := countingStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	n := &notify.Notification{ID: notify.NewID("n_", t0), Service: "shop", Category: notify.CategoryMarketing, Lane: notify.LaneBulk,
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "t", Body: "b"},
		Recipients: []notify.Recipient{{FCMToken: "x"}}, RecipientCount: 1, Status: notify.StatusProcessing, CreatedAt: t0, UpdatedAt: t0}
	if _, _, err := s.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	before := wc.Writes()
	const recipients, chunk = 2000, 500
	for c := range recipients / chunk {
		if _, err := s.AddChunk(ctx, n.ID, c, map[notify.Channel]notify.ChannelStats{notify.ChannelPush: {Total: chunk}}); err != nil {
			t.Fatal(err)
		}
		b := "b" + string(rune('0'+c))
		if _, err := s.ClaimBatch(ctx, n.ID, b, t0, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompleteBatch(ctx, n.ID, b, map[notify.Channel]notify.ChannelStats{notify.ChannelPush: {Sent: chunk}}, t0); err != nil {
			t.Fatal(err)
		}
	}
	writes := wc.Writes() - before
	perRecipient := float64(writes) / recipients
	t.Logf("DynamoDB items written for %d bulk recipients: %d (%.4f per recipient)", recipients, writes, perRecipient)
	// Per chunk: marker + counter shard (+ its registration the first time); per batch: claim,
	// then done + counter shard (+ registration).
	if writes < 4*5 || writes > 4*7 {
		t.Fatalf("%d items written, want 20–28 (5–7 per chunk-and-batch)", writes)
	}
	if perRecipient > 0.05 {
		t.Fatalf("%.4f writes per recipient, want ≤ 0.05", perRecipient)
	}
}

// countingStore is a store on DynamoDB Local whose client counts the items it writes; it skips
// t without DynamoDB Local.
func countingStore(t *testing.T) (*Store, *WriteCounter) {
	t.Helper()
	testClient(t)
	wc := &WriteCounter{}
	db := dynamo.New(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("heraldtest", "heraldtest", "")},
		func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(os.Getenv(endpointEnv))
			o.DisableValidateResponseChecksum = true
		}, wc.Option)
	s, _ := newTestStoreOn(t, db)
	return s, wc
}
