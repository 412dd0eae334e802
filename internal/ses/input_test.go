package ses

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"herald/internal/notify"
)

func TestToSendEmailInput(t *testing.T) {
	t.Parallel()
	cfg := Config{From: "Herald <no-reply@example.com>", ConfigurationSet: "herald-events"}
	base := notify.OutboundMessage{
		DeliveryID: "d_0123abcd", NotificationID: "n_01jq8", Channel: notify.ChannelEmail, Address: "jun@example.com",
		Content: notify.Content{Title: "주문이 발송되었습니다", Body: "곧 도착합니다."},
	}
	tests := []struct {
		name     string
		edit     func(m *notify.OutboundMessage, c *Config)
		text     string // "" = no text part
		html     string // "" = no HTML part
		tags     map[string]string
		noConfig bool
	}{
		{name: "text only", text: "곧 도착합니다.", tags: map[string]string{"notification_id": "n_01jq8", "delivery_id": "d_0123abcd"}},
		{
			name: "link under the body",
			edit: func(m *notify.OutboundMessage, _ *Config) {
				m.Content.Link = "https://example.com/o/1"
				m.Content.Body += "\n"
			},
			text: "곧 도착합니다.\n\nhttps://example.com/o/1",
		},
		{
			name: "link without body",
			edit: func(m *notify.OutboundMessage, _ *Config) {
				m.Content.Body = ""
				m.Content.Link = "https://example.com/o/1"
			},
			text: "https://example.com/o/1",
		},
		{
			name: "html and text",
			edit: func(m *notify.OutboundMessage, _ *Config) { m.Content.HTML = "<p>곧 도착합니다.</p>" },
			text: "곧 도착합니다.", html: "<p>곧 도착합니다.</p>",
		},
		{
			name: "html only",
			edit: func(m *notify.OutboundMessage, _ *Config) { m.Content.Body = ""; m.Content.HTML = "<p>x</p>" },
			html: "<p>x</p>",
		},
		{
			name:     "no configuration set",
			edit:     func(_ *notify.OutboundMessage, c *Config) { c.ConfigurationSet = "" },
			text:     "곧 도착합니다.",
			noConfig: true,
		},
		{
			name: "tag values made acceptable",
			edit: func(m *notify.OutboundMessage, _ *Config) {
				m.NotificationID = "ext:order/42"
				m.DeliveryID = strings.Repeat("d", 300)
			},
			text: "곧 도착합니다.",
			tags: map[string]string{"notification_id": "ext_order_42", "delivery_id": strings.Repeat("d", 256)},
		},
		{
			name: "empty ids are left out",
			edit: func(m *notify.OutboundMessage, _ *Config) { m.NotificationID = "" },
			text: "곧 도착합니다.",
			tags: map[string]string{"delivery_id": "d_0123abcd"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, c := base, cfg
			if tt.edit != nil {
				tt.edit(&m, &c)
			}
			in := toSendEmailInput(m, c)

			if got := aws.ToString(in.FromEmailAddress); got != c.From {
				t.Errorf("From %q", got)
			}
			if in.Destination == nil || len(in.Destination.ToAddresses) != 1 || in.Destination.ToAddresses[0] != m.Address ||
				len(in.Destination.CcAddresses)+len(in.Destination.BccAddresses) != 0 {
				t.Errorf("Destination %+v", in.Destination)
			}
			if in.Content == nil || in.Content.Simple == nil || in.Content.Raw != nil || in.Content.Template != nil {
				t.Fatalf("Content %+v, want Simple only", in.Content)
			}
			simple := in.Content.Simple
			if len(simple.Headers) != 0 || len(simple.Attachments) != 0 {
				t.Errorf("headers %v attachments %v, want none", simple.Headers, simple.Attachments)
			}
			checkContent(t, "subject", simple.Subject, m.Content.Title)
			checkContent(t, "text", simple.Body.Text, tt.text)
			checkContent(t, "html", simple.Body.Html, tt.html)

			if tt.noConfig != (in.ConfigurationSetName == nil) {
				t.Errorf("ConfigurationSetName %v", in.ConfigurationSetName)
			} else if !tt.noConfig && *in.ConfigurationSetName != "herald-events" {
				t.Errorf("ConfigurationSetName %q", *in.ConfigurationSetName)
			}
			if tt.tags != nil {
				got := map[string]string{}
				for _, tag := range in.EmailTags {
					got[aws.ToString(tag.Name)] = aws.ToString(tag.Value)
				}
				if len(got) != len(tt.tags) {
					t.Errorf("tags %v, want %v", got, tt.tags)
				}
				for k, v := range tt.tags {
					if got[k] != v {
						t.Errorf("tag %s = %q, want %q", k, got[k], v)
					}
				}
			}
		})
	}
}

func checkContent(t *testing.T, what string, c *types.Content, want string) {
	t.Helper()
	if want == "" {
		if c != nil {
			t.Errorf("%s = %q, want none", what, aws.ToString(c.Data))
		}
		return
	}
	if c == nil || aws.ToString(c.Data) != want || aws.ToString(c.Charset) != "UTF-8" {
		t.Errorf("%s = %+v, want %q in UTF-8", what, c, want)
	}
}

// A marketing email to a known user carries RFC 8058's two headers, exactly as the RFC's example
// writes them; any other email carries none.
func TestOneClickUnsubscribeHeaders(t *testing.T) {
	t.Parallel()
	m := notify.OutboundMessage{DeliveryID: "d_1", NotificationID: "n_1", Channel: notify.ChannelEmail, Address: "jun@example.com",
		Content: notify.Content{Title: "Sale", Body: "50% off"}}
	if h := toSendEmailInput(m, Config{From: "no-reply@example.com"}).Content.Simple.Headers; len(h) != 0 {
		t.Fatalf("an email without an unsubscribe link has headers %v", h)
	}
	m.Unsubscribe = "https://herald.example.com/u/v1.anVu.email.marketing.abc"
	got := map[string]string{}
	for _, h := range toSendEmailInput(m, Config{From: "no-reply@example.com"}).Content.Simple.Headers {
		got[aws.ToString(h.Name)] = aws.ToString(h.Value)
	}
	want := map[string]string{
		"List-Unsubscribe":      "<https://herald.example.com/u/v1.anVu.email.marketing.abc>",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	}
	if len(got) != len(want) || got["List-Unsubscribe"] != want["List-Unsubscribe"] || got["List-Unsubscribe-Post"] != want["List-Unsubscribe-Post"] {
		t.Fatalf("headers %v, want %v", got, want)
	}
}
