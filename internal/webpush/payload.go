package webpush

import (
	"crypto/sha256"
	"encoding/base64"
	"math"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"herald/internal/notify"
)

// DefaultTTL is the TTL header of a message whose notification has no TTL: 28 days, the
// longest most push services keep a message for an offline browser.
const DefaultTTL = 28 * 24 * time.Hour

// maxTopic is RFC 8030's limit on the Topic header: 32 characters of the URL-safe base64
// alphabet.
const maxTopic = 32

// Payload is the JSON a service worker receives in its push event (event.data.json()). The
// browser shows nothing by itself: the page's service worker calls showNotification with it.
type Payload struct {
	NotificationID string            `json:"notification_id"`
	Title          string            `json:"title,omitempty"`
	Body           string            `json:"body,omitempty"`
	Data           map[string]string `json:"data,omitempty"`
	Link           string            `json:"link,omitempty"`
	Image          string            `json:"image,omitempty"`
	// CollapseID is the notification's collapse id: a service worker passes it as
	// showNotification's tag, so a resent message replaces the first on screen.
	CollapseID string `json:"collapse_id,omitempty"`
}

// toPayload is the payload of m. It is pure.
func toPayload(m notify.OutboundMessage) Payload {
	c := m.Content
	p := Payload{NotificationID: m.NotificationID, Title: c.Title, Body: c.Body, Link: c.Link,
		Image: c.ImageURL, CollapseID: m.CollapseID}
	if len(c.Data) > 0 {
		p.Data = c.Data
	}
	return p
}

// headers are the RFC 8030 headers of m, as the library's options: TTL, Urgency and Topic.
type headers struct {
	TTL     int
	Urgency webpushgo.Urgency
	Topic   string
}

// toHeaders derives m's RFC 8030 headers. It is pure.
//
//   - TTL: what is left of the notification's TTL in whole seconds, rounded up (the pipeline
//     passes the remainder), DefaultTTL when it has none
//   - Urgency: high for transactional messages (a browser on low battery still wakes for them),
//     normal for marketing
//   - Topic: Topic(CollapseID), so a message still queued at the push service is replaced by a
//     resend instead of arriving twice; none without a collapse id
func toHeaders(m notify.OutboundMessage) headers {
	h := headers{TTL: int(DefaultTTL / time.Second), Urgency: webpushgo.UrgencyHigh, Topic: Topic(m.CollapseID)}
	if m.TTL > 0 {
		h.TTL = int(math.Ceil(m.TTL.Seconds()))
	}
	if m.Category == notify.CategoryMarketing {
		h.Urgency = webpushgo.UrgencyNormal
	}
	return h
}

// Topic is the Topic header for a collapse id: RFC 8030 allows at most 32 characters of the
// URL-safe base64 alphabet, and collapse ids are longer and freer (notification ids, campaign
// ids, callers' own), so the topic is the first 32 characters of the unpadded base64url SHA-256
// of the collapse id — the same id gives the same topic, different ids practically never collide.
// "" for "".
func Topic(collapseID string) string {
	if collapseID == "" {
		return ""
	}
	h := sha256.Sum256([]byte(collapseID))
	return base64.RawURLEncoding.EncodeToString(h[:])[:maxTopic]
}
