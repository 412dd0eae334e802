package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
)

// Canceling a running push+inbox campaign stops its sends and takes its inbox broadcast out of
// every inbox; canceling it again answers the same 200 and changes nothing.
func TestCanceledCampaignLeavesTheInbox(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	const devices = 6000 // two pages: the second waits for max_rate
	for i := range devices {
		if err := e.rt.Store.PutDevice(ctx, notify.Device{UserID: fmt.Sprintf("cc%05d", i), Platform: notify.PlatformFCM,
			App: "default", Token: fmt.Sprintf("fcm-cancel-%05d", i), Environment: "production"}); err != nil {
			t.Fatal(err)
		}
	}
	var created struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", map[string]any{
		"category": "transactional", "channels": []string{"push", "inbox"}, "max_rate": 100,
		"content":  map[string]any{"title": "Flash sale", "body": "Now"},
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
	}, &created); code != 202 {
		t.Fatalf("POST /v1/campaigns = %d", code)
	}
	waitFor(t, func() bool { return len(e.inbox("cc00000")) == 1 })
	e.mustDo("POST", "/v1/campaigns/"+created.ID+"/cancel", nil, 200)
	if items := e.inbox("cc00000"); len(items) != 0 {
		t.Fatalf("after cancel the inbox shows %+v", items)
	}
	e.mustDo("DELETE", "/v1/campaigns/"+created.ID, nil, 200)
	time.Sleep(500 * time.Millisecond)
	c, err := e.rt.Store.GetCampaign(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != notify.CampaignCanceled || c.Cursor.Members >= devices {
		t.Fatalf("campaign %s with %d members paged, want CANCELED before the second page", c.State, c.Cursor.Members)
	}
	if n := e.deliveredTo(fmt.Sprintf("fcm-cancel-%05d", devices-1)); n != 0 {
		t.Fatalf("a device of the page after the cancel got %d pushes", n)
	}
}
