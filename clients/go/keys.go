package herald

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxKey is the longest idempotency key Herald takes.
const MaxKey = 256

// DeriveKey derives a stable idempotency key from the caller's own key (an order id, an event
// id) and parts that tell its notifications apart (a user id, a channel): the same inputs give
// the same key on every retry and every process, so one business event sent to many users has
// one key per user, and none is ever made up anew. The key is printable ASCII of at most MaxKey
// characters: the caller's key as it is when it fits, then a digest of the parts. An empty
// caller key derives no key (""), which a send refuses: it would give every event of a user the
// same key, and Herald would send only the first.
func DeriveKey(callerKey string, parts ...string) string {
	if callerKey == "" {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(callerKey), callerKey)
	for _, p := range parts {
		fmt.Fprintf(h, "|%d:%s", len(p), p)
	}
	digest := hex.EncodeToString(h.Sum(nil))[:32]
	prefix := strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '_'
		}
		return r
	}, callerKey)
	if max := MaxKey - 1 - len(digest); len(prefix) > max {
		prefix = prefix[:max]
	}
	if len(parts) == 0 && prefix == callerKey && prefix != "" {
		return callerKey
	}
	return prefix + ":" + digest
}

// idEncoding is Herald's id alphabet.
var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NotificationID is the id Herald gives the notification a service sends under key: what an
// SQS send answers without asking Herald, and what GET /v1/notifications/{id} finds.
func NotificationID(service, key string) string {
	h := sha256.Sum256([]byte(service + "\x00" + key))
	return "n_" + strings.ToLower(idEncoding.EncodeToString(h[:16]))
}

// checkKeys refuses requests without an idempotency key before anything is sent; field names
// where ("" for one request, notifications[i]. for a batch).
func checkKey(key, field string) error {
	switch {
	case key == "":
		return invalid(field+"idempotency_key", "required: every send carries a key (DeriveKey makes one from yours), so a retry can never send twice")
	case len(key) > MaxKey:
		return invalid(field+"idempotency_key", "at most %d characters", MaxKey)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return invalid(field+"idempotency_key", "printable ASCII without spaces only")
		}
	}
	return nil
}
