package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// One-click unsubscribe (RFC 8058): a marketing email carries a link that opts its recipient
// out of that channel's marketing with one POST, no sign-in. The link's token names the user,
// channel and category, signed with a key of the deployment's: anyone holding the link may
// unsubscribe that user (the point of it), nobody may forge one for another user. It does not
// expire: a mail read a year later must still work.

// UnsubscribeKeyFrom derives the token key from a deployment secret (the contact encryption key),
// so every function of a deployment signs and checks alike without a secret of its own.
func UnsubscribeKeyFrom(secret string) []byte {
	sum := sha256.Sum256([]byte("herald unsubscribe key\x00" + strings.TrimSpace(secret)))
	return sum[:]
}

// Unsubscribe is what a token opts out of.
type Unsubscribe struct {
	UserID   string
	Channel  Channel
	Category Category
}

// UnsubscribeToken is u's token: "v1.<user, base64url>.<channel>.<category>.<mac>".
func UnsubscribeToken(key []byte, u Unsubscribe) string {
	body := "v1." + base64.RawURLEncoding.EncodeToString([]byte(u.UserID)) + "." + string(u.Channel) + "." + string(u.Category)
	return body + "." + unsubscribeMAC(key, body)
}

// ParseUnsubscribeToken checks a token's signature and returns what it opts out of; ok is false
// for anything this deployment did not sign.
func ParseUnsubscribeToken(key []byte, token string) (u Unsubscribe, ok bool) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || len(key) == 0 {
		return u, false
	}
	body, mac := token[:i], token[i+1:]
	if !hmac.Equal([]byte(mac), []byte(unsubscribeMAC(key, body))) {
		return u, false
	}
	parts := strings.Split(body, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return u, false
	}
	user, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(user) == 0 {
		return u, false
	}
	return Unsubscribe{UserID: string(user), Channel: Channel(parts[2]), Category: Category(parts[3])}, true
}

func unsubscribeMAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// UnsubscribePath is the public route of a token: POST opts out, GET shows the page asking to.
func UnsubscribePath(token string) string { return "/u/" + token }
