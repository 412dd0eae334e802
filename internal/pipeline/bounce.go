package pipeline

import (
	"context"
	"encoding/json"
	"net/mail"
	"strings"

	"herald/internal/notify"
)

// snsEnvelope is the SQS body SNS delivers when raw message delivery is off.
type snsEnvelope struct {
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	TopicArn  string `json:"TopicArn"`
	Message   string `json:"Message"`
	Timestamp string `json:"Timestamp"`
}

// sesEvent covers both SES feedback forms: identity notifications (notificationType) and
// configuration-set event publishing (eventType).
type sesEvent struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		MessageID   string   `json:"messageId"`
		Destination []string `json:"destination"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		BouncedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
	} `json:"complaint"`
}

// Bounce returns the handler of the bounce queue: SES bounce, complaint and delivery feedback
// (SES → SNS → SQS). Permanent bounces and complaints suppress every recipient they name;
// transient bounces and deliveries change nothing. Suppression is idempotent and never lifted by
// a later event, so duplicates and out-of-order arrival are harmless.
func (p *Pipeline) Bounce() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.bounceOne)
	}
}

func (p *Pipeline) bounceOne(ctx context.Context, m notify.Message) error {
	var env snsEnvelope
	if err := decode(m.Body, &env); err != nil {
		return err
	}
	raw := env.Message
	if env.Type == "" && env.Message == "" { // raw message delivery: the body is the SES event itself
		raw = string(m.Body)
	}
	if env.Type == "SubscriptionConfirmation" || env.Type == "UnsubscribeConfirmation" {
		p.log.InfoContext(ctx, "sns control message ignored", "type", env.Type, "topic", env.TopicArn)
		return nil
	}
	var ev sesEvent
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		return notify.Wrap(notify.EINVALID, err, "bounce: SNS message is not an SES event")
	}
	kind := ev.EventType
	if kind == "" {
		kind = ev.NotificationType
	}
	var addrs []string
	reason := ""
	switch kind {
	case "Bounce":
		if ev.Bounce == nil {
			return notify.Errorf(notify.EINVALID, "bounce: Bounce event without bounce object")
		}
		if !strings.EqualFold(ev.Bounce.BounceType, "Permanent") {
			p.log.InfoContext(ctx, "transient bounce ignored", "ses_message_id", ev.Mail.MessageID,
				"bounce_type", ev.Bounce.BounceType, "recipients", len(ev.Bounce.BouncedRecipients))
			return nil
		}
		for _, r := range ev.Bounce.BouncedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		reason = "bounce"
	case "Complaint":
		if ev.Complaint == nil {
			return notify.Errorf(notify.EINVALID, "bounce: Complaint event without complaint object")
		}
		for _, r := range ev.Complaint.ComplainedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		reason = "complaint"
	case "Delivery", "Send", "Open", "Click", "DeliveryDelay", "Reject", "RenderingFailure", "Subscription":
		return nil
	default:
		return notify.Errorf(notify.EINVALID, "bounce: unknown SES event type %q", kind)
	}
	suppressed := 0
	for _, raw := range addrs {
		a, ok := FeedbackAddress(raw)
		if !ok {
			// A retry cannot make it parse, and the others in the event must still be suppressed.
			p.log.WarnContext(ctx, "email feedback recipient is not an address; skipped",
				"kind", kind, "recipient", notify.MaskEmail(strings.TrimSpace(raw)), "ses_message_id", ev.Mail.MessageID)
			continue
		}
		if err := p.suppress(ctx, notify.ChannelEmail, a, reason); err != nil {
			return err
		}
		suppressed++
	}
	p.log.InfoContext(ctx, "email feedback", "kind", kind, "reason", reason, "suppressed", suppressed, "ses_message_id", ev.Mail.MessageID)
	return nil
}

// FeedbackAddress is the address a bounced or complained recipient names, as the suppression
// list keys it. SES reports the recipient as it appeared in the message's header, so it may carry
// a display name and angle brackets ("Carol Q" <Carol@Example.com>); it is parsed as an RFC 5322
// address and normalized like every stored email address (notify.NormalizeAddress), so the
// suppression matches the contact "carol@example.com". ok is false for anything that is not one
// address.
func FeedbackAddress(raw string) (addr string, ok bool) {
	a, err := mail.ParseAddress(strings.TrimSpace(raw))
	if err != nil || a.Address == "" {
		return "", false
	}
	return notify.NormalizeAddress(notify.ChannelEmail, a.Address), true
}
