package local

import (
	"encoding/json"
	"slices"
	"testing"

	"herald/internal/notify"
)

// The ids of a released ingest message: the API's attribute on a single request, each
// request's attribute in a batch, none for a producer's message.
func TestIngestedIDs(t *testing.T) {
	batch, err := json.Marshal(notify.SendBatch{
		Notifications: []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)},
		Attributes:    []map[string]string{{notify.AttrNotificationID: "n_1"}, {notify.AttrNotificationID: "n_2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    notify.Message
		want []string
	}{
		{"single", notify.Message{Body: []byte(`{"recipients":[]}`), Attributes: map[string]string{notify.AttrNotificationID: "n_0"}}, []string{"n_0"}},
		{"batch", notify.Message{Body: batch}, []string{"n_1", "n_2"}},
		{"producer", notify.Message{Body: []byte(`{"recipients":[]}`)}, nil},
		{"not JSON", notify.Message{Body: []byte(`"attributes" but no object`)}, nil},
	} {
		if got := ingestedIDs(c.m); !slices.Equal(got, c.want) {
			t.Errorf("%s: ingestedIDs = %q, want %q", c.name, got, c.want)
		}
	}
}
