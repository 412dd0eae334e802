package local

import (
	"net/http"
	"testing"
	"time"

	"herald/internal/notify"
)

// A batch through the local runtime: one request, each notification sent once, and the batch
// again sends nothing.
func TestSendBatchEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	users := []string{"bob", "carol", "dave"}
	var reqs []notify.SendRequest
	for _, u := range users {
		e.mustDo("PUT", "/v1/users/"+u+"/devices/fcm-"+u+"-phone-0001", map[string]any{"platform": "fcm"}, 200)
		reqs = append(reqs, notify.SendRequest{IdempotencyKey: "login-" + u, Category: notify.CategoryTransactional,
			Channels: []notify.Channel{"push", "inbox"}, Content: notify.Content{Title: "Your code", Body: "123456"},
			Recipients: []notify.Recipient{{UserID: u}}})
	}
	var out struct {
		Notifications []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"notifications"`
	}
	for range 2 {
		if code := e.do("POST", "/v1/notifications/batch", map[string]any{"notifications": reqs}, &out); code != http.StatusAccepted {
			t.Fatalf("POST /v1/notifications/batch = %d", code)
		}
		if len(out.Notifications) != len(users) {
			t.Fatalf("answer %+v", out)
		}
		for _, n := range out.Notifications {
			if st := e.waitFinal(n.ID); st.Status != "SENT" {
				t.Fatalf("%s: %s, want SENT", n.ID, st.Status)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // give a wrongly re-processed request time to show up
	for _, u := range users {
		if n := e.deliveredTo("fcm-" + u + "-phone-0001"); n != 1 {
			t.Errorf("%s's phone got %d pushes, want 1", u, n)
		}
	}
}
