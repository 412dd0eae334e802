package notify

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSanitizeAuditParams(t *testing.T) {
	t.Parallel()
	in := map[string]string{
		"email":           "alice@example.com",
		"Recipient_Phone": "+821012345678",
		"fcm_token":       "fcm-token-abcdefghijklmnop",
		"address":         "bob@example.com",
		"contacts":        "x",
		"api_key":         "dev-demo-key",
		"content.title":   "Your order shipped",
		"send_at":         "2026-12-01T10:00:00Z",
		"moved":           "3",
		"note":            "asked by carol@example.org, call +15005550006 back",
		"":                "empty name",
	}
	got := SanitizeAuditParams(in)
	want := map[string]string{
		"send_at": "2026-12-01T10:00:00Z",
		"moved":   "3",
		"note":    "asked by c***@example.org, call +15*******06 back",
	}
	if len(got) != len(want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, raw := range []string{"alice@", "bob@", "carol@", "12345678", "5550006", "abcdefghijklmnop", "dev-demo-key", "shipped"} {
		for k, v := range got {
			if strings.Contains(k+"="+v, raw) {
				t.Errorf("%q survived in %s=%s", raw, k, v)
			}
		}
	}
	if in["email"] != "alice@example.com" {
		t.Error("the caller's map was changed")
	}
}

func TestSanitizeAuditParamsBounds(t *testing.T) {
	t.Parallel()
	in := map[string]string{}
	for i := range 40 {
		in[fmt.Sprintf("p%02d", i)] = strings.Repeat("v", 1000)
	}
	in[strings.Repeat("k", 100)] = "long name" // sorts after p00…p39: cut off by the count
	got := SanitizeAuditParams(in)
	if long := SanitizeAuditParams(map[string]string{strings.Repeat("k", 100): "v"}); len(long) != 1 || long[strings.Repeat("k", auditParamKeyMaxBytes)] != "v" {
		t.Fatalf("a long name gave %v", long)
	}
	if len(got) != auditParamsMax {
		t.Fatalf("kept %d params, want %d", len(got), auditParamsMax)
	}
	for k, v := range got {
		if len(k) > auditParamKeyMaxBytes || len(v) > auditParamValueMaxBytes {
			t.Fatalf("param of %d/%d bytes kept", len(k), len(v))
		}
	}
	if got := SanitizeAuditParams(nil); got == nil || len(got) != 0 {
		t.Fatalf("nil params gave %v, want an empty map", got)
	}
}

func TestAuditIDFor(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a := AuditIDFor("req-1", "ops", AuditCampaignCancel, AuditTargetCampaign, "c_1", now)
	if a != AuditIDFor("req-1", "ops", AuditCampaignCancel, AuditTargetCampaign, "c_1", now.Add(time.Second)) {
		t.Error("the same request gave two ids")
	}
	if a == AuditIDFor("req-1", "ops", AuditCampaignPause, AuditTargetCampaign, "c_1", now) {
		t.Error("two actions of one request share an id")
	}
	if AuditIDFor("", "ops", AuditCampaignCancel, AuditTargetCampaign, "c_1", now) == AuditIDFor("", "ops", AuditCampaignCancel, AuditTargetCampaign, "c_1", now) {
		t.Error("ids without a request id repeat")
	}
}

func TestAuditCursorRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 123, time.UTC)
	gotAt, id, err := ParseAuditCursor(AuditCursor(at, "a_x#y"))
	if err != nil || !gotAt.Equal(at) || id != "a_x#y" {
		t.Fatalf("round trip = %v %q %v", gotAt, id, err)
	}
	for _, bad := range []string{"", "x", "123#a", "0000000000000000000a#a", "00000000000000000001#"} {
		if _, _, err := ParseAuditCursor(bad); !IsCode(err, EINVALID) {
			t.Errorf("ParseAuditCursor(%q) = %v, want invalid", bad, err)
		}
	}
}
