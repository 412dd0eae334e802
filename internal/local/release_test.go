package local

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
)

// The ids of a released ingest message: the API's attribute on a single request, each
// request's attribute in a batch; for a producer's message the id ingest derives from the
// request's idempotency key or, without one, from the message's id — a batch's requests each
// from their own (pipeline.BatchItemID).
func TestIngestedIDs(t *testing.T) {
	batch, err := json.Marshal(notify.SendBatch{
		Notifications: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)},
		Attributes:    []map[string]string{{notify.AttrNotificationID: "n_1"}, {notify.AttrNotificationID: "n_2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	producerBatch, err := json.Marshal(notify.SendBatch{
		Notifications: []json.RawMessage{json.RawMessage(`{"idempotency_key":"k7"}`), json.RawMessage(`{"recipients":[]}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var zero time.Time
	for _, c := range []struct {
		name string
		m    notify.Message
		want []string
	}{
		{"single", notify.Message{ID: "m0", Body: []byte(`{"recipients":[]}`), Attributes: map[string]string{notify.AttrNotificationID: "n_0"}}, []string{"n_0"}},
		{"batch", notify.Message{ID: "m1", Body: batch}, []string{"n_1", "n_2"}},
		{"producer", notify.Message{ID: "m2", Body: []byte(`{"recipients":[]}`)},
			[]string{notify.NotificationIDFor("shop", "sqs-message:m2", zero)}},
		{"producer with a key", notify.Message{ID: "m3", Body: []byte(`{"idempotency_key":"order-1","recipients":[]}`)},
			[]string{notify.NotificationIDFor("shop", "order-1", zero)}},
		{"producer batch", notify.Message{ID: "m4", Body: producerBatch},
			[]string{notify.NotificationIDFor("shop", "k7", zero), notify.NotificationIDFor("shop", "sqs-message:m4#1", zero)}},
		{"not JSON", notify.Message{ID: "m5", Body: []byte(`"attributes" but no object`)},
			[]string{notify.NotificationIDFor("shop", "sqs-message:m5", zero)}},
	} {
		if got := ingestedIDs("shop", c.m); !slices.Equal(got, c.want) {
			t.Errorf("%s: ingestedIDs = %q, want %q", c.name, got, c.want)
		}
	}
}
