package apns

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sideshow/apns2"
	"github.com/sideshow/apns2/payload"

	"herald/internal/notify"
)

// maxCollapseID is APNs's limit on apns-collapse-id.
const maxCollapseID = 64

// apnsIDSpace namespaces apns-ids derived from delivery ids.
var apnsIDSpace = uuid.MustParse("6f1d7a52-3c1e-4f2b-9a57-2f7c0c1f8e11")

// toNotification builds the APNs request for m. It is pure: now only dates the expiration.
//
//   - aps.alert title and body; sound "default" for high priority; mutable-content with an
//     image, whose URL goes in the top-level "image" key for the notification service extension
//   - custom data keys at the top level ("aps" is never overwritten), plus "link" = Content.Link
//     (the link and image win over data keys of the same name)
//   - apns-collapse-id = CollapseID, cut to 64 bytes on a character boundary
//   - apns-priority 10 for high (and unset), 5 for normal; apns-expiration = now + TTL when TTL > 0
//   - apns-push-type alert, apns-topic = topic, apns-id derived from the delivery id, so every
//     attempt of one delivery carries the same id in Apple's and the sandbox's records
func toNotification(m notify.OutboundMessage, topic string, now time.Time) *apns2.Notification {
	n := toHeaders(m, topic, now)
	n.Payload = toPayload(m)
	return n
}

// toHeaders is toNotification without the payload: what varies per device.
func toHeaders(m notify.OutboundMessage, topic string, now time.Time) *apns2.Notification {
	n := &apns2.Notification{
		DeviceToken: m.Address,
		Topic:       topic,
		CollapseID:  notify.Truncate(m.CollapseID, maxCollapseID),
		Priority:    apns2.PriorityHigh,
		PushType:    apns2.PushTypeAlert,
	}
	if m.Priority == notify.PriorityNormal {
		n.Priority = apns2.PriorityLow
	}
	if m.TTL > 0 {
		n.Expiration = now.Add(m.TTL)
	}
	if m.DeliveryID != "" {
		n.ApnsID = uuid.NewSHA1(apnsIDSpace, []byte(m.DeliveryID)).String()
	}
	return n
}

// toPayload is the JSON body of toNotification. It depends only on the fields payloadKey reads.
func toPayload(m notify.OutboundMessage) *payload.Payload {
	c := m.Content
	p := payload.NewPayload()
	if c.Title != "" {
		p.AlertTitle(c.Title)
	}
	if c.Body != "" {
		p.AlertBody(c.Body)
	}
	if m.Priority != notify.PriorityNormal {
		p.Sound("default")
	}
	for k, v := range c.Data {
		if k != "aps" {
			p.Custom(k, v)
		}
	}
	if c.Link != "" {
		p.Custom("link", c.Link)
	}
	if c.ImageURL != "" {
		p.MutableContent()
		p.Custom("image", c.ImageURL)
	}
	return p
}

// payloadKey identifies everything toPayload reads: messages with equal keys have the same
// body, which Send then encodes once. Fields are length-prefixed so no two payloads collide.
func payloadKey(m *notify.OutboundMessage) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	c := &m.Content
	field(c.Title)
	field(c.Body)
	field(c.ImageURL)
	field(c.Link)
	field(string(m.Priority))
	for _, k := range slices.Sorted(maps.Keys(c.Data)) {
		field(k)
		field(c.Data[k])
	}
	return b.String()
}
