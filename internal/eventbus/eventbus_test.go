package eventbus

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"herald/internal/eventbus/eventbusfake"
	"herald/internal/notify"
)

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) Add(_ context.Context, name string, v int, dims map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name+"/"+dims["Type"]] += v
}

func (c *counter) get(k string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[k] }

func setup(t *testing.T) (*Bus, *eventbusfake.Fake, *counter) {
	t.Helper()
	fake := eventbusfake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := eventbridge.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	m := &counter{n: map[string]int{}}
	b, err := New(client, "herald-test-events", m)
	if err != nil {
		t.Fatal(err)
	}
	b.Sleep = func(context.Context, time.Duration) {}
	return b, fake, m
}

var failed = notify.Event{Type: notify.EventCampaignFailed, Time: time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC),
	Service: "marketing", CampaignID: "c_1", Recipients: 2500,
	Detail: map[string]any{"code": notify.EINVALID, "error": "audience list missing"}}

func TestEmitPutsTheEventOnTheBus(t *testing.T) {
	t.Parallel()
	b, fake, m := setup(t)
	if err := b.Emit(t.Context(), failed); err != nil {
		t.Fatal(err)
	}
	got := fake.Entries()
	if len(got) != 1 {
		t.Fatalf("entries = %+v, want 1", got)
	}
	e := got[0]
	if e.EventBusName != "herald-test-events" || e.Source != "herald" || e.DetailType != "Campaign Failed" ||
		!e.Time.Equal(failed.Time) {
		t.Fatalf("entry = %+v, want bus herald-test-events, source herald, detail-type Campaign Failed at %v", e, failed.Time)
	}
	var detail notify.Event
	if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil {
		t.Fatal(err)
	}
	if detail.Type != failed.Type || detail.CampaignID != "c_1" || detail.Service != "marketing" ||
		detail.Recipients != 2500 || detail.Detail["error"] != "audience list missing" {
		t.Fatalf("detail = %+v, want the event", detail)
	}
	if n := m.get(MetricFailed + "/" + failed.Type); n != 0 {
		t.Fatalf("EventsFailed = %d after a success", n)
	}
}

func TestEmitRetriesATransientlyFailedEntry(t *testing.T) {
	t.Parallel()
	b, fake, m := setup(t)
	fake.FailEntries("ThrottlingException", "InternalFailure")
	if err := b.Emit(t.Context(), failed); err != nil {
		t.Fatalf("Emit after two transient entry failures: %v", err)
	}
	if n := len(fake.Entries()); n != 1 {
		t.Fatalf("%d entries accepted, want 1", n)
	}
	if n := m.get(MetricFailed + "/" + failed.Type); n != 0 {
		t.Fatalf("EventsFailed = %d, want 0", n)
	}
}

func TestEmitReportsAndCountsFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		arrange func(*eventbusfake.Fake)
		code    string
	}{
		{"entry throttled every time", func(f *eventbusfake.Fake) {
			f.FailEntries("ThrottlingException", "ThrottlingException", "ThrottlingException")
		}, notify.ETHROTTLED},
		{"entry refused", func(f *eventbusfake.Fake) { f.FailEntries("NotAuthorizedForSourceException") }, notify.EAUTH},
		{"call denied", func(f *eventbusfake.Fake) { f.FailCalls("AccessDeniedException") }, notify.EAUTH},
		{"no such bus", func(f *eventbusfake.Fake) { f.FailCalls("ResourceNotFoundException") }, notify.ENOTFOUND},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, fake, m := setup(t)
			tc.arrange(fake)
			err := b.Emit(t.Context(), failed)
			if !notify.IsCode(err, tc.code) {
				t.Fatalf("Emit = %v (code %s), want %s", err, notify.ErrorCode(err), tc.code)
			}
			if n := len(fake.Entries()); n != 0 {
				t.Fatalf("%d entries accepted, want none", n)
			}
			if n := m.get(MetricFailed + "/" + failed.Type); n != 1 {
				t.Fatalf("EventsFailed = %d, want 1", n)
			}
		})
	}
}

func TestToEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev         notify.Event
		detailType string
	}{
		{notify.Event{Type: notify.EventLargeSendStarted, Service: "s", NotificationID: "n_1", Recipients: 1000}, "Large Send Started"},
		{notify.Event{Type: notify.EventCampaignFinished, Service: "s", CampaignID: "c_1", Recipients: 7}, "Campaign Finished"},
		{failed, "Campaign Failed"},
	} {
		e, err := toEntry("b", tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		if *e.DetailType != tc.detailType || *e.Source != "herald" || *e.EventBusName != "b" {
			t.Errorf("%s: entry %s/%s on %s, want herald/%s on b", tc.ev.Type, *e.Source, *e.DetailType, *e.EventBusName, tc.detailType)
		}
		if (e.Time == nil) != tc.ev.Time.IsZero() {
			t.Errorf("%s: entry time %v for event time %v", tc.ev.Type, e.Time, tc.ev.Time)
		}
	}
	if _, err := toEntry("b", notify.Event{}); !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("an event without a type: %v, want EINVALID", err)
	}
}
