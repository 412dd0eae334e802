package notify

import (
	"bytes"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
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

// RecipientsRoom is room for the recipients that body, a send request as JSON, can list: one
// for each object in it, at most MaxRecipients. Decoding appends into the room instead of
// growing the slice a doubling at a time, copying it each time. A request that lists none is
// left with an empty list instead of none, which Validate refuses alike.
func RecipientsRoom(body []byte) []Recipient {
	return make([]Recipient, 0, min(bytes.Count(body, []byte("{")), MaxRecipients))
}

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
	// Template names a stored template to render into Content, ChannelContent and Localized
	// instead of giving them (ApplyTemplate): exactly one of the two.
	Template *TemplateRef `json:"template,omitempty"`
}

var (
	phoneRe  = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	localeRe = regexp.MustCompile(`^[a-z]{2,3}([-_][A-Za-z0-9]{2,8})*$`)
)

// ValidPhone reports whether s is an E.164 number.
func ValidPhone(s string) bool { return phoneRe.MatchString(s) }

// Lengths of an email address (RFC 5321 §4.5.3.1): a provider refuses longer ones, so they are
// refused on the way in.
const (
	MaxEmailLocalPart = 64
	MaxEmailAddress   = 254
)

// ValidEmail reports whether s is a bare email address of at most MaxEmailAddress bytes whose
// local part has at most MaxEmailLocalPart.
func ValidEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if len(s) > MaxEmailAddress || at < 0 || at > MaxEmailLocalPart {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && a.Name == ""
}

// Control characters a text may keep: a body keeps line breaks and tabs; a title, which becomes
// an email subject (a header) and a one-line push title, keeps none.
const (
	LineText = ""
	BodyText = "\n\t"
)

// CheckText refuses in s any control character (C0 — NUL, CR, LF… —, DEL and C1) other than
// those in allow, and the bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069),
// which make a text display differently from what it says. The error names field and the
// character's byte offset.
func CheckText(field, s, allow string) error {
	for i, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			if strings.ContainsRune(allow, r) {
				continue
			}
			return FieldError(field, "contains the control character U+%04X at byte offset %d", r, i)
		case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return FieldError(field, "contains the bidirectional control U+%04X at byte offset %d", r, i)
		}
	}
	return nil
}

// Earliest send_at accepted: anything before is a mistake (a zero or truncated time), not a
// reserved send.
var minSendAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ValidateSendAt checks a requested send time: from the year 2000 to MaxScheduleHorizon after
// now. A time in the past (after 2000) means "now", as it always has.
func ValidateSendAt(at *time.Time, now time.Time) error {
	switch {
	case at == nil:
		return nil
	case at.Before(minSendAt):
		return FieldError("send_at", "%s is not a real send time (years before 2000 are refused)", at.UTC().Format(time.RFC3339))
	case at.After(now.Add(MaxScheduleHorizon)):
		return FieldError("send_at", "at most one year ahead")
	}
	return nil
}

// ValidLocale reports whether s looks like a BCP 47 tag ("ko", "en-US").
func ValidLocale(s string) bool { return localeRe.MatchString(s) }

// Validate checks r and returns the first problem as an EINVALID *Error naming the field.
func (r *SendRequest) Validate(now time.Time) error {
	if r.Version != 0 && r.Version != 1 {
		return FieldError("version", "unsupported version %d (this server speaks 1)", r.Version)
	}
	if len(r.IdempotencyKey) > MaxIdempotencyKey || (r.IdempotencyKey != "" && !isKey(r.IdempotencyKey)) {
		return FieldError("idempotency_key", "must be 1–%d printable ASCII characters without spaces", MaxIdempotencyKey)
	}
	switch r.Category {
	case "", CategoryTransactional, CategoryMarketing:
	default:
		return FieldError("category", "unknown category %q (want transactional or marketing)", r.Category)
	}
	if len(r.Channels) == 0 {
		return FieldError("channels", "at least one channel is required (push, email, sms, inbox, alimtalk)")
	}
	seen := map[Channel]bool{}
	for i, c := range r.Channels {
		if !c.Valid() {
			return FieldError(fmt.Sprintf("channels[%d]", i), "unknown channel %q (want push, email, sms, inbox or alimtalk)", c)
		}
		if c == ChannelAlimTalk && r.Category == CategoryMarketing {
			// Kakao allows AlimTalk for informational messages only (advertising is FriendTalk's).
			return FieldError(fmt.Sprintf("channels[%d]", i), "alimtalk is informational only: a marketing send can't use it")
		}
		if seen[c] {
			return FieldError(fmt.Sprintf("channels[%d]", i), "channel %q listed twice", c)
		}
		seen[c] = true
	}
	if r.Template != nil {
		// ApplyTemplate renders it away first; one left here was never rendered.
		return FieldError("template", "a template is rendered before the request is validated")
	}
	if r.Content.IsZero() && len(r.ChannelContent) == 0 && len(r.Localized) == 0 {
		return FieldError("content", "give content (title, body…) or a stored template")
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
		if c == ChannelAlimTalk {
			if err := validateAlimTalkRequest(r); err != nil {
				return err
			}
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
	if err := CheckText("collapse_id", r.CollapseID, LineText); err != nil {
		return err // it becomes the apns-collapse-id header
	}
	switch r.Priority {
	case "", PriorityHigh, PriorityNormal:
	default:
		return FieldError("priority", "unknown priority %q (want high or normal)", r.Priority)
	}
	if r.TTLSeconds < 0 || time.Duration(r.TTLSeconds)*time.Second > MaxTTL {
		return FieldError("ttl_seconds", "must be between 0 and %d", int(MaxTTL/time.Second))
	}
	return ValidateSendAt(r.SendAt, now)
}

// checkImageURL requires an image URL to be absolute http(s): FCM refuses anything else, and a
// device or browser could not fetch it.
func checkImageURL(field, s string) error {
	if s != "" && !IsHTTPURL(s) {
		return FieldError(field, "not an absolute http(s) URL")
	}
	return nil
}

// IsHTTPURL tells whether s is an absolute http or https URL with a host: what a provider's
// endpoint, a webhook or an image URL must be.
func IsHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// ValidateContent checks one content variant (field is "content", "channel_content.push",
// "localized.ko"…): sizes, reserved data keys, and no control characters where they do not
// belong.
func ValidateContent(field string, c Content) error {
	return validateContent(field, c)
}

func validateContent(field string, c Content) error {
	for _, t := range []struct {
		name, s, allow string
	}{
		{"title", c.Title, LineText},
		{"body", c.Body, BodyText},
		{"html", c.HTML, "\n\t\r"},
		{"link", c.Link, LineText},
		{"image_url", c.ImageURL, LineText},
	} {
		if err := CheckText(field+"."+t.name, t.s, t.allow); err != nil {
			return err
		}
	}
	if err := checkImageURL(field+".image_url", c.ImageURL); err != nil {
		return err
	}
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
	keys := make([]string, 0, len(c.Data))
	for k := range c.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first problem reported is the same every time
	for _, k := range keys {
		if k == "" || strings.HasPrefix(k, "google.") || strings.HasPrefix(k, "gcm.") || k == "from" || k == "notification" {
			return FieldError(field+".data."+k, "reserved or empty key")
		}
		if err := CheckText(field+".data", k, LineText); err != nil {
			return err // a key is not echoed into the field: it holds the control character
		}
		if err := CheckText(field+".data."+k, c.Data[k], BodyText); err != nil {
			return err
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
	if r.App != "" && r.FCMToken == "" && r.APNsToken == "" {
		return FieldError(field+".app", "app names the provider app of an fcm_token or apns_token recipient; a user's devices carry their own")
	}
	switch {
	case r.UserID != "":
		if len(r.UserID) > 128 || !isKey(r.UserID) {
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
		if !channels[ChannelSMS] && !channels[ChannelAlimTalk] {
			return FieldError(field+".phone", "a phone recipient needs the sms or alimtalk channel")
		}
	case r.FCMToken != "", r.APNsToken != "":
		if r.App != "" && (len(r.App) > 128 || !isKey(r.App)) {
			return FieldError(field+".app", "must be 1–128 printable ASCII characters without spaces")
		}
		tok := r.FCMToken + r.APNsToken
		if len(tok) > 4096 || !isKey(tok) {
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
	n.Lane = n.Category.Lane()
	if r.SendAt != nil && r.SendAt.After(now) {
		n.Status = StatusScheduled
	}
	return n
}

// Values of Data[AlimTalkFallbackKey] on the alimtalk channel's content: a send's own choice of
// fallback for a recipient KakaoTalk cannot reach, over the configured default.
const (
	AlimTalkFallbackKey  = "alimtalk_fallback"
	AlimTalkFallbackSMS  = "sms"
	AlimTalkFallbackNone = "none"
)

// validateAlimTalkRequest checks what the alimtalk channel sends: the template code (in the
// channel's content or the base content's data) and, when given, the fallback choice.
func validateAlimTalkRequest(r *SendRequest) error {
	c := r.Content.merge(r.ChannelContent[ChannelAlimTalk])
	field := "channel_content.alimtalk"
	if err := validateAlimTalk(field, c); err != nil {
		return err
	}
	switch c.Data[AlimTalkFallbackKey] {
	case "", AlimTalkFallbackSMS, AlimTalkFallbackNone:
	default:
		return FieldError(field+".data."+AlimTalkFallbackKey, "%q is not a fallback (want sms or none)", c.Data[AlimTalkFallbackKey])
	}
	return nil
}

// isKey reports whether s is one or more printable ASCII characters without spaces (0x21–0x7e):
// an idempotency key, a user id, an app or a device token. A byte loop, not a regular
// expression: it runs for every recipient of every request, twice (the API and ingest).
func isKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
