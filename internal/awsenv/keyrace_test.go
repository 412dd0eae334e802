package awsenv_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/awsenv/awsenvtest"
	"herald/internal/notify"
)

// TestKeyRaceOnDynamoDB: 50 requests under one idempotency key reach the api function at once,
// half of them the same body, the rest each another; DynamoDB decides. Exactly one is accepted
// (202); a request with the winner's body is answered 200 with its id, every other one 409
// idempotency_key_reused. Ingest then stores the winner once and dead-letters nothing.
func TestKeyRaceOnDynamoDB(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env
	apiH := e.APIHandler(nil)
	var base events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(awsenvtest.Fixture(t, "api/post-notification.json"), &base); err != nil {
		t.Fatal(err)
	}
	body := func(i int) string {
		text := "the same body"
		if i%2 == 1 {
			text = fmt.Sprintf("body %d", i)
		}
		return fmt.Sprintf(`{"idempotency_key": "race-1", "channels": ["inbox"], "content": {"title": "Race", "body": %q}, "recipients": [{"user_id": "dave"}]}`, text)
	}

	const racers = 50
	answers := make([]events.APIGatewayV2HTTPResponse, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			req := base
			req.Body = body(i)
			answers[i] = awsenvtest.Invoke[events.APIGatewayV2HTTPResponse](t, apiH, req)
		})
	}
	wg.Wait()

	winner := -1
	for i, a := range answers {
		if a.StatusCode == 202 {
			if winner >= 0 {
				t.Fatalf("requests %d and %d were both accepted", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no request was accepted: first answer %d %s", answers[0].StatusCode, answers[0].Body)
	}
	id := notify.NotificationIDFor("demo", "race-1", time.Now())
	sameBody := 0
	for i, a := range answers {
		switch {
		case i == winner:
		case body(i) == body(winner):
			sameBody++
			if a.StatusCode != 200 || !json.Valid([]byte(a.Body)) || !strings.Contains(a.Body, id) {
				t.Errorf("request %d (the winner's body): %d %s, want 200 with %s", i, a.StatusCode, a.Body, id)
			}
		default:
			if a.StatusCode != 409 || !strings.Contains(a.Body, notify.EKEYREUSED) || !strings.Contains(a.Body, `"field":"idempotency_key"`) {
				t.Errorf("request %d (another body): %d %s, want 409 %s naming idempotency_key", i, a.StatusCode, a.Body, notify.EKEYREUSED)
			}
		}
	}

	// Everything queued is the winner's request: ingest stores one notification and refuses none.
	queued := w.Receive("ingest-demo", 1+sameBody)
	if len(queued.Records) != 1+sameBody {
		t.Fatalf("%d messages queued, want the winner's and its %d retries", len(queued.Records), sameBody)
	}
	if r := awsenvtest.Invoke[events.SQSEventResponse](t, e.SQSHandler(e.IngestStage), queued); len(r.BatchItemFailures) != 0 {
		t.Fatalf("ingest failed %v", awsenvtest.FailedIDs(r))
	}
	if dl := w.Receive("ingest-demo-dlq", 0); len(dl.Records) != 0 {
		t.Fatalf("%d messages dead-lettered for a race the API decided", len(dl.Records))
	}
	n, err := e.Store.GetNotification(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Content notify.Content `json:"content"`
	}
	_ = json.Unmarshal([]byte(body(winner)), &want)
	if n.Content.Body != want.Content.Body {
		t.Fatalf("stored body %q, want the winner's %q", n.Content.Body, want.Content.Body)
	}
}
