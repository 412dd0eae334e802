package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
)

// noDispatch is a campaign.Dispatcher that enqueues nothing: these tests drive no pages.
type noDispatch struct{}

func (noDispatch) ChunkSize() int { return 500 }
func (noDispatch) EnqueuePrepare(context.Context, *notify.Notification, int, int, func(int) time.Duration) error {
	return nil
}
func (noDispatch) EnqueueRecord(context.Context, *notify.Notification) error { return nil }

// withCampaigns serves the campaign routes from the env's store and real campaign steps.
func withCampaigns() func(*Options) {
	return func(o *Options) {
		store := o.Store.(interface {
			notify.Store
			notify.CampaignStore
			notify.AudienceSource
		})
		steps := campaign.New(campaign.Deps{Campaigns: store, Audience: store, Notifications: store,
			Dispatcher: noDispatch{}, Clock: o.Clock}, campaign.Config{})
		o.Campaigns = struct {
			notify.CampaignStore
			*campaign.Steps
		}{store, steps}
	}
}

func campaignBody() map[string]any {
	return map[string]any{
		"channels": []string{"push"},
		"content":  map[string]any{"title": "Sale", "body": "50% off today"},
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
		"max_rate": 1000,
	}
}

func TestCampaignLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	body := campaignBody()
	body["send_at"] = e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	body["idempotency_key"] = "spring-sale"
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusAccepted)
	wantDocumented(t, "POST", "/v1/campaigns", rec)
	acc := decodeBody[campaignState](t, rec)
	if acc.ID == "" || acc.State != notify.CampaignScheduled {
		t.Fatalf("created %+v, want SCHEDULED", acc)
	}
	// The same idempotency key returns the same campaign.
	rec = e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusOK)
	if again := decodeBody[campaignState](t, rec); again.ID != acc.ID {
		t.Fatalf("retry made %s, want %s", again.ID, acc.ID)
	}

	rec = e.do(t, "GET", "/v1/campaigns/"+acc.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/campaigns/{id}", rec)
	v := decodeBody[campaignView](t, rec)
	if v.Category != notify.CategoryMarketing || !v.QuietHours.Enabled || v.QuietHours.Start != "21:00" ||
		len(v.Sources) != 1 || v.Sources[0].Done || v.Totals.RemainingExact || v.MaxRate != 1000 || v.ETA != nil {
		t.Fatalf("view %+v: want marketing with default quiet hours, one unread source, remaining unknown", v)
	}
	wantError(t, e.do(t, "GET", "/v1/campaigns/"+acc.ID, billingKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")

	// SCHEDULED can't be paused or resumed; it can be canceled, and cancelling again answers
	// the same, as for a notification.
	var first string
	for _, c := range []struct {
		verb   string
		status int
		state  notify.CampaignState
	}{
		{"pause", 409, ""}, {"resume", 409, ""}, {"cancel", 200, notify.CampaignCanceled}, {"cancel", 200, notify.CampaignCanceled},
	} {
		rec := e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/"+c.verb, ordersKey, nil)
		wantDocumented(t, "POST", "/v1/campaigns/{id}/"+c.verb, rec)
		if c.status != 200 {
			wantError(t, rec, c.status, notify.ECONFLICT, "")
			continue
		}
		wantStatus(t, rec, c.status)
		if got := decodeBody[campaignState](t, rec); got.State != c.state {
			t.Fatalf("%s: state %s, want %s", c.verb, got.State, c.state)
		}
		if first == "" {
			first = rec.Body.String()
		} else if rec.Body.String() != first {
			t.Fatalf("repeated cancel answered %s, the first %s", rec.Body, first)
		}
	}
	rec = e.do(t, "DELETE", "/v1/campaigns/"+acc.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if rec.Body.String() != first {
		t.Fatalf("DELETE after cancel answered %s, want %s", rec.Body, first)
	}
}

// A campaign id is not a notification id: the notification routes send the caller to
// /v1/campaigns, and a campaign that already ended can't be canceled — the same code as for a
// notification that went out.
func TestCampaignIDsAndFinishedCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, campaignBody())
	wantStatus(t, rec, http.StatusAccepted)
	acc := decodeBody[campaignState](t, rec)
	if !strings.HasPrefix(acc.ID, notify.CampaignIDPrefix) {
		t.Fatalf("campaign id %s, want the %s prefix", acc.ID, notify.CampaignIDPrefix)
	}
	for _, method := range []string{"GET", "DELETE"} {
		got := wantError(t, e.do(t, method, "/v1/notifications/"+acc.ID, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
		if !strings.Contains(got.Message, "/v1/campaigns/"+acc.ID) {
			t.Fatalf("%s: 404 message %q does not point to /v1/campaigns/%s", method, got.Message, acc.ID)
		}
	}
	got := wantError(t, e.do(t, "PATCH", "/v1/notifications/"+acc.ID, ordersKey, map[string]any{"send_at": e.clock.Now().Add(time.Hour)}),
		http.StatusNotFound, notify.ENOTFOUND, "")
	if !strings.Contains(got.Message, "/v1/campaigns/") {
		t.Fatalf("PATCH: 404 message %q", got.Message)
	}

	// A campaign stored before the c_ prefix keeps its n_ id and stays a campaign only.
	old := &notify.Campaign{ID: notify.NewID(notify.NotificationIDPrefix, e.clock.Now()), Service: "orders",
		Notification: notify.Notification{Category: notify.CategoryMarketing, Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Body: "old"}},
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "default"}}},
		State:    notify.CampaignRunning, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
	old.ApplyDefaults()
	if _, _, err := e.store.CreateCampaign(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(t, "GET", "/v1/campaigns/"+old.ID, ordersKey, nil), http.StatusOK)
	wantError(t, e.do(t, "GET", "/v1/notifications/"+old.ID, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	// One created with an idempotency key then has the key's n_ id: a retry of its create
	// finds it instead of making a c_ twin.
	keyed := *old
	keyed.ID = notify.NotificationIDFor("orders", "legacy-sale", e.clock.Now())
	if _, _, err := e.store.CreateCampaign(context.Background(), &keyed); err != nil {
		t.Fatal(err)
	}
	body := campaignBody()
	body["idempotency_key"] = "legacy-sale"
	rec = e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[campaignState](t, rec); got.ID != keyed.ID {
		t.Fatalf("retry of a legacy keyed create made %s, want %s", got.ID, keyed.ID)
	}

	// COMPLETED: cancel is a 409 already_finished.
	if err := e.store.SetCampaignState(context.Background(), acc.ID, notify.CampaignTransition{To: notify.CampaignCompleted, At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"POST", "DELETE"} {
		path := "/v1/campaigns/" + acc.ID
		if method == "POST" {
			path += "/cancel"
		}
		rec := e.do(t, method, path, ordersKey, nil)
		wantError(t, rec, http.StatusConflict, notify.EFINISHED, "")
	}
}

func TestCampaignPauseResume(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	body := campaignBody()
	body["category"] = "transactional"
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusAccepted)
	acc := decodeBody[campaignState](t, rec)
	if acc.State != notify.CampaignRunning {
		t.Fatalf("state %s, want RUNNING", acc.State)
	}
	rec = e.do(t, "GET", "/v1/campaigns/"+acc.ID, ordersKey, nil)
	if v := decodeBody[campaignView](t, rec); v.StartedAt == nil {
		t.Fatal("a campaign created running has no started_at: its rate and ETA cannot be computed")
	}
	wantError(t, e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/pause", billingKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	for _, c := range []struct {
		verb  string
		state notify.CampaignState
	}{{"pause", notify.CampaignPaused}, {"resume", notify.CampaignRunning}} {
		rec := e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/"+c.verb, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		if got := decodeBody[campaignState](t, rec); got.State != c.state {
			t.Fatalf("%s: state %s, want %s", c.verb, got.State, c.state)
		}
	}
	wantError(t, e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/resume", ordersKey, nil), http.StatusConflict, notify.ECONFLICT, "")
}

func TestCreateCampaignValidation(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	with := func(k string, v any) map[string]any {
		b := campaignBody()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name  string
		body  any
		field string
	}{
		{"no channels", with("channels", nil), "channels"},
		{"bad channel", with("channels", []string{"fax"}), "channels[0]"},
		{"no content", with("content", map[string]any{}), "content.body"},
		{"no audience", with("audience", nil), "audience.sources"},
		{"source without app", with("audience", map[string]any{"sources": []map[string]any{{"kind": "app_devices"}}}), "audience.sources[0].app"},
		{"bad kind", with("audience", map[string]any{"sources": []map[string]any{{"kind": "everyone"}}}), "audience.sources[0].kind"},
		{"bad category", with("category", "spam"), "category"},
		{"negative rate", with("max_rate", -1), "max_rate"},
		{"bad quiet hours", with("quiet_hours", map[string]any{"enabled": true, "start": "25:00", "end": "08:00"}), "quiet_hours.start"},
		{"bad quiet hours without enabled", with("quiet_hours", map[string]any{"start": "9pm"}), "quiet_hours.start"},
		{"bad quiet hours, disabled", with("quiet_hours", map[string]any{"enabled": false, "end": "24:30"}), "quiet_hours.end"},
		{"bad quiet hours zone", with("quiet_hours", map[string]any{"time_zone": "Asia/Nowhere"}), "quiet_hours.time_zone"},
		{"unknown quiet hours key", with("quiet_hours", map[string]any{"enable": false}), "quiet_hours.enable"},
		{"send_at too far", with("send_at", e.clock.Now().Add(400*24*time.Hour).Format(time.RFC3339)), "send_at"},
		{"send_at not a time", with("send_at", "soon"), "send_at"},
		{"unknown field", with("recipients", []string{"u1"}), "recipients"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.do(t, "POST", "/v1/campaigns", ordersKey, c.body)
			wantError(t, rec, http.StatusBadRequest, notify.EINVALID, c.field)
			wantDocumented(t, "POST", "/v1/campaigns", rec)
		})
	}
}

func TestCampaignsNotConfigured(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, campaignBody())
	wantError(t, rec, http.StatusNotImplemented, codeNotImplemented, "")
	wantDocumented(t, "POST", "/v1/campaigns", rec)
}

func TestCampaignViewRateETAAndReasons(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	started := now.Add(-10 * time.Second)
	c := &notify.Campaign{
		ID: "c1", State: notify.CampaignRunning, StartedAt: &started,
		Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: "shop"}}},
		Cursor:   notify.CampaignCursor{Members: 200, Sources: []notify.SourceCursor{{LastSeq: 200}}},
		Progress: notify.CampaignProgress{Members: 200, Total: 200, Sent: 90, Failed: 5, Skipped: 5, Pending: 100, Unpaged: 900,
			SkippedByReason: map[string]int{notify.ReasonQuietHours: 5}, FailedByReason: map[string]int{notify.ReasonUnregistered: 5}},
	}
	v := toCampaignView(c, now)
	if v.RatePerSecond != 10 {
		t.Fatalf("rate = %v/s, want 10 (100 done in 10 s)", v.RatePerSecond)
	}
	// In recipients, the unit of max_rate: 200 dispatched in 10 s, of an audience of about 1,100.
	if v.RecipientsPerSecond != 20 || v.Totals.Audience != 1100 {
		t.Fatalf("recipients/s = %v, audience = %d; want 20 and 1100 (200 dispatched + 900 unpaged)", v.RecipientsPerSecond, v.Totals.Audience)
	}
	if v.Totals.Remaining != 1000 || v.Totals.RemainingExact {
		t.Fatalf("remaining = %d exact %v, want 1000 estimated (100 pending + 900 unpaged)", v.Totals.Remaining, v.Totals.RemainingExact)
	}
	if v.ETA == nil || !v.ETA.Equal(now.Add(100*time.Second)) {
		t.Fatalf("eta = %v, want %v", v.ETA, now.Add(100*time.Second))
	}
	if v.Totals.SkippedByReason[notify.ReasonQuietHours] != 5 || v.Totals.FailedByReason[notify.ReasonUnregistered] != 5 {
		t.Fatalf("reasons = %v / %v", v.Totals.SkippedByReason, v.Totals.FailedByReason)
	}
	// Paused: no ETA; finished: the rate is over the campaign's own duration.
	c.State = notify.CampaignPausedQuietHours
	if v := toCampaignView(c, now); v.ETA != nil {
		t.Fatalf("paused campaign has eta %v", v.ETA)
	}
	finished := started.Add(5 * time.Second)
	c.State, c.FinishedAt = notify.CampaignCompleted, &finished
	if v := toCampaignView(c, now.Add(time.Hour)); v.RatePerSecond != 20 || !v.Totals.RemainingExact {
		t.Fatalf("completed: rate %v exact %v, want 20/s exact", v.RatePerSecond, v.Totals.RemainingExact)
	}
}

func TestCampaignRescheduleAndDelete(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	body := campaignBody()
	now := e.clock.Now()
	body["send_at"] = now.Add(24 * time.Hour).Format(time.RFC3339)
	later := now.Add(72 * time.Hour).Truncate(time.Second)
	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusAccepted)
	acc := decodeBody[campaignState](t, rec)

	rec = e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, ordersKey, map[string]any{"send_at": later.In(time.FixedZone("KST", 9*3600)).Format(time.RFC3339)})
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "PATCH", "/v1/campaigns/{id}", rec)
	v := decodeBody[campaignView](t, rec)
	if v.State != notify.CampaignScheduled || v.SendAt == nil || !v.SendAt.Equal(later) {
		t.Fatalf("after PATCH: state %s send_at %v, want SCHEDULED at %v", v.State, v.SendAt, later)
	}
	wantError(t, e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, ordersKey, map[string]any{"send_at": "2001-01-01T00:00:00Z"}),
		http.StatusBadRequest, notify.EINVALID, "send_at")
	wantError(t, e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, ordersKey, map[string]any{}), http.StatusBadRequest, notify.EINVALID, "send_at")
	wantError(t, e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, billingKey, map[string]any{"send_at": later.Add(time.Hour).Format(time.RFC3339)}),
		http.StatusNotFound, notify.ENOTFOUND, "")

	rec = e.do(t, "DELETE", "/v1/campaigns/"+acc.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "DELETE", "/v1/campaigns/{id}", rec)
	if got := decodeBody[campaignState](t, rec); got.State != notify.CampaignCanceled {
		t.Fatalf("DELETE: state %s, want CANCELED", got.State)
	}
	// A canceled campaign can no longer be moved.
	wantError(t, e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, ordersKey, map[string]any{"send_at": later.Add(time.Hour).Format(time.RFC3339)}),
		http.StatusConflict, notify.ECONFLICT, "")
}

// TestQuietHoursGivenAreEnabled: a marketing campaign's quiet_hours given without "enabled"
// hold — a window meant to keep ads from the night is never stored disabled — with the law's
// bounds where one is left out; only "enabled": false turns them off.
func TestQuietHoursGivenAreEnabled(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	for i, c := range []struct {
		quiet   map[string]any
		enabled bool
		start   string
		end     string
	}{
		{map[string]any{"start": "22:00", "end": "07:00"}, true, "22:00", "07:00"},
		{map[string]any{"time_zone": "Asia/Tokyo"}, true, "21:00", "08:00"},
		{map[string]any{"enabled": false}, false, "", ""},
	} {
		b := campaignBody()
		b["category"] = "marketing"
		b["idempotency_key"] = fmt.Sprintf("quiet-%d", i)
		b["quiet_hours"] = c.quiet
		rec := e.do(t, "POST", "/v1/campaigns", ordersKey, b)
		wantStatus(t, rec, http.StatusAccepted)
		id := decodeBody[map[string]any](t, rec)["id"].(string)
		got := decodeBody[map[string]any](t, e.do(t, "GET", "/v1/campaigns/"+id, ordersKey, nil))
		q, _ := got["quiet_hours"].(map[string]any)
		if q["enabled"] != c.enabled || c.enabled && (q["start"] != c.start || q["end"] != c.end) {
			t.Errorf("quiet_hours %v read back %v, want enabled %v %s–%s", c.quiet, q, c.enabled, c.start, c.end)
		}
	}
}
