package local

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// An email only to a suppressed address is skipped, and the notification ends SKIPPED — it
// neither sent nor failed anything.
func TestAllSkippedEndsSkipped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if err := e.rt.Store.Suppress(ctx, notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelEmail, "gone@example.com"),
		Channel: notify.ChannelEmail, Masked: notify.MaskEmail("gone@example.com"), Reason: "bounce"}); err != nil {
		t.Fatal(err)
	}
	id := e.send(notify.SendRequest{Channels: []notify.Channel{"email"}, Content: notify.Content{Title: "Hi", Body: "there"},
		Recipients: []notify.Recipient{{Email: "gone@example.com"}}})
	st := e.waitFinal(id)
	if st.Status != string(notify.StatusSkipped) || len(st.Deliveries) != 1 || st.Deliveries[0].Reason != notify.ReasonSuppressed {
		t.Fatalf("status %s deliveries %+v, want SKIPPED with one suppressed delivery", st.Status, st.Deliveries)
	}
	var v struct {
		SkippedByReason map[string]int `json:"skipped_by_reason"`
	}
	e.do("GET", "/v1/notifications/"+id, nil, &v)
	if v.SkippedByReason[notify.ReasonSuppressed] != 1 {
		t.Fatalf("skipped_by_reason = %v, want suppressed 1", v.SkippedByReason)
	}
	if n := e.deliveredTo("gone@example.com"); n != 0 {
		t.Fatalf("suppressed address got %d emails", n)
	}
}

// waitStored polls the store until notification id — a campaign's, which the API serves only as
// the campaign — is final.
func (e *env) waitStored(id string) *notify.Notification {
	e.t.Helper()
	var n *notify.Notification
	waitFor(e.t, func() bool {
		var err error
		n, err = e.rt.Store.GetNotification(context.Background(), id)
		return err == nil && n.Status.Final()
	})
	return n
}

// upload appends user ids to the demo service's audience list.
func (e *env) upload(list string, users ...string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.rt.URL+"/v1/audience-lists/"+list+"/members", strings.NewReader(strings.Join(users, "\n")+"\n"))
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("upload %s = %d", list, resp.StatusCode)
	}
}

type totalsView struct {
	State  string `json:"state"`
	Totals struct {
		Members, Total, Sent, Failed, Skipped, Pending int
		SkippedByReason                                map[string]int `json:"skipped_by_reason"`
	} `json:"totals"`
}

// A marketing push campaign to consenting and non-consenting users — some with two phones —
// and to listed users with no device, one of them listed twice: every member ends in exactly
// one of sent, failed, skipped or pending, so the totals add up to the members at every read.
func TestCampaignTotalsAddUpToMembers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	users := []struct {
		id      string
		consent bool
		phones  int
	}{{"tc-yes1", true, 1}, {"tc-yes2", true, 2}, {"tc-no1", false, 1}, {"tc-no2", false, 2}, {"tc-nodev-yes", true, 0}, {"tc-nodev-no", false, 0}}
	for _, u := range users {
		for i := range u.phones {
			e.registerDevice(u.id, fmt.Sprintf("fcm-%s-%d", u.id, i), "fcm", "default")
		}
		e.mustDo("PUT", "/v1/users/"+u.id+"/preferences", map[string]any{"marketing_consent": u.consent}, 200)
	}
	e.upload("no-devices", "tc-nodev-yes", "tc-nodev-no")
	e.upload("no-devices", "tc-nodev-yes") // a second upload appends a user already listed
	var created struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{
		"channels": []string{"push"}, "content": map[string]any{"title": "Sale", "body": "Today"},
		"quiet_hours": map[string]any{"enabled": false},
		"audience": map[string]any{"sources": []map[string]any{
			{"kind": "app_devices", "app": "default"}, {"kind": "user_list", "list_id": "no-devices"}}},
	}, &created); code != 202 {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	var v totalsView
	deadline := time.Now().Add(30 * time.Second)
	for {
		v = totalsView{}
		e.do("GET", "/v1/campaigns/"+created.ID, nil, &v)
		tt := v.Totals
		// Each member is one delivery here (a device, or a listed user without one), and a
		// member not yet prepared is pending: the sum holds at every read, not only at the end.
		if sum := tt.Sent + tt.Failed + tt.Skipped + tt.Pending; sum != tt.Members {
			t.Fatalf("totals %+v: sent+failed+skipped+pending = %d, members %d", tt, sum, tt.Members)
		}
		if v.State == string(notify.CampaignCompleted) && tt.Pending == 0 && tt.Members == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("campaign not done after 30s: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tt := v.Totals
	if tt.Total != tt.Members || tt.Sent+tt.Failed+tt.Skipped != tt.Members || tt.Sent != 3 || tt.Skipped != 6 {
		t.Fatalf("totals %+v, want 9 members = 3 sent + 6 skipped", tt)
	}
	if r := tt.SkippedByReason; r[notify.ReasonNoConsent] != 4 || r[notify.ReasonNoAddress] != 1 || r[notify.ReasonDuplicate] != 1 {
		t.Fatalf("skipped by reason %v, want no_marketing_consent 4 (one per phone, and the listed user), no_address 1, duplicate 1", r)
	}
}

// A login code whose push is throttled and would be retried after its ttl_seconds ends EXPIRED:
// no retry is scheduled, so the sandbox never receives it, however late the clock moves.
func TestThrottledPushPastTTLExpires(t *testing.T) {
	t.Parallel()
	clock := &settableClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	e := startWithClock(t, config.Dev(), clock)
	const token = "fcm-login-throttle1-0001"
	e.mustDo("PUT", "/v1/users/dora/devices/"+token, map[string]any{"platform": "fcm"}, 200)
	id := e.send(notify.SendRequest{Channels: []notify.Channel{"push"}, Content: notify.Content{Title: "Code", Body: "123456"},
		Recipients: []notify.Recipient{{UserID: "dora"}}, TTLSeconds: 1})
	// The first attempt is throttled (Retry-After 1s): wait until it has been made.
	waitFor(t, func() bool {
		var st struct {
			Deliveries []struct {
				Status   string `json:"status"`
				Attempts int    `json:"attempts"`
			} `json:"deliveries"`
		}
		e.do("GET", "/v1/notifications/"+id, nil, &st)
		return len(st.Deliveries) == 1 && st.Deliveries[0].Attempts >= 1 && st.Deliveries[0].Status != "SENDING"
	})
	clock.Set(clock.Now().Add(10 * time.Second))
	st := e.waitFinal(id)
	time.Sleep(300 * time.Millisecond)
	if len(st.Deliveries) != 1 || st.Deliveries[0].Status != string(notify.DeliveryExpired) {
		t.Fatalf("deliveries %+v, want one EXPIRED", st.Deliveries)
	}
	if st.Status != string(notify.StatusFailed) {
		t.Fatalf("status %s, want FAILED (nothing sent, its only delivery expired)", st.Status)
	}
	if n := e.deliveredTo(token); n != 0 {
		t.Fatalf("the sandbox received the expired push %d times", n)
	}
}
