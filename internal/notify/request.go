package notify

import (
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"
)

// Limits on a SendRequest.
const (
	MaxRecipients      = 10000 // per notification; larger audiences are campaigns
	MaxIdempotencyKey  = 256
	MaxTitleBytes      = 1024
	MaxBodyBytes       = 16 * 1024
	MaxHTMLBytes       = 256 * 1024
	MaxDataEntries     = 50
	MaxTTL             = 28 * 24 * time.Hour // FCM's maximum
	MaxScheduleHorizon = 365 * 24 * time.Hour
)

// SendRequest is the versioned JSON a service sends to its ingest queue or to
// POST /v1/notifications. Its schema is events/schema/send-request.v1.json.
type SendRequest struct {
	Version        int                 `json:"version,omitempty"` // 1; 0 means 1
	IdempotencyKey string              `json:"idempotency_key,omitempty"`
	Category       Category            `json:"category,omitempty"` // default transactional
	Channels       []Channel           `json:"channels"`
	Content        Content             `json:"content"`
	ChannelContent map[Channel]Content `json:"channel_content,omitempty"`
	Localized      map[string]Content  `json:"localized,omitempty"`
	Locale         string              `json:"locale,omitempty"`
	Recipients     []Recipient         `json:"recipients"`
	CollapseID     string              `json:"collapse_id,omitempty"`
	Priority       Priority            `json:"priority,omitempty"` // default high for transactional
	TTLSeconds     int                 `json:"ttl_seconds,omitempty"`
	SendAt         *time.Time          `json:"send_at,omitempty"`
}

var (
	phoneRe  = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	localeRe = regexp.MustCompile(`^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`)
	keyRe    = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

// ValidPhone reports whether s is an E.164 number.
func ValidPhone(s string) bool { return phoneRe.MatchString(s) }

// ValidEmail reports whether s is a bare email address.
func ValidEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && a.Name == ""
}

// ValidLocale reports whether s looks like a BCP 47 tag ("ko", "en-US").
func ValidLocale(s string) bool { return localeRe.MatchString(s) }

// Validate checks r and returns the first problem as an EINVALID *Error naming the field.
func (r *SendRequest) Validate(now time.Time) error {
	if r.Version != 0 && r.Version != 1 {
		return FieldError("version", "unsupported version %d (this server speaks 1)", r.Version)
	}
	if len(r.IdempotencyKey) > MaxIdempotencyKey || (r.IdempotencyKey != "" && !keyRe.MatchString(r.IdempotencyKey)) {
		return FieldError("idempotency_key", "must be 1–%d printable ASCII characters without spaces", MaxIdempotencyKey)
	}
	switch r.Category {
	case "", CategoryTransactional, CategoryMarketing:
	default:
		return FieldError("category", "unknown category %q (want transactional or marketing)", r.Category)
	}
	if len(r.Channels) == 0 {
		return FieldError("channels", "at least one channel is required (push, email, sms, inbox)")
	}
	seen := map[Channel]bool{}
	for i, c := range r.Channels {
		if !c.Valid() {
			return FieldError(fmt.Sprintf("channels[%d]", i), "unknown channel %q (want push, email, sms or inbox)", c)
		}
		if seen[c] {
			return FieldError(fmt.Sprintf("channels[%d]", i), "channel %q listed twice", c)
		}
		seen[c] = true
	}
	if err := validateContent("content", r.Content); err != nil {
		return err
	}
	for c, cc := range r.ChannelContent {
		if !c.Valid() {
			return FieldError("channel_content."+string(c), "unknown channel %q", c)
		}
		if err := validateContent("channel_content."+string(c), cc); err != nil {
			return err
		}
	}
	for l, lc := range r.Localized {
		if !ValidLocale(l) {
			return FieldError("localized."+l, "not a locale tag (e.g. \"ko\", \"en-US\")")
		}
		if err := validateContent("localized."+l, lc); err != nil {
			return err
		}
	}
	if r.Locale != "" && !ValidLocale(r.Locale) {
		return FieldError("locale", "not a locale tag (e.g. \"ko\", \"en-US\")")
	}
	for _, c := range r.Channels {
		body := r.Content.Body
		if cc, ok := r.ChannelContent[c]; ok && cc.Body != "" {
			body = cc.Body
		}
		title := r.Content.Title
		if cc, ok := r.ChannelContent[c]; ok && cc.Title != "" {
			title = cc.Title
		}
		if body == "" && (c != ChannelEmail || (r.Content.HTML == "" && r.ChannelContent[c].HTML == "")) {
			return FieldError("content.body", "a body is required for channel %q", c)
		}
		if c == ChannelEmail && title == "" {
			return FieldError("content.title", "email needs a title (used as the subject)")
		}
	}
	if len(r.Recipients) == 0 {
		return FieldError("recipients", "at least one recipient is required")
	}
	if len(r.Recipients) > MaxRecipients {
		return &Error{Code: ETOOLARGE, Field: "recipients", Message: fmt.Sprintf("%d recipients; at most %d per notification (use a campaign for larger audiences)", len(r.Recipients), MaxRecipients)}
	}
	for i, rc := range r.Recipients {
		if err := validateRecipient(fmt.Sprintf("recipients[%d]", i), rc, seen); err != nil {
			return err
		}
	}
	if r.CollapseID != "" && len(r.CollapseID) > 64 {
		return FieldError("collapse_id", "at most 64 bytes (APNs limit)")
	}
	switch r.Priority {
	case "", PriorityHigh, PriorityNormal:
	default:
		return FieldError("priority", "unknown priority %q (want high or normal)", r.Priority)
	}
	if r.TTLSeconds < 0 || time.Duration(r.TTLSeconds)*time.Second > MaxTTL {
		return FieldError("ttl_seconds", "must be between 0 and %d", int(MaxTTL/time.Second))
	}
	if r.SendAt != nil && r.SendAt.After(now.Add(MaxScheduleHorizon)) {
		return FieldError("send_at", "at most one year ahead")
	}
	return nil
}

func validateContent(field string, c Content) error {
	if len(c.Title) > MaxTitleBytes {
		return FieldError(field+".title", "at most %d bytes", MaxTitleBytes)
	}
	if len(c.Body) > MaxBodyBytes {
		return FieldError(field+".body", "at most %d bytes", MaxBodyBytes)
	}
	if len(c.HTML) > MaxHTMLBytes {
		return FieldError(field+".html", "at most %d bytes", MaxHTMLBytes)
	}
	if len(c.Data) > MaxDataEntries {
		return FieldError(field+".data", "at most %d entries", MaxDataEntries)
	}
	for k := range c.Data {
		if k == "" || strings.HasPrefix(k, "google.") || strings.HasPrefix(k, "gcm.") || k == "from" || k == "notification" {
			return FieldError(field+".data."+k, "reserved or empty key")
		}
	}
	return nil
}

func validateRecipient(field string, r Recipient, channels map[Channel]bool) error {
	n := 0
	for _, s := range []string{r.UserID, r.Email, r.Phone, r.FCMToken, r.APNsToken} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return FieldError(field, "give exactly one of user_id, email, phone, fcm_token, apns_token")
	}
	switch {
	case r.UserID != "":
		if len(r.UserID) > 128 || !keyRe.MatchString(r.UserID) {
			return FieldError(field+".user_id", "must be 1–128 printable ASCII characters without spaces")
		}
	case r.Email != "":
		if !ValidEmail(r.Email) {
			return FieldError(field+".email", "not an email address")
		}
		if !channels[ChannelEmail] {
			return FieldError(field+".email", "an email recipient needs the email channel")
		}
	case r.Phone != "":
		if !ValidPhone(r.Phone) {
			return FieldError(field+".phone", "not an E.164 phone number (e.g. +821012345678)")
		}
		if !channels[ChannelSMS] {
			return FieldError(field+".phone", "a phone recipient needs the sms channel")
		}
	case r.FCMToken != "", r.APNsToken != "":
		tok := r.FCMToken + r.APNsToken
		if len(tok) > 4096 || !keyRe.MatchString(tok) {
			return FieldError(field, "token must be 1–4096 printable ASCII characters")
		}
		if !channels[ChannelPush] {
			return FieldError(field, "a device token recipient needs the push channel")
		}
	}
	return nil
}

// Notification builds the notification r describes for service, with id.
func (r *SendRequest) Notification(id, service string, now time.Time) *Notification {
	n := &Notification{
		ID:             id,
		Service:        service,
		IdempotencyKey: r.IdempotencyKey,
		Category:       r.Category,
		Channels:       r.Channels,
		Content:        r.Content,
		ChannelContent: r.ChannelContent,
		Localized:      r.Localized,
		Locale:         r.Locale,
		Recipients:     r.Recipients,
		RecipientCount: len(r.Recipients),
		CollapseID:     r.CollapseID,
		Priority:       r.Priority,
		TTL:            time.Duration(r.TTLSeconds) * time.Second,
		SendAt:         ReservedTimePtr(r.SendAt), // whole seconds, as the schedule keeps it
		Lane:           LaneRealtime,
		Status:         StatusAccepted,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	if n.Category == "" {
		n.Category = CategoryTransactional
	}
	if n.Priority == "" {
		n.Priority = PriorityHigh
		if n.Category == CategoryMarketing {
			n.Priority = PriorityNormal
		}
	}
	if n.Category == CategoryMarketing {
		n.Lane = LaneBulk
	}
	if r.SendAt != nil && r.SendAt.After(now) {
		n.Status = StatusScheduled
	}
	return n
}
