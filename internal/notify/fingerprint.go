package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// RequestFingerprint identifies what a validated SendRequest asks for: the SHA-256 of its
// canonical JSON, with the defaults a request may leave out filled in (version, category,
// priority) and send_at in UTC, so two requests that mean the same have the same fingerprint
// and any change of meaning — content, recipients, channels, schedule, TTL — changes it.
// encoding/json writes struct fields in declaration order and map keys sorted, which makes the
// encoding canonical.
func RequestFingerprint(r *SendRequest) string {
	c := *r
	c.Version = 1
	if c.Category == "" {
		c.Category = CategoryTransactional
	}
	if c.Priority == "" {
		c.Priority = PriorityHigh
		if c.Category == CategoryMarketing {
			c.Priority = PriorityNormal
		}
	}
	if c.SendAt != nil {
		t := c.SendAt.UTC()
		c.SendAt = &t
	}
	b, err := json.Marshal(&c)
	if err != nil {
		// A validated request always encodes; an impossible failure must not make two
		// different requests look alike.
		b = []byte(time.Now().String())
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
