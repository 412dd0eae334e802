package local

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"herald/internal/notify"
)

// registerDevice registers token for user through the API.
func (e *env) registerDevice(user, token, platform, app string) {
	e.t.Helper()
	e.mustDo("PUT", "/v1/users/"+user+"/devices/"+token, map[string]string{"platform": platform, "app": app}, http.StatusOK)
}

// campaignToApp creates a transactional campaign (so quiet hours never hold it) to every device
// of app through the API, waits until it is COMPLETED and its notification final, and returns
// its id.
func (e *env) campaignToApp(app, title string, channels ...notify.Channel) string {
	e.t.Helper()
	var created struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	body := map[string]any{
		"category": "transactional",
		"channels": channels,
		"content":  map[string]string{"title": title, "body": "Everything is 20% off today."},
		"audience": map[string]any{"sources": []map[string]string{{"kind": "app_devices", "app": app}}},
	}
	if code := e.do("POST", "/v1/campaigns", body, &created); code != http.StatusAccepted || created.ID == "" {
		e.t.Fatalf("POST /v1/campaigns = %d %+v, want 202 with an id", code, created)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			State string `json:"state"`
			Error string `json:"error"`
		}
		e.do("GET", "/v1/campaigns/"+created.ID, nil, &st)
		if st.State == string(notify.CampaignCompleted) {
			break
		}
		if notify.CampaignState(st.State).Final() || time.Now().After(deadline) {
			e.t.Fatalf("campaign %s is %s (%s), want COMPLETED", created.ID, st.State, st.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.waitStored(created.ID); n.Status != notify.StatusSent {
		e.t.Fatalf("campaign notification %s is %s, want SENT", created.ID, n.Status)
	}
	return created.ID
}

type inboxResp struct {
	Items      []notify.InboxItem `json:"items"`
	NextCursor string             `json:"next_cursor"`
}

func (e *env) inbox(user string) []notify.InboxItem {
	e.t.Helper()
	var page inboxResp
	if code := e.do("GET", "/v1/users/"+user+"/inbox", nil, &page); code != http.StatusOK {
		e.t.Fatalf("GET inbox of %s = %d", user, code)
	}
	return page.Items
}

func (e *env) unread(user string) int {
	e.t.Helper()
	var n struct {
		Unread int `json:"unread"`
	}
	if code := e.do("GET", "/v1/users/"+user+"/inbox/unread-count", nil, &n); code != http.StatusOK {
		e.t.Fatalf("GET unread count of %s = %d", user, code)
	}
	return n.Unread
}

// TestCampaignInboxIsOneBroadcast sends a push+inbox campaign to an app's devices and checks
// the inbox side end to end through the API: every targeted user sees the campaign once (also
// with two devices), reads and deletes only their own view of it, and a user of another app
// never sees it.
func TestCampaignInboxIsOneBroadcast(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.registerDevice("alice", "fcm-bc-alice-phone", "fcm", "default")
	e.registerDevice("alice", "apns-bc-alice-ipad", "apns", "default")
	e.registerDevice("bob", "fcm-bc-bob-phone", "fcm", "default")
	// An app this deployment no longer configures (the API refuses new devices of it).
	if err := e.rt.Store.PutDevice(context.Background(), notify.Device{UserID: "carol", Platform: notify.PlatformFCM, App: "other",
		Token: "fcm-bc-carol-phone", Environment: "production", UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	id := e.campaignToApp("default", "Spring sale", notify.ChannelPush, notify.ChannelInbox)

	for _, tok := range []string{"fcm-bc-alice-phone", "apns-bc-alice-ipad", "fcm-bc-bob-phone"} {
		if n := e.deliveredTo(tok); n != 1 {
			t.Fatalf("sandbox got %d pushes for %s, want 1", n, tok)
		}
	}
	if n := e.deliveredTo("fcm-bc-carol-phone"); n != 0 {
		t.Fatalf("the other app's device got %d pushes, want 0", n)
	}
	// The broadcast is the inbox's one record: no inbox delivery per member, and the counters
	// (what record finalized on) hold exactly the three pushes.
	var st struct {
		Deliveries []struct {
			Channel string `json:"channel"`
		} `json:"deliveries"`
	}
	e.do("GET", "/v1/notifications/"+id+"?limit=1000", nil, &st)
	if len(st.Deliveries) != 0 {
		for _, d := range st.Deliveries {
			if d.Channel == string(notify.ChannelInbox) {
				t.Fatalf("campaign has an inbox delivery: %+v", st.Deliveries)
			}
		}
	}
	c, err := e.rt.Store.GetCampaign(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Progress; p.Members != 3 || p.Total != 3 || p.Sent != 3 || p.Pending != 0 {
		t.Fatalf("campaign progress %+v, want 3 members, 3 deliveries all sent", p)
	}

	for _, user := range []string{"alice", "bob"} {
		items := e.inbox(user)
		if len(items) != 1 || items[0].ID != id || items[0].Title != "Spring sale" || items[0].ReadAt != nil ||
			items[0].ExpiresAt == nil {
			t.Fatalf("%s's inbox = %+v, want the campaign once, unread, expiring", user, items)
		}
		if n := e.unread(user); n != 1 {
			t.Fatalf("%s unread = %d, want 1", user, n)
		}
	}
	if items := e.inbox("carol"); len(items) != 0 {
		t.Fatalf("carol (another app) sees %+v", items)
	}
	e.mustDo("POST", "/v1/users/carol/inbox/"+id+"/read", nil, http.StatusNotFound)
	e.mustDo("DELETE", "/v1/users/carol/inbox/"+id, nil, http.StatusNotFound)

	// alice reads it: her marker, her count.
	e.mustDo("POST", "/v1/users/alice/inbox/"+id+"/read", nil, http.StatusNoContent)
	e.mustDo("POST", "/v1/users/alice/inbox/"+id+"/read", nil, http.StatusNoContent)
	if n := e.unread("alice"); n != 0 {
		t.Fatalf("alice unread after reading = %d, want 0", n)
	}
	if items := e.inbox("alice"); len(items) != 1 || items[0].ReadAt == nil {
		t.Fatalf("alice's inbox after reading = %+v, want the campaign read", items)
	}
	if n := e.unread("bob"); n != 1 {
		t.Fatalf("bob unread after alice read = %d, want 1", n)
	}

	// bob marks all read, then deletes it: gone for bob only.
	var upd struct {
		Updated int `json:"updated"`
	}
	if code := e.do("POST", "/v1/users/bob/inbox/read-all", nil, &upd); code != http.StatusOK || upd.Updated != 1 {
		t.Fatalf("bob read-all = %d %+v, want 200 with 1 updated", code, upd)
	}
	if n := e.unread("bob"); n != 0 {
		t.Fatalf("bob unread after read-all = %d, want 0", n)
	}
	e.mustDo("DELETE", "/v1/users/bob/inbox/"+id, nil, http.StatusNoContent)
	e.mustDo("DELETE", "/v1/users/bob/inbox/"+id, nil, http.StatusNotFound)
	if items := e.inbox("bob"); len(items) != 0 {
		t.Fatalf("bob's inbox after deleting = %+v, want empty", items)
	}
	if items := e.inbox("alice"); len(items) != 1 || items[0].ID != id {
		t.Fatalf("alice's inbox after bob deleted = %+v, want the campaign", items)
	}
}

// TestCampaignInboxCostIsFlat counts store writes (rows changed on the store's one writer
// connection) to show what the inbox adds to a campaign does not grow with its audience: the
// inbox's cost is (writes of a push+inbox campaign) − (writes of the same campaign without the
// inbox), measured for one device and for many. An inbox item per member would make the second
// at least `many` rows larger than the first.
func TestCampaignInboxCostIsFlat(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	writes := func(channels ...notify.Channel) int64 {
		t.Helper()
		before, err := e.rt.Store.TotalChanges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.campaignToApp("default", fmt.Sprintf("Sale %v", channels), channels...)
		after, err := e.rt.Store.TotalChanges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	inboxCost := func() (int64, int64) {
		withInbox := writes(notify.ChannelPush, notify.ChannelInbox)
		pushOnly := writes(notify.ChannelPush)
		return withInbox - pushOnly, withInbox
	}

	e.registerDevice("u0000", "fcm-cost-00000", "fcm", "default")
	one, oneTotal := inboxCost()
	const many = 120
	for i := 1; i < many; i++ {
		e.registerDevice(fmt.Sprintf("u%04d", i/2), fmt.Sprintf("fcm-cost-%05d", i), "fcm", "default") // two devices a user
	}
	lots, lotsTotal := inboxCost()
	t.Logf("store writes for the inbox: %d with 1 device (campaign total %d), %d with %d devices (campaign total %d)",
		one, oneTotal, lots, many, lotsTotal)
	if one < 1 || one > 4 {
		t.Fatalf("the inbox of a 1-device campaign cost %d writes, want the broadcast's 1–4", one)
	}
	if lots-one > 2 || lots-one < -2 {
		t.Fatalf("the inbox cost %d writes for %d devices and %d for 1: it grows with the audience", lots, many, one)
	}
	// The broadcast is readable by every one of the users.
	for _, user := range []string{"u0000", "u0030", fmt.Sprintf("u%04d", (many-1)/2)} {
		if n := e.unread(user); n != 2 {
			t.Fatalf("%s unread = %d, want the 2 push+inbox campaigns", user, n)
		}
	}
}
