package ses

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"herald/internal/notify"
)

// Email tag names. SES copies a message's tags into every event it publishes (mail.tags), which
// is how a bounce finds its way back to a delivery.
const (
	TagNotificationID = "notification_id"
	TagDeliveryID     = "delivery_id"
)

const maxTagLen = 256

// charset is always given: SES assumes 7-bit ASCII otherwise, and Herald sends Korean.
const charset = "UTF-8"

// toSendEmailInput builds the SendEmail call for m: a Simple message (SES assembles the MIME)
// with Title as the subject, Body (and Link under it) as the text part, HTML as the HTML part
// when given, the one-click unsubscribe headers of a marketing email, the configuration set,
// and tags naming the notification and delivery.
func toSendEmailInput(m notify.OutboundMessage, cfg Config) *sesv2.SendEmailInput {
	body := &types.Body{}
	if text := emailText(m.Content); text != "" {
		body.Text = &types.Content{Data: aws.String(text), Charset: aws.String(charset)}
	}
	if m.Content.HTML != "" {
		body.Html = &types.Content{Data: aws.String(m.Content.HTML), Charset: aws.String(charset)}
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(cfg.From),
		Destination:      &types.Destination{ToAddresses: []string{m.Address}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(m.Content.Title), Charset: aws.String(charset)},
			Body:    body,
		}},
	}
	if cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(cfg.ConfigurationSet)
	}
	if m.Unsubscribe != "" {
		// RFC 8058 one-click: the mailbox provider POSTs "List-Unsubscribe=One-Click" to the
		// https URL itself, so the recipient needs no second step (Gmail and Yahoo require it of
		// bulk marketing mail since 2024). SES signs both headers with DKIM.
		in.Content.Simple.Headers = []types.MessageHeader{
			{Name: aws.String("List-Unsubscribe"), Value: aws.String("<" + m.Unsubscribe + ">")},
			{Name: aws.String("List-Unsubscribe-Post"), Value: aws.String("List-Unsubscribe=One-Click")},
		}
	}
	for _, t := range [][2]string{{TagNotificationID, m.NotificationID}, {TagDeliveryID, m.DeliveryID}} {
		if t[1] != "" {
			in.EmailTags = append(in.EmailTags, types.MessageTag{Name: aws.String(t[0]), Value: aws.String(tagValue(t[1]))})
		}
	}
	return in
}

// emailText is the plain-text part: the body, then the link on its own paragraph.
func emailText(c notify.Content) string {
	switch {
	case c.Link == "":
		return c.Body
	case c.Body == "":
		return c.Link
	default:
		return strings.TrimRight(c.Body, "\n") + "\n\n" + c.Link
	}
}

// tagValue makes v acceptable to SES, which rejects the whole message for a tag with anything
// but ASCII letters, digits, '_' and '-', or longer than 256 characters. Herald's ids already
// qualify; this guards against ids from elsewhere.
func tagValue(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > maxTagLen {
		b = b[:maxTagLen]
	}
	return string(b)
}
