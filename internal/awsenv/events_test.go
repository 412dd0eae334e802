package awsenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/campaign"
	"herald/internal/notify"
)

// busEvents decodes the operator events the functions put on the world's bus, checking each
// entry's source and detail-type.
func busEvents(t *testing.T, w *awsenvtest.World) []notify.Event {
	t.Helper()
	var out []notify.Event
	for _, e := range w.Events.Entries() {
		var ev notify.Event
		if err := json.Unmarshal([]byte(e.Detail), &ev); err != nil {
			t.Fatal(err)
		}
		if e.EventBusName != awsenvtest.EventBus || e.Source != "herald" || e.DetailType != notify.EventTitle(ev.Type) {
			t.Fatalf("entry %+v: want bus %s, source herald, detail-type %q", e, awsenvtest.EventBus, notify.EventTitle(ev.Type))
		}
		out = append(out, ev)
	}
	return out
}

// TestOperatorEventsOnEventBridge: ingest puts large_send_started for a notification of 1,000
// recipients, and the campaign function campaign_finished and campaign_failed, on the bus
// HERALD_EVENT_BUS names; a bus that refuses does not fail the step.
func TestOperatorEventsOnEventBridge(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env
	ctx := context.Background()

	// A large notification through the ingest function.
	var rs []string
	for i := range notify.LargeSend {
		rs = append(rs, fmt.Sprintf(`{"user_id":"big-%04d"}`, i))
	}
	body := `{"idempotency_key":"big-1","channels":["push"],"content":{"title":"Hi","body":"all"},"recipients":[` +
		strings.Join(rs, ",") + `]}`
	if _, err := w.SQS.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(w.URLBase + "ingest-demo"), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	resp := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(e.IngestStage), w.Receive("ingest-demo", 1))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("ingest failures: %v", awsenvtest.FailedIDs(resp))
	}
	evs := busEvents(t, w)
	if len(evs) != 1 || evs[0].Type != notify.EventLargeSendStarted || evs[0].Service != "demo" ||
		evs[0].Recipients != notify.LargeSend || evs[0].NotificationID == "" {
		t.Fatalf("events after ingest = %+v, want one large_send_started for demo with 1000 recipients", evs)
	}

	// A campaign that finishes: campaign_finished with its members.
	now := time.Now().UTC()
	for i, u := range []string{"ev1", "ev2"} {
		if err := e.Store.PutDevice(ctx, notify.Device{UserID: u, Token: "ev-token-" + u, App: "events",
			Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: now.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	newCampaign := func(id string, kind notify.AudienceKind) {
		t.Helper()
		c := &notify.Campaign{ID: id, Service: "demo",
			Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
				Content: notify.Content{Title: "Hello", Body: "events"}},
			Audience: notify.Audience{Sources: []notify.Segment{{Kind: kind, App: "events"}}},
			State:    notify.CampaignScheduled, CreatedAt: now, UpdatedAt: now}
		if _, _, err := e.Store.CreateCampaign(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	h := e.CampaignHandler(nil)
	newCampaign("c_ev_ok", notify.AudienceAppDevices)
	st := campaign.MachineState{CampaignID: "c_ev_ok"}
	for _, step := range []string{campaign.StepCheckWindow, campaign.StepFetchPage, campaign.StepSaveCursor} {
		var err error
		if st, err = h(ctx, awsenv.CampaignEvent{Step: step, State: st}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	if !st.Done {
		t.Fatalf("campaign not done after one page: %+v", st)
	}
	evs = busEvents(t, w)
	if last := evs[len(evs)-1]; len(evs) != 2 || last.Type != notify.EventCampaignFinished || last.CampaignID != "c_ev_ok" || last.Recipients != 2 {
		t.Fatalf("events = %+v, want campaign_finished for c_ev_ok with 2 recipients last", evs)
	}

	// A campaign whose step fails permanently (the prepare messages are refused as too large):
	// FAILED and campaign_failed on the bus — and, with the bus refusing the event, still FAILED
	// with the step's own error returned.
	steps := campaign.New(campaign.Deps{Campaigns: e.Store, Audience: e.Store, Notifications: e.Store,
		Dispatcher: e.Pipeline, Logger: e.Log, Events: e.Events}, campaign.Config{})
	tooLarge := func(*notify.Notification, int, int) ([]json.RawMessage, error) {
		return nil, notify.Errorf(notify.ETOOLARGE, "prepare message over the queue's limit")
	}
	m := campaign.NewMachine(steps, tooLarge, campaign.MachineConfig{})
	for _, tc := range []struct {
		id     string
		refuse bool
	}{{"c_ev_bad", false}, {"c_ev_bad_refused", true}} {
		newCampaign(tc.id, notify.AudienceAppDevices)
		if tc.refuse {
			w.Events.FailCalls("AccessDeniedException")
		}
		st, err := m.Run(ctx, campaign.StepCheckWindow, campaign.MachineState{CampaignID: tc.id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Run(ctx, campaign.StepFetchPage, st); !notify.IsCode(err, notify.ETOOLARGE) {
			t.Fatalf("%s FetchPage = %v, want ETOOLARGE", tc.id, err)
		}
		c, err := e.Store.GetCampaign(ctx, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != notify.CampaignFailed {
			t.Fatalf("%s state = %s, want FAILED", tc.id, c.State)
		}
		var failed []notify.Event
		for _, ev := range busEvents(t, w) {
			if ev.Type == notify.EventCampaignFailed && ev.CampaignID == tc.id {
				failed = append(failed, ev)
			}
		}
		if want := map[bool]int{false: 1, true: 0}[tc.refuse]; len(failed) != want ||
			(want == 1 && (failed[0].Detail["code"] != notify.ETOOLARGE || failed[0].Recipients != 2)) {
			t.Fatalf("%s campaign_failed events = %+v, want %d with code too_large and 2 recipients", tc.id, failed, want)
		}
	}
}
