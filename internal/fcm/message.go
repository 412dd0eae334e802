package fcm

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"firebase.google.com/go/v4/messaging"

	"herald/internal/notify"
)

// maxAPNsCollapseID is APNs's limit on apns-collapse-id.
const maxAPNsCollapseID = 64

// toMessage builds the FCM message for m. It is pure: now only dates the APNs expiration.
//
//   - notification: title, body, image
//   - data: m.Content.Data, plus "link" = m.Content.Link (the link wins over a data key)
//   - android: collapse_key and notification tag = CollapseID (a resend replaces the first copy),
//     priority high|normal, ttl = TTL
//   - apns: apns-collapse-id = CollapseID (at most 64 bytes), apns-priority 10|5,
//     apns-expiration = now + TTL; sound "default" for high priority, mutable-content and
//     fcm_options.image with an image
//   - webpush: fcm_options.link when the link is an https URL
//
// An empty Priority is treated as high, TTL 0 leaves the provider's default.
func toMessage(m notify.OutboundMessage, now time.Time) *messaging.Message {
	c := m.Content
	msg := &messaging.Message{Token: m.Address}
	if c.Title != "" || c.Body != "" || c.ImageURL != "" {
		msg.Notification = &messaging.Notification{Title: c.Title, Body: c.Body, ImageURL: c.ImageURL}
	}
	if len(c.Data) > 0 || c.Link != "" {
		msg.Data = make(map[string]string, len(c.Data)+1)
		maps.Copy(msg.Data, c.Data)
		if c.Link != "" {
			msg.Data["link"] = c.Link
		}
	}

	high := m.Priority != notify.PriorityNormal
	android := &messaging.AndroidConfig{CollapseKey: m.CollapseID, Priority: "normal"}
	apnsHeaders := map[string]string{"apns-priority": "5"}
	if high {
		android.Priority = "high"
		apnsHeaders["apns-priority"] = "10"
	}
	if m.CollapseID != "" {
		android.Notification = &messaging.AndroidNotification{Tag: m.CollapseID}
		apnsHeaders["apns-collapse-id"] = notify.Truncate(m.CollapseID, maxAPNsCollapseID)
	}
	if m.TTL > 0 {
		ttl := m.TTL
		android.TTL = &ttl
		apnsHeaders["apns-expiration"] = strconv.FormatInt(now.Add(m.TTL).Unix(), 10)
	}
	msg.Android = android

	msg.APNS = &messaging.APNSConfig{Headers: apnsHeaders}
	if high || c.ImageURL != "" {
		aps := &messaging.Aps{MutableContent: c.ImageURL != ""}
		if high {
			aps.Sound = "default"
		}
		msg.APNS.Payload = &messaging.APNSPayload{Aps: aps}
	}
	if c.ImageURL != "" {
		msg.APNS.FCMOptions = &messaging.APNSFCMOptions{ImageURL: c.ImageURL}
	}
	if strings.HasPrefix(c.Link, "https://") {
		msg.Webpush = &messaging.WebpushConfig{FCMOptions: &messaging.WebpushFCMOptions{Link: c.Link}}
	}
	return msg
}

// toMulticast sends tmpl (as built by toMessage; its token is ignored) to tokens. The payload is
// shared, not copied: the SDK only reads it.
func toMulticast(tmpl *messaging.Message, tokens []string) *messaging.MulticastMessage {
	return &messaging.MulticastMessage{
		Tokens:       tokens,
		Data:         tmpl.Data,
		Notification: tmpl.Notification,
		Android:      tmpl.Android,
		Webpush:      tmpl.Webpush,
		APNS:         tmpl.APNS,
		FCMOptions:   tmpl.FCMOptions,
	}
}

// MulticastFor is m's payload for tokens as one multicast: the very requests the sender makes
// for them, for a raw SDK comparison to send (herald bench).
func MulticastFor(m notify.OutboundMessage, tokens []string, now time.Time) *messaging.MulticastMessage {
	return toMulticast(toMessage(m, now), tokens)
}

// payloadKey identifies everything toMessage reads except the token: messages with equal keys
// get the same payload and can share a multicast. Fields are length-prefixed so no two
// different payloads share a key.
func payloadKey(m *notify.OutboundMessage) string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	c := &m.Content
	field(m.App)
	field(c.Title)
	field(c.Body)
	field(c.ImageURL)
	field(c.Link)
	field(m.CollapseID)
	field(string(m.Priority))
	field(strconv.FormatInt(int64(m.TTL), 10))
	switch len(c.Data) {
	case 0:
	case 1:
		for k, v := range c.Data {
			field(k)
			field(v)
		}
	default:
		for _, k := range slices.Sorted(maps.Keys(c.Data)) {
			field(k)
			field(c.Data[k])
		}
	}
	return b.String()
}
