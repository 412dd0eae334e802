package notify

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

var idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns prefix + a time-ordered random id (48-bit milliseconds, 80 random bits).
func NewID(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// Id prefixes: a notification's id starts with n_, a campaign's with c_ (its notification shares
// the campaign's id). Campaigns created before the c_ prefix existed keep their n_ ids.
const (
	NotificationIDPrefix = "n_"
	CampaignIDPrefix     = "c_"
)

// IsCampaignID reports whether id has the campaign prefix.
func IsCampaignID(id string) bool { return strings.HasPrefix(id, CampaignIDPrefix) }

// CampaignIDFor is NotificationIDFor for campaigns: the same derivation under the c_ prefix, so
// a campaign and a notification sent with the same idempotency key are different things.
func CampaignIDFor(service, idempotencyKey string, now time.Time) string {
	return idFor(CampaignIDPrefix, service, idempotencyKey, now)
}

// NotificationIDFor returns the id of the notification a service sends with an idempotency
// key: derived from the pair, so a repeated request gets the first request's id even before
// the first one is stored. Without a key the id is random.
func NotificationIDFor(service, idempotencyKey string, now time.Time) string {
	return idFor(NotificationIDPrefix, service, idempotencyKey, now)
}

func idFor(prefix, service, idempotencyKey string, now time.Time) string {
	if idempotencyKey == "" {
		return NewID(prefix, now)
	}
	h := sha256.Sum256([]byte(service + "\x00" + idempotencyKey))
	return prefix + strings.ToLower(idEncoding.EncodeToString(h[:16]))
}
