package notify

import (
	"encoding/json"
	"regexp"
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

// secretFieldText finds a secret key's string value in text that is not valid JSON (up to its
// closing quote, or the end of a body cut short).
var secretFieldText = regexp.MustCompile(`("(address|token|fcm_token|apns_token|email|phone)"\s*:\s*")((?:[^"\\]|\\.)*)("?)`)

// secretKeys are JSON keys whose string values are device tokens or contact addresses.
var secretKeys = map[string]bool{"address": true, "token": true, "fcm_token": true, "apns_token": true, "email": true, "phone": true}

// MaskPayload returns a message body with every device token, email address and phone number
// masked, as JSON (a body that is not JSON comes back as a masked JSON string). The DLQ listing
// and the message_dead_lettered event show payloads only through it.
func MaskPayload(body []byte) json.RawMessage {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		// Malformed JSON — often why a message is dead-lettered — still names its tokens and
		// addresses under their keys.
		text := secretFieldText.ReplaceAllStringFunc(string(body), func(f string) string {
			m := secretFieldText.FindStringSubmatch(f)
			return m[1] + maskValue(m[2], m[3]).(string) + m[4] // a body cut short may not close it
		})
		b, _ := json.Marshal(MaskText(text))
		return b
	}
	b, _ := json.Marshal(maskValue("", v))
	return b
}

func maskValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskValue(k, e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskValue(key, e)
		}
		return x
	case string:
		if secretKeys[key] {
			switch _, webPush := ParseWebPushToken(x); {
			case webPush: // before the "@" test: a push service's endpoint may hold one
				return MaskToken(x)
			case strings.Contains(x, "@"):
				return MaskEmail(x)
			case strings.HasPrefix(x, "+"):
				return MaskPhone(x)
			default:
				return MaskToken(x)
			}
		}
		if strings.HasPrefix(strings.TrimSpace(x), "{") { // an embedded JSON document (SNS Message)
			return string(MaskPayload([]byte(x)))
		}
		return MaskText(x)
	}
	return v
}
