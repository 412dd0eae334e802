package notify

import (
	"testing"
	"time"
)

func TestInboxEventIDRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 15, 27, 123456789, time.UTC)
	id := InboxEventID(at, "n_01JDXK6Q5W3V8Z2T4R7M9B1C0D")
	if id != "1796116527123456789-n_01JDXK6Q5W3V8Z2T4R7M9B1C0D" {
		t.Fatalf("id %q", id)
	}
	got, err := ParseInboxEventID(id)
	if err != nil || !got.Equal(at) {
		t.Fatalf("parse %q = %v %v", id, got, err)
	}
	// Ids compare as their times do while the 19 digits last (until 2286).
	if a, b := InboxEventID(at, "z"), InboxEventID(at.Add(time.Nanosecond), "a"); a >= b {
		t.Fatalf("%q sorts after %q", a, b)
	}
	for _, bad := range []string{"", "yesterday", "123-n_x", "1796116527123456789", "-1796116527123456789-x", "17961165271234567890-x"} {
		if _, err := ParseInboxEventID(bad); !IsCode(err, EINVALID) {
			t.Errorf("ParseInboxEventID(%q) = %v, want EINVALID", bad, err)
		}
	}
}

func TestParseResume(t *testing.T) {
	if since, bad := ParseResume([]byte(`{"action":"resume"}`)); bad != nil || !since.IsZero() {
		t.Fatalf("resume without id: %v %+v", since, bad)
	}
	id := InboxEventID(time.Unix(1796116527, 0), "n_x")
	if since, bad := ParseResume([]byte(`{"action":"resume","last_event_id":"` + id + `"}`)); bad != nil || since.Unix() != 1796116527 {
		t.Fatalf("resume %s: %v %+v", id, since, bad)
	}
	for _, m := range []string{`{"action":"subscribe"}`, `not json`, `{"action":"resume","last_event_id":"x"}`} {
		if _, bad := ParseResume([]byte(m)); bad == nil || bad.Type != InboxEventError || bad.Error == "" {
			t.Errorf("%s answered %+v, want an error event", m, bad)
		}
	}
}
