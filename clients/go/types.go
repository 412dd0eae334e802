package herald

import "time"

// The request and response types of Herald's HTTP API, one per schema of its OpenAPI document
// (internal/api/openapi.json: TestTypesMatchOpenAPI checks every field name both ways).

// Channel is a delivery channel.
type Channel string

// Channels.
const (
	Push     Channel = "push"
	Email    Channel = "email"
	SMS      Channel = "sms"
	Inbox    Channel = "inbox"
	AlimTalk Channel = "alimtalk"
)

// Category decides consent and quiet hours: marketing needs the recipient's consent and waits out
// 21:00–08:00.
type Category string

// Categories.
const (
	Transactional Category = "transactional"
	Marketing     Category = "marketing"
)

// SendRequest is one notification to send (schema SendRequest, version 1).
type SendRequest struct {
	Version        int                 `json:"version,omitempty"`
	IdempotencyKey string              `json:"idempotency_key,omitempty"`
	Category       Category            `json:"category,omitempty"`
	Channels       []Channel           `json:"channels"`
	Content        *Content            `json:"content,omitempty"`
	ChannelContent map[Channel]Content `json:"channel_content,omitempty"`
	Localized      map[string]Content  `json:"localized,omitempty"`
	Locale         string              `json:"locale,omitempty"`
	Recipients     []Recipient         `json:"recipients"`
	CollapseID     string              `json:"collapse_id,omitempty"`
	Priority       string              `json:"priority,omitempty"`
	TTLSeconds     int                 `json:"ttl_seconds,omitempty"`
	SendAt         *time.Time          `json:"send_at,omitempty"`
	Template       *TemplateRef        `json:"template,omitempty"`
}

// Content is what a person sees on one channel; Title is an email's subject.
type Content struct {
	Title    string            `json:"title,omitempty"`
	Body     string            `json:"body,omitempty"`
	HTML     string            `json:"html,omitempty"`
	Data     map[string]string `json:"data,omitempty"`
	Link     string            `json:"link,omitempty"`
	ImageURL string            `json:"image_url,omitempty"`
}

// Recipient is a user (resolved through devices, contacts and preferences) or one address.
type Recipient struct {
	UserID    string `json:"user_id,omitempty"`
	Email     string `json:"email,omitempty"`
	Phone     string `json:"phone,omitempty"`
	FCMToken  string `json:"fcm_token,omitempty"`
	APNsToken string `json:"apns_token,omitempty"`
	App       string `json:"app,omitempty"`
}

// TemplateRef names a stored template to render instead of Content.
type TemplateRef struct {
	Name    string         `json:"name"`
	Version int            `json:"version,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// Accepted is the answer to a send: the notification's id and status. Replayed is set when
// Herald had the request already (a 200: a retry of the same request under its key).
type Accepted struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Replayed bool   `json:"-"`
}

// CampaignRequest starts a campaign to an audience (schema CampaignRequest).
type CampaignRequest struct {
	IdempotencyKey string       `json:"idempotency_key,omitempty"`
	Category       Category     `json:"category,omitempty"`
	Channels       []Channel    `json:"channels"`
	Content        *Content     `json:"content,omitempty"`
	Audience       Audience     `json:"audience"`
	SendAt         *time.Time   `json:"send_at,omitempty"`
	QuietHours     *QuietHours  `json:"quiet_hours,omitempty"`
	AdPrefix       bool         `json:"ad_prefix,omitempty"`
	MaxRate        int          `json:"max_rate,omitempty"`
	Template       *TemplateRef `json:"template,omitempty"`
}

// Audience is a campaign's sources: devices of an app, or uploaded user lists.
type Audience struct {
	Sources []AudienceSource `json:"sources"`
}

// AudienceSource is one source of a campaign's audience.
type AudienceSource struct {
	Kind             string `json:"kind"` // app_devices or user_list
	App              string `json:"app,omitempty"`
	Platform         string `json:"platform,omitempty"`
	Locale           string `json:"locale,omitempty"`
	MarketingConsent *bool  `json:"marketing_consent,omitempty"`
	ListID           string `json:"list_id,omitempty"`
}

// QuietHours holds marketing back at night; given at all, it holds unless Enabled is false.
type QuietHours struct {
	Enabled  *bool  `json:"enabled,omitempty"`
	Start    string `json:"start,omitempty"`
	End      string `json:"end,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// CampaignAccepted is the answer to a campaign's creation and transitions.
type CampaignAccepted struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Replayed bool   `json:"-"`
}

// DeviceRequest registers a push token.
type DeviceRequest struct {
	Platform    string `json:"platform"` // fcm or apns
	App         string `json:"app,omitempty"`
	Environment string `json:"environment,omitempty"`
	Locale      string `json:"locale,omitempty"`
	TimeZone    string `json:"time_zone,omitempty"`
}

// Device is a registered push token, masked.
type Device struct {
	UserID      string    `json:"user_id"`
	Platform    string    `json:"platform"`
	App         string    `json:"app"`
	Token       string    `json:"token"`
	Environment string    `json:"environment"`
	Locale      string    `json:"locale,omitempty"`
	TimeZone    string    `json:"time_zone,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// DeviceList is a user's devices.
type DeviceList struct {
	UserID  string   `json:"user_id"`
	Devices []Device `json:"devices"`
}

// ContactsRequest replaces a user's contact: a field left out is removed.
type ContactsRequest struct {
	Email    string `json:"email,omitempty"`
	Phone    string `json:"phone,omitempty"`
	Locale   string `json:"locale,omitempty"`
	TimeZone string `json:"time_zone,omitempty"`
}

// Contacts is a user's contact, masked.
type Contacts struct {
	UserID    string    `json:"user_id"`
	Email     string    `json:"email,omitempty"`
	Phone     string    `json:"phone,omitempty"`
	Locale    string    `json:"locale,omitempty"`
	TimeZone  string    `json:"time_zone,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PreferencesRequest replaces a user's preferences: a consent left out is withdrawn.
type PreferencesRequest struct {
	OptOut           map[string][]string `json:"opt_out,omitempty"` // channel or * → categories or *
	MarketingConsent bool                `json:"marketing_consent,omitempty"`
	NightConsent     bool                `json:"night_consent,omitempty"`
}

// Preferences is a user's stored preferences.
type Preferences struct {
	UserID             string              `json:"user_id"`
	OptOut             map[string][]string `json:"opt_out"`
	MarketingConsent   bool                `json:"marketing_consent"`
	MarketingConsentAt *time.Time          `json:"marketing_consent_at"`
	NightConsent       bool                `json:"night_consent"`
	NightConsentAt     *time.Time          `json:"night_consent_at"`
	UpdatedAt          *time.Time          `json:"updated_at"`
}

// WebPushSubscriptionRequest is a browser's PushSubscription.toJSON(), with the user's locale
// and time zone.
type WebPushSubscriptionRequest struct {
	Endpoint       string      `json:"endpoint"`
	ExpirationTime *float64    `json:"expirationTime,omitempty"`
	Keys           WebPushKeys `json:"keys"`
	Locale         string      `json:"locale,omitempty"`
	TimeZone       string      `json:"time_zone,omitempty"`
}

// WebPushKeys are a subscription's keys, base64url.
type WebPushKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// WebPushSubscription is a stored subscription, its endpoint masked.
type WebPushSubscription struct {
	ID        string    `json:"id"`
	UserID    string    `json:"user_id"`
	Endpoint  string    `json:"endpoint"`
	App       string    `json:"app"`
	Locale    string    `json:"locale,omitempty"`
	TimeZone  string    `json:"time_zone,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// WebPushSubscriptionList is a user's subscriptions.
type WebPushSubscriptionList struct {
	UserID        string                `json:"user_id"`
	Subscriptions []WebPushSubscription `json:"subscriptions"`
}

// TemplateRequest is a new version of a stored template.
type TemplateRequest struct {
	Channels      map[Channel]Content `json:"channels,omitempty"`
	Locales       map[string]Content  `json:"locales,omitempty"`
	DefaultLocale string              `json:"default_locale,omitempty"`
	Variables     []TemplateVariable  `json:"variables,omitempty"`
}

// TemplateVariable is a variable a template's texts use.
type TemplateVariable struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

// Template is a stored template version.
type Template struct {
	Name          string              `json:"name"`
	Version       int                 `json:"version"`
	Channels      map[Channel]Content `json:"channels"`
	Locales       map[string]Content  `json:"locales"`
	DefaultLocale string              `json:"default_locale,omitempty"`
	Variables     []TemplateVariable  `json:"variables"`
	CreatedAt     time.Time           `json:"created_at"`
}

// Notification is a notification's status, counts and deliveries (addresses masked).
type Notification struct {
	ID              string                  `json:"id"`
	Service         string                  `json:"service"`
	IdempotencyKey  string                  `json:"idempotency_key,omitempty"`
	Status          string                  `json:"status"`
	Category        Category                `json:"category"`
	Channels        []Channel               `json:"channels"`
	TemplateName    string                  `json:"template_name,omitempty"`
	TemplateVersion int                     `json:"template_version,omitempty"`
	CreatedAt       time.Time               `json:"created_at"`
	UpdatedAt       time.Time               `json:"updated_at"`
	SendAt          *time.Time              `json:"send_at"`
	Stats           map[string]ChannelStats `json:"stats"`
	SkippedByReason map[string]int          `json:"skipped_by_reason"`
	FailedByReason  map[string]int          `json:"failed_by_reason"`
	Deliveries      []Delivery              `json:"deliveries"`
	NextCursor      string                  `json:"next_cursor"`
}

// ChannelStats are a channel's delivery counts.
type ChannelStats struct {
	Total   int `json:"total"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Pending int `json:"pending"`
}

// Delivery is one delivery of a notification, its address masked.
type Delivery struct {
	ID                string    `json:"id"`
	UserID            string    `json:"user_id,omitempty"`
	Channel           Channel   `json:"channel"`
	Provider          string    `json:"provider"`
	Address           string    `json:"address"`
	Status            string    `json:"status"`
	Reason            string    `json:"reason,omitempty"`
	Detail            string    `json:"detail,omitempty"`
	Attempts          int       `json:"attempts"`
	ProviderMessageID string    `json:"provider_message_id,omitempty"`
	UpdatedAt         time.Time `json:"updated_at"`
	// History is the attempts before the one the fields above describe, oldest first; empty for
	// a delivery decided on its first attempt.
	History []Attempt `json:"history,omitempty"`
}

// Attempt is one earlier attempt of a delivery: the provider's answer and when the retry was due.
type Attempt struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// InboxItem is one item of a user's in-app inbox.
type InboxItem struct {
	ID        string            `json:"id"`
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

// InboxPage is a page of a user's inbox, newest first.
type InboxPage struct {
	Items      []InboxItem `json:"items"`
	NextCursor string      `json:"next_cursor"`
}
