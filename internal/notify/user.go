package notify

import (
	"slices"
	"time"
)

// Platform is a push platform.
type Platform string

const (
	PlatformFCM  Platform = "fcm"
	PlatformAPNs Platform = "apns"
	// PlatformWebPush is a browser's W3C Push API subscription; its device token is the
	// subscription's canonical JSON (WebPushSubscription.Token).
	PlatformWebPush Platform = "webpush"
)

// Valid reports whether p is a known platform.
func (p Platform) Valid() bool { return p == PlatformFCM || p == PlatformAPNs || p == PlatformWebPush }

// Provider is who carries a delivery; rate limits and senders are per provider.
type Provider string

const (
	ProviderFCM    Provider = "fcm"
	ProviderAPNs   Provider = "apns"
	ProviderSES    Provider = "ses"
	ProviderTwilio Provider = "twilio"
	ProviderInbox  Provider = "inbox"
	// ProviderWebPush is the browsers' push services, reached over RFC 8030 with VAPID.
	ProviderWebPush Provider = "webpush"
)

// ProviderAlimTalk is Kakao AlimTalk, sent through Solapi (internal/alimtalk).
const ProviderAlimTalk Provider = "alimtalk"

// Providers is the one list of the providers send batches go to (the inbox is written by
// prepare and has none): the send stage accepts batches for these, and the operations dashboard
// has a line and a failure alarm for each.
var Providers = []Provider{ProviderFCM, ProviderAPNs, ProviderWebPush, ProviderSES, ProviderTwilio, ProviderAlimTalk}

// Device is one push registration of a user.
type Device struct {
	UserID      string    `json:"user_id"`
	Platform    Platform  `json:"platform"`
	App         string    `json:"app"` // provider app (FCM project / APNs topic) from config; "default"
	Token       string    `json:"token"`
	Environment string    `json:"environment"` // "production" or "sandbox" (APNs)
	Locale      string    `json:"locale,omitempty"`
	TimeZone    string    `json:"time_zone,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Contact is where a user is reached by email and SMS. Stores keep it encrypted at rest.
type Contact struct {
	UserID    string    `json:"user_id"`
	Email     string    `json:"email,omitempty"`
	Phone     string    `json:"phone,omitempty"` // E.164
	Locale    string    `json:"locale,omitempty"`
	TimeZone  string    `json:"time_zone,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Preferences are a user's choices. The zero value allows transactional messages everywhere and
// no marketing.
type Preferences struct {
	UserID string `json:"user_id"`
	// OptOut maps channel → categories the user opted out of ("*" for all).
	OptOut           map[Channel][]Category `json:"opt_out,omitempty"`
	MarketingConsent *time.Time             `json:"marketing_consent_at,omitempty"` // nil: no consent
	NightConsent     *time.Time             `json:"night_consent_at,omitempty"`     // consent to ads 21:00–08:00
	UpdatedAt        time.Time              `json:"updated_at"`
}

// Allows reports whether the user accepts category on channel, and the skip reason if not.
func (p Preferences) Allows(c Channel, cat Category) (bool, string) {
	for _, k := range p.OptOut[c] {
		if k == cat || k == "*" {
			return false, ReasonOptedOut
		}
	}
	for _, k := range p.OptOut["*"] {
		if k == cat || k == "*" {
			return false, ReasonOptedOut
		}
	}
	if cat == CategoryMarketing && p.MarketingConsent == nil && c != ChannelInbox {
		return false, ReasonNoConsent
	}
	return true, ""
}

// Suppression is an address Herald must not send to (hard bounce, complaint, invalid number).
// Stores keep AddressKey (a hash) and the masked form, never the address.
type Suppression struct {
	AddressKey string    `json:"address_key"`
	Masked     string    `json:"address"`
	Channel    Channel   `json:"channel"`
	Reason     string    `json:"reason"` // bounce, complaint, invalid_number
	CreatedAt  time.Time `json:"created_at"`
}

// InboxItem is one entry of a user's in-app inbox.
type InboxItem struct {
	UserID    string            `json:"-"`
	ID        string            `json:"id"` // the notification id
	Service   string            `json:"service"`
	Category  Category          `json:"category"`
	Title     string            `json:"title,omitempty"`
	Body      string            `json:"body,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
	Link      string            `json:"link,omitempty"`
	ImageURL  string            `json:"image_url,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ReadAt    *time.Time        `json:"read_at,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
}

// AppsOf is the distinct provider apps of ds, sorted.
func AppsOf(ds []Device) []string {
	apps := make([]string, 0, len(ds))
	for _, d := range ds {
		apps = append(apps, d.App)
	}
	slices.Sort(apps)
	return slices.Compact(apps)
}
