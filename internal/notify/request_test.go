package notify_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// fieldOf is the field an EINVALID error names ("" for none or another error).
func fieldOf(err error) string {
	var e *notify.Error
	if errors.As(err, &e) && e.Code == notify.EINVALID {
		return e.Field
	}
	return ""
}

func validRequest() notify.SendRequest {
	return notify.SendRequest{
		Channels:   []notify.Channel{notify.ChannelPush, notify.ChannelEmail},
		Content:    notify.Content{Title: "Shipped", Body: "Line one\nLine two\tend"},
		Recipients: []notify.Recipient{{UserID: "u1"}},
	}
}

func TestSendRequestRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	if r := validRequest(); r.Validate(now) != nil {
		t.Fatalf("valid request refused: %v", r.Validate(now))
	}
	for _, c := range []struct {
		field  string
		mutate func(r *notify.SendRequest)
	}{
		{"content.title", func(r *notify.SendRequest) { r.Content.Title = "a\r\nBcc: x" }},
		{"content.title", func(r *notify.SendRequest) { r.Content.Title = "a\u202eb" }},
		{"content.title", func(r *notify.SendRequest) { r.Content.Title = "a\u009bb" }},
		{"content.body", func(r *notify.SendRequest) { r.Content.Body = "a\x00b" }},
		{"content.body", func(r *notify.SendRequest) { r.Content.Body = "a\u2066b" }},
		{"channel_content.push.title", func(r *notify.SendRequest) {
			r.ChannelContent = map[notify.Channel]notify.Content{notify.ChannelPush: {Title: "x\x7f"}}
		}},
		{"localized.ko.title", func(r *notify.SendRequest) {
			r.Localized = map[string]notify.Content{"ko": {Title: "x\ty"}}
		}},
		{"content.data.k", func(r *notify.SendRequest) { r.Content.Data = map[string]string{"k": "\x1b"} }},
		{"content.data", func(r *notify.SendRequest) { r.Content.Data = map[string]string{"k\n": "v"} }},
		{"collapse_id", func(r *notify.SendRequest) { r.CollapseID = "c\n" }},
		{"recipients[0].app", func(r *notify.SendRequest) { r.Recipients[0].App = "shop" }},
		{"recipients[0].app", func(r *notify.SendRequest) { r.Recipients[0] = notify.Recipient{FCMToken: "t", App: "a b"} }},
	} {
		r := validRequest()
		c.mutate(&r)
		if got := fieldOf(r.Validate(now)); got != c.field {
			t.Errorf("%+v: field %q, want %q (%v)", r, got, c.field, r.Validate(now))
		}
	}
}

// An image URL is absolute http(s), checked before the request is accepted: FCM refuses any other,
// and the push would fail for every device after a 202.
func TestSendRequestImageURL(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for url, field := range map[string]string{
		"https://cdn.example.com/a.png?size=2": "",
		"http://cdn.example.com/a.png":         "",
		"not a url":                            "content.image_url",
		"/images/a.png":                        "content.image_url",
		"ftp://cdn.example.com/a.png":          "content.image_url",
		"https:///a.png":                       "content.image_url",
		"https://cdn.example.com/{{sku}}.png":  "",                  // braces are path characters to a URL
		"{{image}}":                            "content.image_url", // a request is not a template: nothing fills it
	} {
		r := validRequest()
		r.Content.ImageURL = url
		if got := fieldOf(r.Validate(now)); got != field {
			t.Errorf("image_url %q: field %q, want %q", url, got, field)
		}
	}
	r := validRequest()
	r.Localized = map[string]notify.Content{"ko": {Title: "x", ImageURL: "cdn.example.com/a.png"}}
	if got := fieldOf(r.Validate(now)); got != "localized.ko.image_url" {
		t.Errorf("localized image_url: field %q", got)
	}
}

func TestSendAtBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for at, ok := range map[time.Time]bool{
		{}: false,
		time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC): false,
		now.Add(-48 * time.Hour):                      true, // past: sent now, as always
		now.Add(364 * 24 * time.Hour):                 true,
		now.Add(366 * 24 * time.Hour):                 false,
	} {
		err := notify.ValidateSendAt(&at, now)
		if (err == nil) != ok || (err != nil && fieldOf(err) != "send_at") {
			t.Errorf("ValidateSendAt(%v) = %v, want ok %v", at, err, ok)
		}
	}
}

func TestValidEmailLengths(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		strings.Repeat("a", 64) + "@example.com":         true,
		strings.Repeat("a", 65) + "@example.com":         false,
		"a@" + strings.Repeat("b", 241) + ".example.com": false, // 255 bytes
		"a@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 56) + ".com": true, // 254 bytes
		"not an address": false,
	} {
		if got := notify.ValidEmail(addr); got != want {
			t.Errorf("ValidEmail(%d bytes) = %v, want %v", len(addr), got, want)
		}
	}
}

func TestAudienceSourcesBounded(t *testing.T) {
	t.Parallel()
	src := func(app string) notify.Segment { return notify.Segment{Kind: notify.AudienceAppDevices, App: app} }
	var many []notify.Segment
	for i := range notify.MaxAudienceSources + 1 {
		many = append(many, src(strings.Repeat("a", i+1)))
	}
	if got := fieldOf(notify.Audience{Sources: many}.Validate()); got != "audience.sources[20]" {
		t.Errorf("21 sources: field %q", got)
	}
	if err := (notify.Audience{Sources: many[:notify.MaxAudienceSources]}).Validate(); err != nil {
		t.Errorf("20 sources: %v", err)
	}
	dup := notify.Audience{Sources: []notify.Segment{src("x"), src("y"), src("x")}}
	if got := fieldOf(dup.Validate()); got != "audience.sources[2]" {
		t.Errorf("duplicate source: field %q", got)
	}
}

func TestQuietHoursStartEqualsEnd(t *testing.T) {
	t.Parallel()
	q := notify.QuietHours{Enabled: true, Start: "09:00", End: "09:00"}
	if got := fieldOf(q.Validate()); got != "quiet_hours.end" {
		t.Errorf("start == end: field %q", got)
	}
	q.Enabled = false
	if err := q.Validate(); err != nil {
		t.Errorf("a disabled policy is not checked: %v", err)
	}
}

func TestIsHTTPURL(t *testing.T) {
	for s, want := range map[string]bool{
		"https://cdn.example.com/a.png": true,
		"http://127.0.0.1:9411/v1":      true,
		"ftp://example.com/a":           false,
		"/relative/a.png":               false,
		"https://":                      false,
		"not a url":                     false,
		"":                              false,
		"https://exa mple.com":          false,
	} {
		if got := notify.IsHTTPURL(s); got != want {
			t.Errorf("IsHTTPURL(%q) = %v, want %v", s, got, want)
		}
	}
}
