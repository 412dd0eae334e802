package awsenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// TestCampaignFunction runs the campaign function's handler as the state machine would —
// CheckWindow → FetchPage → (the Map's sends to prepare-bulk) → SaveCursor — on DynamoDB Local
// and the SQS fake, and feeds the emitted batches to prepare.
func TestCampaignFunction(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env
	ctx := context.Background()
	now := time.Now().UTC()
	for i, u := range []string{"cu1", "cu2", "cu3"} {
		if err := e.Store.PutDevice(ctx, notify.Device{UserID: u, Token: "camp-token-" + u, App: "default",
			Platform: notify.PlatformFCM, Environment: "production", Locale: "ko-KR", UpdatedAt: now.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	c := &notify.Campaign{ID: "c_aws_1", Service: "demo",
		Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Title: "Hello", Body: "from a campaign"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "default"}}},
		State:    notify.CampaignScheduled, CreatedAt: now, UpdatedAt: now}
	if _, _, err := e.Store.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	h := e.CampaignHandler(nil)
	step := func(name string, st campaign.MachineState) campaign.MachineState {
		t.Helper()
		return awsenvtest.Invoke[campaign.MachineState](t, h, awsenv.CampaignEvent{Step: name, State: st})
	}

	st := step(campaign.StepCheckWindow, campaign.MachineState{CampaignID: c.ID})
	if st.Window != campaign.WindowOpen {
		t.Fatalf("CheckWindow window = %q, want open", st.Window)
	}
	st = step(campaign.StepFetchPage, st)
	if len(st.Batches) != 1 || st.Enqueued != 1 {
		t.Fatalf("FetchPage batches = %s enqueued %d, want one chunk", st.Batches, st.Enqueued)
	}
	// The Map state: one SQS message per batch to prepare-bulk.
	for _, b := range st.Batches {
		if _, err := w.SQS.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(w.URLBase + "prepare-bulk"),
			MessageBody: aws.String(string(b))}); err != nil {
			t.Fatal(err)
		}
	}
	st = step(campaign.StepSaveCursor, st)
	if !st.Done || len(st.Batches) != 0 {
		t.Fatalf("SaveCursor done = %v batches %d, want done with none", st.Done, len(st.Batches))
	}
	got, err := e.Store.GetCampaign(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != notify.CampaignCompleted || got.Cursor.Members != 3 || got.Cursor.ChunksEnqueued != 1 {
		t.Fatalf("campaign = %s cursor %+v, want COMPLETED with 3 members in 1 enqueued chunk", got.State, got.Cursor)
	}
	// The batch the Map sent is a prepare message prepare accepts: it creates a delivery per device.
	prep := w.Receive("prepare-bulk", 1)
	if len(prep.Records) != 1 {
		t.Fatalf("prepare-bulk holds %d messages, want 1", len(prep.Records))
	}
	r := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(func(string) pipeline.Handler { return e.Pipeline.Prepare() }), prep)
	if len(r.BatchItemFailures) != 0 {
		t.Fatalf("prepare failures: %v", awsenvtest.FailedIDs(r))
	}
	n, err := e.Store.GetNotification(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusProcessing || n.Stats.Sum().Total != 3 {
		t.Fatalf("notification %s stats %+v, want PROCESSING with 3 deliveries", n.Status, n.Stats.Sum())
	}
	// A stopped campaign: CheckWindow says stop, and a replayed SaveCursor is still done.
	if st = step(campaign.StepCheckWindow, campaign.MachineState{CampaignID: c.ID}); st.Window != campaign.WindowStop {
		t.Fatalf("CheckWindow after completion = %q, want stop", st.Window)
	}
}
