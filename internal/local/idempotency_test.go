package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

// post sends body to path with the demo key and returns the status and the raw answer; safe to
// call from many goroutines (it never fails the test itself).
func (e *env) post(path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, _ := http.NewRequest("POST", e.rt.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// TestRacingRequestsGetOneAnswer: 50 requests under one idempotency key at once, half with one
// body and the rest each with another. Exactly one is accepted (202); the winner's body gets 200
// with the same id, every other body 409 idempotency_key_reused naming the field. One push goes
// out, nothing is dead-lettered.
func TestRacingRequestsGetOneAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.mustDo("PUT", "/v1/users/rita/devices/fcm-rita-phone-0001", map[string]any{"platform": "fcm"}, 200)
	body := func(i int) notify.SendRequest {
		text := "Your order shipped."
		if i%2 == 1 {
			text = fmt.Sprintf("Variant %d.", i)
		}
		return notify.SendRequest{IdempotencyKey: "order-77-shipped", Channels: []notify.Channel{notify.ChannelPush},
			Content: notify.Content{Title: "Shipped", Body: text}, Recipients: []notify.Recipient{{UserID: "rita"}}}
	}
	const racers = 50
	codes := make([]int, racers)
	answers := make([]string, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			var raw []byte
			codes[i], raw, errs[i] = e.post("/v1/notifications", body(i))
			answers[i] = string(raw)
		})
	}
	wg.Wait()
	winner := -1
	for i := range racers {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if codes[i] == http.StatusAccepted {
			if winner >= 0 {
				t.Fatalf("requests %d and %d were both accepted", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no request was accepted; first answer %d %s", codes[0], answers[0])
	}
	id := notify.NotificationIDFor("demo", "order-77-shipped", time.Now())
	for i := range racers {
		switch {
		case i == winner:
		case body(i).Content.Body == body(winner).Content.Body:
			if codes[i] != http.StatusOK || !strings.Contains(answers[i], id) {
				t.Errorf("request %d (the winner's body) = %d %s, want 200 with %s", i, codes[i], answers[i], id)
			}
		default:
			if codes[i] != http.StatusConflict || !strings.Contains(answers[i], `"code":"idempotency_key_reused"`) ||
				!strings.Contains(answers[i], `"field":"idempotency_key"`) {
				t.Errorf("request %d (another body) = %d %s, want 409 idempotency_key_reused naming idempotency_key", i, codes[i], answers[i])
			}
		}
	}
	if st := e.waitFinal(id); st.Status != "SENT" {
		t.Fatalf("notification %s is %s, want SENT", id, st.Status)
	}
	time.Sleep(300 * time.Millisecond) // give a wrongly queued second copy time to show up
	pushes := e.rt.Sandbox.Recorder.List("fcm", "fcm-rita-phone-0001")
	if len(pushes) != 1 || pushes[0].Body != body(winner).Content.Body {
		t.Fatalf("the device got %d pushes (%+v), want 1 with the winner's body", len(pushes), pushes)
	}
	if n := e.deadLetters(); n != 0 {
		t.Fatalf("%d messages dead-lettered for a race the API decided", n)
	}
}

// TestCampaignKeyReusedWithAnotherBody: a campaign's idempotency key given again with the same
// request is answered 200 with the campaign; with another request, 409 naming the field.
func TestCampaignKeyReusedWithAnotherBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	campaign := func(title string) map[string]any {
		return map[string]any{
			"idempotency_key": "spring-sale", "category": "transactional", "channels": []string{"inbox"},
			"content":  map[string]string{"title": title, "body": "Everything is 20% off today."},
			"audience": map[string]any{"sources": []map[string]string{{"kind": "app_devices", "app": "default"}}},
		}
	}
	var first, again struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/campaigns", campaign("Spring sale"), &first); code != http.StatusAccepted {
		t.Fatalf("create = %d, want 202", code)
	}
	if code := e.do("POST", "/v1/campaigns", campaign("Spring sale"), &again); code != http.StatusOK || again.ID != first.ID {
		t.Fatalf("retry = %d %s, want 200 with %s", code, again.ID, first.ID)
	}
	code, raw, err := e.post("/v1/campaigns", campaign("Summer sale"))
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusConflict || !strings.Contains(string(raw), `"code":"idempotency_key_reused"`) ||
		!strings.Contains(string(raw), `"field":"idempotency_key"`) || !strings.Contains(string(raw), first.ID) {
		t.Fatalf("another body = %d %s, want 409 idempotency_key_reused naming idempotency_key and %s", code, raw, first.ID)
	}
}
