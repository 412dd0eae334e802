package notify_test

import (
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func alimtalkRequest() notify.SendRequest {
	return notify.SendRequest{
		Channels: []notify.Channel{notify.ChannelPush, notify.ChannelAlimTalk},
		Content:  notify.Content{Body: "주문이 발송되었습니다."},
		ChannelContent: map[notify.Channel]notify.Content{
			notify.ChannelAlimTalk: {Data: map[string]string{notify.AlimTalkTemplateKey: "TPL_1"}},
		},
		Recipients: []notify.Recipient{{UserID: "u1"}, {Phone: "+821012345678"}},
	}
}

// The alimtalk channel: informational only, a template code required, a known fallback, and a
// direct phone recipient allowed without the sms channel.
func TestSendRequestAlimTalk(t *testing.T) {
	t.Parallel()
	now := time.Now()
	r := alimtalkRequest()
	if err := r.Validate(now); err != nil {
		t.Fatalf("valid alimtalk request: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*notify.SendRequest)
		field string
	}{
		{"marketing", func(r *notify.SendRequest) { r.Category = notify.CategoryMarketing }, "channels[1]"},
		{"no template code", func(r *notify.SendRequest) { r.ChannelContent = nil }, "channel_content.alimtalk.data.alimtalk_template"},
		{"unknown fallback", func(r *notify.SendRequest) {
			r.ChannelContent[notify.ChannelAlimTalk].Data[notify.AlimTalkFallbackKey] = "email"
		}, "channel_content.alimtalk.data.alimtalk_fallback"},
		{"phone without sms or alimtalk", func(r *notify.SendRequest) {
			r.Channels = []notify.Channel{notify.ChannelPush}
		}, "recipients[1].phone"},
	}
	for _, c := range cases {
		r := alimtalkRequest()
		c.edit(&r)
		if got := fieldOf(r.Validate(now)); got != c.field {
			t.Errorf("%s: field %q, want %q", c.name, got, c.field)
		}
	}
}

func TestCampaignRefusesMarketingAlimTalk(t *testing.T) {
	t.Parallel()
	c := notify.Campaign{Notification: notify.Notification{Category: notify.CategoryMarketing,
		Channels: []notify.Channel{notify.ChannelPush, notify.ChannelAlimTalk}}}
	if err := c.Validate(); !containsField(err, "channels[1]") {
		t.Fatalf("Validate() = %v, want a problem with channels[1]", err)
	}
	if !containsField(c.Validate(), "channel_content.alimtalk.data.alimtalk_template") {
		t.Fatalf("a campaign on alimtalk without a template code: %v", c.Validate())
	}
	c.Notification.Category = notify.CategoryTransactional
	c.Notification.ChannelContent = map[notify.Channel]notify.Content{notify.ChannelAlimTalk: {Data: map[string]string{notify.AlimTalkTemplateKey: "T"}}}
	if err := c.Validate(); containsField(err, "channels[1]") || containsField(err, "channel_content.alimtalk.data.alimtalk_template") {
		t.Fatalf("a transactional campaign on alimtalk was refused: %v", err)
	}
}

// A stored template's alimtalk body is Kakao's #{var} text: filled from the data (numbers as
// sent), with each variable also a #{name} data key, and checked against the declared variables
// and for its template code when stored.
func TestTemplateAlimTalk(t *testing.T) {
	t.Parallel()
	spec := notify.TemplateSpec{
		Channels: map[notify.Channel]notify.Content{notify.ChannelAlimTalk: {
			Body: "#{name}님, 주문 #{order_id} 발송 (#{name})",
			Data: map[string]string{notify.AlimTalkTemplateKey: "TPL_1"},
		}},
		Variables: []notify.TemplateVariable{{Name: "name"}, {Name: "order_id"}},
	}
	if err := spec.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	out, err := spec.Render(map[string]any{"name": "민지", "order_id": float64(12345678901)})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	c := out.ChannelContent[notify.ChannelAlimTalk]
	if c.Body != "민지님, 주문 12345678901 발송 (민지)" || c.Data["#{name}"] != "민지" || c.Data["#{order_id}"] != "12345678901" ||
		c.Data[notify.AlimTalkTemplateKey] != "TPL_1" {
		t.Fatalf("rendered %+v", c)
	}
	if _, err := spec.Render(map[string]any{"name": "민지"}); fieldOf(err) != "template.data.order_id" {
		t.Fatalf("missing variable: %v", err)
	}
	p := spec.Preview(map[string]any{"order_id": 7})
	if got := p.Missing["channels.alimtalk.body"]; len(got) != 1 || got[0] != "name" {
		t.Fatalf("preview missing %v", p.Missing)
	}

	undeclared := spec
	undeclared.Variables = undeclared.Variables[:1]
	if err := undeclared.Validate(); fieldOf(err) != "channels.alimtalk.body" {
		t.Fatalf("undeclared #{order_id}: %v", err)
	}
	noCode := notify.TemplateSpec{Channels: map[notify.Channel]notify.Content{notify.ChannelAlimTalk: {Body: "hi"}}}
	if err := noCode.Validate(); fieldOf(err) != "channels.alimtalk.data.alimtalk_template" {
		t.Fatalf("no template code: %v", err)
	}
}

func TestKoreanPhoneAndTextKind(t *testing.T) {
	t.Parallel()
	if n, err := notify.NormalizeKoreanMobile("+82 10-1234-5678"); err != nil || n != "01012345678" || notify.KoreanE164(n) != "+821012345678" {
		t.Fatalf("normalize = %q %v", n, err)
	}
	if _, err := notify.NormalizeKoreanMobile("+14155550100"); fieldOf(err) != "address" {
		t.Fatalf("a US number: %v", err)
	}
	for text, want := range map[string]string{
		"hello":                   notify.KindSMS,
		strings.Repeat("가", 45):   notify.KindSMS, // 90 bytes: one SMS
		strings.Repeat("가", 46):   notify.KindLMS,
		strings.Repeat("a", 2001): "",
	} {
		if got := notify.TextKind(text); got != want {
			t.Errorf("TextKind(%d bytes) = %q, want %q", notify.EUCKRLen(text), got, want)
		}
	}
}
