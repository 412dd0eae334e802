package alimtalk

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"herald/internal/notify"
)

// Message is one AlimTalk to send: a template registered with Kakao, filled in with Variables,
// from a KakaoTalk channel (its sender profile, Solapi's pfId) to a phone number.
type Message struct {
	Phone        string            // any writing NormalizePhone takes
	TemplateCode string            // Solapi's templateId of an approved template
	Variables    map[string]string // "name" or "#{name}" → value
	SenderKey    string            // the channel's pfId
	Buttons      []Button          // only for templates registered with buttons, in their order
}

// Button is a template button. Kakao compares buttons with the registered template, so they are
// sent only when the template has them, in the same order.
type Button struct {
	Name        string `json:"buttonName"`
	Type        string `json:"buttonType"` // WL web link, AL app link, DS delivery tracking, BK bot keyword, MD message delivery, BC consult, BT bot, AC add channel
	LinkMobile  string `json:"linkMo,omitempty"`
	LinkPC      string `json:"linkPc,omitempty"`
	LinkAndroid string `json:"linkAnd,omitempty"`
	LinkIOS     string `json:"linkIos,omitempty"`
}

// Limits Solapi states for AlimTalk (status codes 1049, 1050).
const (
	MaxButtons       = 5
	MaxButtonNameLen = 14 // characters
)

// Keys of notify.Content.Data that MessageFrom reads.
const (
	DataTemplate = "alimtalk_template" // the template code (Solapi templateId)
	DataButtons  = "alimtalk_buttons"  // optional: a JSON array of Button
)

// The wire format of POST /messages/v4/send-many/detail.
type sendRequest struct {
	Messages        []wireMessage `json:"messages"`
	ShowMessageList bool          `json:"showMessageList"`
}

type wireMessage struct {
	To           string            `json:"to"`
	From         string            `json:"from,omitempty"`
	Type         string            `json:"type"`
	KakaoOptions kakaoOptions      `json:"kakaoOptions"`
	CustomFields map[string]string `json:"customFields,omitempty"`
}

type kakaoOptions struct {
	PfID       string            `json:"pfId"`
	TemplateID string            `json:"templateId"`
	Variables  map[string]string `json:"variables,omitempty"`
	DisableSms bool              `json:"disableSms"`
	Buttons    []Button          `json:"buttons,omitempty"`
}

// Solapi's customFields: keys up to 30 characters, values up to 100 (status code 1032).
const customDeliveryID = "heraldDeliveryId"

var (
	varNameRe  = regexp.MustCompile(`^[^\s.{}#]+$`) // Solapi's SDKs refuse a dot in a variable name
	buttonType = map[string]bool{"WL": true, "AL": true, "DS": true, "BK": true, "MD": true, "BC": true, "BT": true, "AC": true}
)

// buildRequest turns m into Solapi's request for one ATA message. from is the registered
// sender number, sent only when set (it matters to Solapi's own SMS substitution, which Herald
// turns off: disableSms is always true, because the fallback is Herald's own SMS delivery, with
// its preferences, quiet hours and records). deliveryID travels in customFields, so Solapi's
// records and webhooks name Herald's delivery. Every problem is an EINVALID naming its field.
func buildRequest(m Message, from, deliveryID string) (sendRequest, error) {
	to, err := NormalizePhone(m.Phone)
	if err != nil {
		return sendRequest{}, err
	}
	switch {
	case strings.TrimSpace(m.SenderKey) == "":
		return sendRequest{}, notify.FieldError("sender_key", "required: the KakaoTalk channel's pfId")
	case strings.TrimSpace(m.TemplateCode) == "":
		return sendRequest{}, notify.FieldError("template_code", "required: an approved AlimTalk template")
	}
	vars := make(map[string]string, len(m.Variables))
	for k, v := range m.Variables {
		name := strings.TrimSuffix(strings.TrimPrefix(k, "#{"), "}")
		if !varNameRe.MatchString(name) {
			return sendRequest{}, notify.FieldError("variables."+k, "a variable name is #{name}, without spaces, dots or braces")
		}
		vars["#{"+name+"}"] = v
	}
	if len(m.Buttons) > MaxButtons {
		return sendRequest{}, notify.FieldError("buttons", "%d buttons; AlimTalk takes at most %d", len(m.Buttons), MaxButtons)
	}
	for i, b := range m.Buttons {
		if err := b.validate(fmt.Sprintf("buttons[%d]", i)); err != nil {
			return sendRequest{}, err
		}
	}
	wm := wireMessage{
		To:   to,
		From: from,
		Type: "ATA",
		KakaoOptions: kakaoOptions{
			PfID:       m.SenderKey,
			TemplateID: m.TemplateCode,
			Variables:  vars,
			DisableSms: true,
			Buttons:    m.Buttons,
		},
	}
	if deliveryID != "" && len(deliveryID) <= 100 {
		wm.CustomFields = map[string]string{customDeliveryID: deliveryID}
	}
	return sendRequest{Messages: []wireMessage{wm}, ShowMessageList: true}, nil
}

func (b Button) validate(field string) error {
	switch {
	case b.Name == "":
		return notify.FieldError(field+".buttonName", "required")
	case utf8.RuneCountInString(b.Name) > MaxButtonNameLen:
		return notify.FieldError(field+".buttonName", "at most %d characters", MaxButtonNameLen)
	case !buttonType[b.Type]:
		return notify.FieldError(field+".buttonType", "%q is not a button type (WL, AL, DS, BK, MD, BC, BT, AC)", b.Type)
	case b.Type == "WL" && b.LinkMobile == "":
		return notify.FieldError(field+".linkMo", "required for a web link button")
	case b.Type == "AL" && (b.LinkAndroid == "" || b.LinkIOS == ""):
		return notify.FieldError(field+".linkAnd", "an app link button needs linkAnd and linkIos")
	case b.Type != "WL" && b.Type != "AL" && (b.LinkMobile != "" || b.LinkPC != "" || b.LinkAndroid != "" || b.LinkIOS != ""):
		return notify.FieldError(field, "a %s button takes no links", b.Type)
	}
	return nil
}

// MessageFrom reads an AlimTalk out of an outbound message: the phone number is m.Address, the
// template code m.Content.Data[DataTemplate], the variables every Data key written #{name}, the
// buttons the JSON array in Data[DataButtons]; senderKey is the pfId of m.App's channel.
// Only #{…} keys are variables, so the push data a notification carries on its other channels
// never reaches Kakao (which compares the filled-in text with the template).
func MessageFrom(m notify.OutboundMessage, senderKey string) (Message, error) {
	out := Message{Phone: m.Address, SenderKey: senderKey, TemplateCode: m.Content.Data[DataTemplate]}
	for k, v := range m.Content.Data {
		if strings.HasPrefix(k, "#{") && strings.HasSuffix(k, "}") {
			if out.Variables == nil {
				out.Variables = map[string]string{}
			}
			out.Variables[k] = v
		}
	}
	if raw := m.Content.Data[DataButtons]; raw != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out.Buttons); err != nil {
			return Message{}, notify.FieldError("content.data."+DataButtons, "not a JSON array of buttons: %v", err)
		}
	}
	if out.TemplateCode == "" {
		return Message{}, notify.FieldError("content.data."+DataTemplate, "required: the AlimTalk template code")
	}
	return out, nil
}
