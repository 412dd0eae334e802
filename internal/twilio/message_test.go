package twilio

import (
	"strings"
	"testing"

	"herald/internal/notify"
)

func TestToCreateMessageParams(t *testing.T) {
	t.Parallel()
	m := notify.OutboundMessage{DeliveryID: "d_1", Address: "+821012345678", Content: notify.Content{Title: "T", Body: "B"}}
	tests := []struct {
		name          string
		cfg           Config
		from, service string
	}{
		{"from number", Config{From: "+15005550006"}, "+15005550006", ""},
		{"messaging service", Config{MessagingServiceSID: "MG1"}, "", "MG1"},
		{"service wins over from", Config{From: "+15005550006", MessagingServiceSID: "MG1"}, "", "MG1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := toCreateMessageParams(m, tt.cfg)
			if p.To == nil || *p.To != m.Address {
				t.Errorf("To %v", p.To)
			}
			if p.Body == nil || *p.Body != "T\nB" {
				t.Errorf("Body %v", p.Body)
			}
			if got := deref(p.From); got != tt.from {
				t.Errorf("From %q, want %q", got, tt.from)
			}
			if got := deref(p.MessagingServiceSid); got != tt.service {
				t.Errorf("MessagingServiceSid %q, want %q", got, tt.service)
			}
			if p.PathAccountSid != nil || p.StatusCallback != nil || p.MediaUrl != nil {
				t.Errorf("unexpected fields set: %+v", p)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestSMSBody(t *testing.T) {
	t.Parallel()
	link := "https://example.com/o/1"
	long := strings.Repeat("a", 2000)
	hangul := strings.Repeat("가", 2000)
	emoji := strings.Repeat("😀", 900) // 1800 UTF-16 units
	tests := []struct {
		name string
		in   notify.Content
		want string
	}{
		{"title and body", notify.Content{Title: "Order shipped", Body: "Arrives tomorrow."}, "Order shipped\nArrives tomorrow."},
		{"body only", notify.Content{Body: "Arrives tomorrow."}, "Arrives tomorrow."},
		{"title only", notify.Content{Title: "Order shipped"}, "Order shipped"},
		{"trimmed parts", notify.Content{Title: " T \n", Body: "\n B "}, "T\nB"},
		{"link appended", notify.Content{Title: "T", Body: "B", Link: link}, "T\nB\n" + link},
		{"link only", notify.Content{Link: link}, link},
		{"ASCII cut", notify.Content{Body: long}, strings.Repeat("a", 1597) + "..."},
		{"Hangul cut", notify.Content{Body: hangul}, strings.Repeat("가", 1597) + "..."},
		{"emoji count double", notify.Content{Body: emoji}, strings.Repeat("😀", 798) + "..."},
		{"cut keeps the link", notify.Content{Title: "T", Body: long, Link: link},
			"T\n" + strings.Repeat("a", 1600-len(link)-1-2-3) + "...\n" + link},
		{"exactly the limit", notify.Content{Body: strings.Repeat("b", 1600)}, strings.Repeat("b", 1600)},
		{"link longer than an SMS", notify.Content{Body: "B", Link: "https://example.com/" + long},
			"B\nhttps://example.com/" + strings.Repeat("a", 1600-2-20-3) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := smsBody(tt.in, "")
			if got != tt.want {
				t.Errorf("smsBody = %q (%d chars)\nwant %q (%d chars)", abbrev(got), charLen(got), abbrev(tt.want), charLen(tt.want))
			}
			if charLen(got) > MaxBodyChars {
				t.Errorf("%d chars, over %d", charLen(got), MaxBodyChars)
			}
		})
	}
}

func abbrev(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:30]) + "…" + string(r[len(r)-30:])
	}
	return s
}

// A marketing SMS ends with its free refusal line, after the link, and a cut never takes it.
func TestSMSBodyKeepsTheRefusalLine(t *testing.T) {
	t.Parallel()
	const line = "무료수신거부 080-123-4567"
	link := "https://example.com/o/1"
	if got, want := smsBody(notify.Content{Title: "(광고) 봄 세일", Body: "50% 할인", Link: link}, line),
		"(광고) 봄 세일\n50% 할인\n"+link+"\n"+line; got != want {
		t.Errorf("smsBody = %q, want %q", got, want)
	}
	got := smsBody(notify.Content{Body: strings.Repeat("a", 2000)}, line)
	if !strings.HasSuffix(got, "...\n"+line) || charLen(got) != MaxBodyChars {
		t.Errorf("a long marketing SMS: %q (%d chars)", abbrev(got), charLen(got))
	}
}
