package twilio

import (
	"strings"
	"unicode/utf16"

	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"herald/internal/notify"
)

// MaxBodyChars is Twilio's limit on a message body, in characters as Twilio counts them (UTF-16
// code units: an emoji counts two).
const MaxBodyChars = 1600

// toCreateMessageParams builds the Messages.json request for m: To, the messaging service or
// From, and the body from smsBody.
func toCreateMessageParams(m notify.OutboundMessage, cfg Config) *openapi.CreateMessageParams {
	p := (&openapi.CreateMessageParams{}).SetTo(m.Address).SetBody(smsBody(m.Content, m.OptOutLine))
	if cfg.MessagingServiceSID != "" {
		p.SetMessagingServiceSid(cfg.MessagingServiceSID)
	} else {
		p.SetFrom(cfg.From)
	}
	return p
}

// smsBody is the title and the body on separate lines, cut to fit MaxBodyChars with the link and
// then an advertisement's refusal line (when any) kept whole on the last lines.
func smsBody(c notify.Content, optOut string) string {
	text := joinNonEmpty(strings.TrimSpace(c.Title), strings.TrimSpace(c.Body))
	link := joinNonEmpty(strings.TrimSpace(c.Link), strings.TrimSpace(optOut))
	if link == "" {
		return truncateChars(text, MaxBodyChars)
	}
	room := MaxBodyChars - charLen(link)
	if text != "" {
		room-- // the newline before the link
	}
	if room < 0 {
		// A link longer than an SMS: nothing sensible fits; send what does.
		return truncateChars(joinNonEmpty(text, link), MaxBodyChars)
	}
	return joinNonEmpty(truncateChars(text, room), link)
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}

// charLen counts s as Twilio does.
func charLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// truncateChars cuts s to at most n characters, marking a cut with "..." (ASCII, so a GSM-7
// message stays GSM-7).
func truncateChars(s string, n int) string {
	if charLen(s) <= n {
		return s
	}
	const mark = "..."
	if n < len(mark) {
		return ""
	}
	used := 0
	for i, r := range s {
		if used+utf16.RuneLen(r) > n-len(mark) {
			return strings.TrimRight(s[:i], " \n") + mark
		}
		used += utf16.RuneLen(r)
	}
	return s
}
