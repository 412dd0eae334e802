package notify

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTruncateKeepsUTF8(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 600) // 1200 bytes
	if got := Truncate(s, 1000); len(got) != 1000 || !utf8.ValidString(got) {
		t.Errorf("Truncate to 1000 bytes gave %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := Truncate("abc€", 5); got != "abc" {
		t.Errorf("Truncate(abc€, 5) = %q, want abc", got)
	}
}

func TestMaskPayloadMalformed(t *testing.T) {
	t.Parallel()
	// Malformed JSON (a poison message) and a body cut short still have their secrets masked.
	for _, body := range []string{
		`{"recipients":[{"fcm_token":"fcm-abcdefghijklmnopqrstuvwxyz-0001","email":"alice.secret@example.com"}]`,
		`{"channels": "push", "recipients": [{"apns_token" : "fcm-abcdefghijklmnopqrstuvwxyz-0001`,
		`{"address":"+821012345678", "phone": "alice.secret@example.com"`,
	} {
		got := string(MaskPayload([]byte(body)))
		for _, raw := range []string{"abcdefghijklmnopqrstuvwxyz", "alice.secret", "1012345678"} {
			if strings.Contains(got, raw) {
				t.Errorf("MaskPayload(%s) = %s: holds %q", body, got, raw)
			}
		}
	}
}

func TestDeadLetterEvent(t *testing.T) {
	t.Parallel()
	at := time.Unix(100, 0)
	e := DeadLetterEvent(at, "send-realtime", "m-1", EINVALID, "address alice.secret@example.com refused: "+strings.Repeat("x", 2000),
		[]byte(`{"notification_id":"n-1","campaign_id":"c-1","address":"alice.secret@example.com","body":"`+strings.Repeat("y", 2000)+`"}`))
	if e.Type != EventMessageDeadLettered || e.NotificationID != "n-1" || e.CampaignID != "c-1" || !e.Time.Equal(at) {
		t.Fatalf("event = %+v", e)
	}
	if e.Detail["queue"] != "send-realtime" || e.Detail["message_id"] != "m-1" || e.Detail["code"] != EINVALID {
		t.Fatalf("detail = %v", e.Detail)
	}
	reason, payload := e.Detail["reason"].(string), e.Detail["payload"].(string)
	if len(reason) > 500 || len(payload) > 300 || !strings.HasPrefix(reason, "address a***@example.com refused") {
		t.Fatalf("reason %d bytes %q…, payload %d bytes", len(reason), Truncate(reason, 40), len(payload))
	}
	if strings.Contains(reason+payload, "alice.secret") {
		t.Fatalf("an address survives: %s / %s", reason, payload)
	}
}
