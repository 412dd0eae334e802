package local

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"herald/internal/notify"
)

// scheduleAt sends a reserved push to token and waits until ingest has stored it SCHEDULED.
func (e *env) scheduleAt(key, token string, at time.Time) string {
	e.t.Helper()
	var acc struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	req := notify.SendRequest{
		IdempotencyKey: key, Channels: []notify.Channel{"push"}, SendAt: &at,
		Content: notify.Content{Body: "later"}, Recipients: []notify.Recipient{{FCMToken: token}},
	}
	if code := e.do("POST", "/v1/notifications", req, &acc); code != http.StatusAccepted || acc.Status != "SCHEDULED" {
		e.t.Fatalf("POST = %d %+v, want 202 SCHEDULED", code, acc)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var st statusResp
		if e.do("GET", "/v1/notifications/"+acc.ID, nil, &st) == http.StatusOK && st.Status == "SCHEDULED" {
			return acc.ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("notification %s not stored SCHEDULED within 5s", acc.ID)
	return ""
}

func TestRescheduleEarlierFiresOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const token = "fcm-reschedule-000001"
	start := time.Now()
	id := e.scheduleAt("reschedule-1", token, start.Add(2*time.Second).UTC())
	var res struct {
		Status string    `json:"status"`
		SendAt time.Time `json:"send_at"`
	}
	earlier := start.Add(time.Second).UTC()
	if code := e.do("PATCH", "/v1/notifications/"+id, map[string]any{"send_at": earlier}, &res); code != http.StatusOK || res.Status != "SCHEDULED" {
		t.Fatalf("PATCH = %d %+v, want 200 SCHEDULED", code, res)
	}
	if st := e.waitFinal(id); st.Status != "SENT" {
		t.Fatalf("status = %s, want SENT", st.Status)
	}
	if time.Since(start) >= 2*time.Second {
		t.Logf("sent only after the original send_at (slow machine?): %s", time.Since(start))
	}
	// Past the original send_at: the replaced fire must not send again.
	time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
	if n := e.deliveredTo(token); n != 1 {
		t.Fatalf("delivered %d times, want exactly 1", n)
	}
}

func TestCancelReservedSendDeliversNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const token = "fcm-cancel-000001"
	at := time.Now().Add(time.Second).UTC()
	id := e.scheduleAt("cancel-1", token, at)
	var res struct {
		Status string `json:"status"`
	}
	if code := e.do("DELETE", "/v1/notifications/"+id, nil, &res); code != http.StatusOK || res.Status != "CANCELED" {
		t.Fatalf("DELETE = %d %+v, want 200 CANCELED", code, res)
	}
	time.Sleep(time.Until(at.Add(1500 * time.Millisecond)))
	if n := e.deliveredTo(token); n != 0 {
		t.Fatalf("delivered %d times after cancel, want 0", n)
	}
	var st statusResp
	if code := e.do("GET", "/v1/notifications/"+id, nil, &st); code != http.StatusOK || st.Status != "CANCELED" {
		t.Fatalf("GET = %d %s, want CANCELED", code, st.Status)
	}
	// PATCH after cancel: conflict.
	if code := e.do("PATCH", "/v1/notifications/"+id, map[string]any{"send_at": time.Now().Add(time.Hour).UTC()}, nil); code != http.StatusConflict {
		t.Fatalf("PATCH after cancel = %d, want 409", code)
	}
}

// A fire armed before a reschedule to a later time — already on the ingest queue when the
// PATCH lands — must not send early: it names the old send_at.
func TestStaleFireAfterRescheduleIsIgnored(t *testing.T) {
	t.Parallel()
	e := setup(t)
	old := time.Now().Add(time.Hour).UTC()
	id := e.scheduleAt("stale-fire-1", "fcm-stale-fire-0001", old)
	later := time.Now().Add(1500 * time.Millisecond).UTC()
	if code := e.do("PATCH", "/v1/notifications/"+id, map[string]any{"send_at": later}, nil); code != http.StatusOK {
		t.Fatalf("PATCH = %d", code)
	}
	body, _ := json.Marshal(notify.FireMessage{Fire: id, At: &old})
	if err := e.rt.Queue.Send(context.Background(), notify.IngestQueue("demo"), notify.OutMessage{Body: body}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.deliveredTo("fcm-stale-fire-0001"); n != 0 {
		t.Fatalf("the stale fire sent %d, want 0 before the new send_at", n)
	}
	if st := e.waitFinal(id); st.Status != "SENT" {
		t.Fatalf("status = %s", st.Status)
	}
	if n := e.deliveredTo("fcm-stale-fire-0001"); n != 1 {
		t.Fatalf("delivered %d times, want 1", n)
	}
}
