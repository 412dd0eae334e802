package notify

import (
	"strings"
	"unicode/utf8"
)

// MaskEmail keeps the first character of the local part and the domain: "j***@example.com".
func MaskEmail(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at <= 0 {
		return MaskSecret(s)
	}
	return s[:1] + "***" + s[at:]
}

// MaskPhone keeps the country prefix and the last two digits: "+82******78".
func MaskPhone(s string) string {
	if len(s) < 6 {
		return "***"
	}
	return s[:3] + strings.Repeat("*", len(s)-5) + s[len(s)-2:]
}

// MaskToken keeps the first four and last four characters of a device token or key; a web push
// subscription's token shows its endpoint masked (MaskWebPushEndpoint) and nothing of its keys.
func MaskToken(s string) string {
	if w, ok := ParseWebPushToken(s); ok {
		return MaskWebPushEndpoint(w.Endpoint)
	}
	if len(s) <= 12 {
		return "***"
	}
	return s[:4] + "…" + s[len(s)-4:]
}

// MaskSecret hides a value entirely but its length class.
func MaskSecret(s string) string {
	if s == "" {
		return ""
	}
	return "***"
}

// MaskAddress masks an address according to its channel.
func MaskAddress(c Channel, address string) string {
	switch c {
	case ChannelEmail:
		return MaskEmail(address)
	case ChannelSMS, ChannelAlimTalk:
		return MaskPhone(address)
	case ChannelInbox:
		return address // a user id, not personal data by itself
	default:
		return MaskToken(address)
	}
}

// Truncate shortens s to at most n bytes without splitting a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
