package alimtalk

import (
	"encoding/json"
	"strings"
	"testing"

	"herald/internal/notify"
)

func TestBuildRequest(t *testing.T) {
	t.Parallel()
	base := Message{Phone: "+82 10-1234-5678", TemplateCode: "ORDER_SHIPPED", SenderKey: "KA01PF2001010000abcdefghij",
		Variables: map[string]string{"name": "김하나", "#{order}": "1001"}}
	tests := []struct {
		name  string
		edit  func(*Message)
		from  string
		want  string // the request as JSON
		field string // when refused: the field named
	}{
		{"variables in #{} form", nil, "",
			`{"messages":[{"to":"01012345678","type":"ATA","kakaoOptions":{"pfId":"KA01PF2001010000abcdefghij","templateId":"ORDER_SHIPPED","variables":{"#{name}":"김하나","#{order}":"1001"},"disableSms":true},"customFields":{"heraldDeliveryId":"d_1"}}],"showMessageList":true}`, ""},
		{"no variables, sender number", func(m *Message) { m.Variables = nil }, "02-1234-5678",
			`{"messages":[{"to":"01012345678","from":"02-1234-5678","type":"ATA","kakaoOptions":{"pfId":"KA01PF2001010000abcdefghij","templateId":"ORDER_SHIPPED","disableSms":true},"customFields":{"heraldDeliveryId":"d_1"}}],"showMessageList":true}`, ""},
		{"buttons in order", func(m *Message) {
			m.Variables = nil
			m.Buttons = []Button{
				{Name: "배송 조회", Type: "DS"},
				{Name: "주문 보기", Type: "WL", LinkMobile: "https://example.com/o/1001", LinkPC: "https://example.com/o/1001"},
				{Name: "앱 열기", Type: "AL", LinkAndroid: "herald://o/1001", LinkIOS: "herald://o/1001"},
			}
		}, "",
			`{"messages":[{"to":"01012345678","type":"ATA","kakaoOptions":{"pfId":"KA01PF2001010000abcdefghij","templateId":"ORDER_SHIPPED","disableSms":true,"buttons":[` +
				`{"buttonName":"배송 조회","buttonType":"DS"},` +
				`{"buttonName":"주문 보기","buttonType":"WL","linkMo":"https://example.com/o/1001","linkPc":"https://example.com/o/1001"},` +
				`{"buttonName":"앱 열기","buttonType":"AL","linkAnd":"herald://o/1001","linkIos":"herald://o/1001"}]},"customFields":{"heraldDeliveryId":"d_1"}}],"showMessageList":true}`, ""},
		{"foreign number", func(m *Message) { m.Phone = "+14155550100" }, "", "", "address"},
		{"landline", func(m *Message) { m.Phone = "02-123-4567" }, "", "", "address"},
		{"no template", func(m *Message) { m.TemplateCode = " " }, "", "", "template_code"},
		{"no sender key", func(m *Message) { m.SenderKey = "" }, "", "", "sender_key"},
		{"dotted variable", func(m *Message) { m.Variables = map[string]string{"order.id": "1"} }, "", "", "variables.order.id"},
		{"variable with space", func(m *Message) { m.Variables = map[string]string{"#{order id}": "1"} }, "", "", "variables.#{order id}"},
		{"six buttons", func(m *Message) { m.Buttons = make([]Button, 6) }, "", "", "buttons"},
		{"button name too long", func(m *Message) {
			m.Buttons = []Button{{Name: "열다섯글자가넘는버튼이름입니다요", Type: "BK"}}
		}, "", "", "buttons[0].buttonName"},
		{"unknown button type", func(m *Message) { m.Buttons = []Button{{Name: "x", Type: "XX"}} }, "", "", "buttons[0].buttonType"},
		{"web link without link", func(m *Message) { m.Buttons = []Button{{Name: "x", Type: "WL"}} }, "", "", "buttons[0].linkMo"},
		{"app link half", func(m *Message) { m.Buttons = []Button{{Name: "x", Type: "AL", LinkAndroid: "a://"}} }, "", "", "buttons[0].linkAnd"},
		{"keyword button with link", func(m *Message) { m.Buttons = []Button{{Name: "x", Type: "BK", LinkMobile: "https://x"}} }, "", "", "buttons[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base
			if tt.edit != nil {
				tt.edit(&m)
			}
			req, err := buildRequest(m, tt.from, "d_1")
			if tt.field != "" {
				var e *notify.Error
				if !notify.IsCode(err, notify.EINVALID) || !asError(err, &e) || e.Field != tt.field {
					t.Fatalf("got %v (%+v), want EINVALID on %s", err, e, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(req)
			if string(b) != tt.want {
				t.Errorf("request\n%s\nwant\n%s", b, tt.want)
			}
		})
	}
}

func asError(err error, e **notify.Error) bool {
	ne, ok := err.(*notify.Error)
	*e = ne
	return ok
}

func TestMessageFrom(t *testing.T) {
	t.Parallel()
	m := notify.OutboundMessage{DeliveryID: "d_1", Address: "+821012345678", App: "default", Content: notify.Content{
		Title: "ignored", Body: "ignored",
		Data: map[string]string{
			DataTemplate: "ORDER_SHIPPED", "#{name}": "김하나", "#{order}": "1001",
			"deep_link": "herald://o/1001", // push data: not a template variable
			DataButtons: `[{"buttonName":"주문 보기","buttonType":"WL","linkMo":"https://example.com/o/1001"}]`,
		}}}
	got, err := MessageFrom(m, "PF1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phone != m.Address || got.SenderKey != "PF1" || got.TemplateCode != "ORDER_SHIPPED" ||
		len(got.Variables) != 2 || got.Variables["#{name}"] != "김하나" || got.Variables["#{order}"] != "1001" {
		t.Errorf("message %+v", got)
	}
	if len(got.Buttons) != 1 || got.Buttons[0] != (Button{Name: "주문 보기", Type: "WL", LinkMobile: "https://example.com/o/1001"}) {
		t.Errorf("buttons %+v", got.Buttons)
	}

	for name, data := range map[string]map[string]string{
		"no template":        {"#{name}": "x"},
		"buttons not JSON":   {DataTemplate: "T", DataButtons: "[{"},
		"unknown button key": {DataTemplate: "T", DataButtons: `[{"name":"x"}]`},
	} {
		_, err := MessageFrom(notify.OutboundMessage{Address: "01012345678", Content: notify.Content{Data: data}}, "PF1")
		if !notify.IsCode(err, notify.EINVALID) || !strings.Contains(err.Error(), "content.data.") {
			t.Errorf("%s: %v, want EINVALID naming the data key", name, err)
		}
	}
}
