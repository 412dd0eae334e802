package notify

import (
	"strings"
	"time"
)

// Channel is a way of reaching a person.
type Channel string

const (
	ChannelPush  Channel = "push"  // FCM, APNs or Web Push, per device
	ChannelEmail Channel = "email" // SES
	ChannelSMS   Channel = "sms"   // Twilio
	ChannelInbox Channel = "inbox" // the user's in-app inbox
	// ChannelAlimTalk is Kakao AlimTalk to a Korean mobile number (through Solapi): approved
	// templates, informational only, with an optional SMS/LMS fallback for a recipient KakaoTalk
	// cannot reach.
	ChannelAlimTalk Channel = "alimtalk"
)

// Channels lists every channel Herald accepts, in a stable order.
var Channels = []Channel{ChannelPush, ChannelEmail, ChannelSMS, ChannelInbox, ChannelAlimTalk}

// Valid reports whether c is a known channel.
func (c Channel) Valid() bool {
	for _, k := range Channels {
		if c == k {
			return true
		}
	}
	return false
}

// Category decides which rules apply: marketing needs consent and respects quiet hours.
type Category string

const (
	CategoryTransactional Category = "transactional"
	CategoryMarketing     Category = "marketing"
)

// Priority maps to provider priorities (FCM android priority, apns-priority 10/5).
type Priority string

const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
)

// Lane separates real-time traffic from bulk traffic; each stage has one queue per lane.
type Lane string

const (
	LaneRealtime Lane = "realtime"
	LaneBulk     Lane = "bulk"
)

// Lane is the lane a notification of category c takes: marketing the bulk lane, everything else
// the realtime lane.
func (c Category) Lane() Lane {
	if c == CategoryMarketing {
		return LaneBulk
	}
	return LaneRealtime
}

// NotificationStatus is the lifecycle of a notification as a whole.
type NotificationStatus string

const (
	StatusAccepted      NotificationStatus = "ACCEPTED"
	StatusScheduled     NotificationStatus = "SCHEDULED"
	StatusProcessing    NotificationStatus = "PROCESSING"
	StatusSent          NotificationStatus = "SENT"
	StatusPartiallySent NotificationStatus = "PARTIALLY_SENT"
	StatusFailed        NotificationStatus = "FAILED"
	// StatusSkipped: every delivery was skipped (suppressed, opted out, no consent, no
	// address…): nothing was sent, and nothing failed either.
	StatusSkipped  NotificationStatus = "SKIPPED"
	StatusCanceled NotificationStatus = "CANCELED"

	// StatusDispatching is a campaign's notification while the campaign is still appending
	// recipients page by page. Record finalizes only PROCESSING (and ACCEPTED) notifications, so a
	// campaign whose dispatched pages have all been sent is not finished early; the campaign's
	// Finish step moves it to PROCESSING once the audience is exhausted.
	StatusDispatching NotificationStatus = "DISPATCHING"
)

// Final reports whether s is an end state.
func (s NotificationStatus) Final() bool {
	switch s {
	case StatusSent, StatusPartiallySent, StatusFailed, StatusSkipped, StatusCanceled:
		return true
	}
	return false
}

// Content is what a person sees on one channel. Title is the email subject.
type Content struct {
	Title    string            `json:"title,omitempty"`
	Body     string            `json:"body,omitempty"`
	HTML     string            `json:"html,omitempty"` // email only
	Data     map[string]string `json:"data,omitempty"` // push data payload / inbox extras
	Link     string            `json:"link,omitempty"` // deep link or URL opened on tap/click
	ImageURL string            `json:"image_url,omitempty"`
}

// merge returns c with every non-empty field of o laid over it.
func (c Content) merge(o Content) Content {
	if o.Title != "" {
		c.Title = o.Title
	}
	if o.Body != "" {
		c.Body = o.Body
	}
	if o.HTML != "" {
		c.HTML = o.HTML
	}
	if o.Link != "" {
		c.Link = o.Link
	}
	if o.ImageURL != "" {
		c.ImageURL = o.ImageURL
	}
	if len(o.Data) > 0 {
		d := make(map[string]string, len(c.Data)+len(o.Data))
		for k, v := range c.Data {
			d[k] = v
		}
		for k, v := range o.Data {
			d[k] = v
		}
		c.Data = d
	}
	return c
}

// Recipient is one addressee: a user id (resolved through devices, contacts and preferences)
// or exactly one direct address.
type Recipient struct {
	UserID    string `json:"user_id,omitempty"`
	Email     string `json:"email,omitempty"`
	Phone     string `json:"phone,omitempty"`
	FCMToken  string `json:"fcm_token,omitempty"`
	APNsToken string `json:"apns_token,omitempty"`
	App       string `json:"app,omitempty"` // provider app for a direct token; default "default"
}

// Notification is one request to tell some people something. It is immutable once accepted,
// apart from Status, Stats and the schedule.
type Notification struct {
	ID             string              `json:"id"`
	Service        string              `json:"service"`
	IdempotencyKey string              `json:"idempotency_key,omitempty"`
	Category       Category            `json:"category"`
	Channels       []Channel           `json:"channels"`
	Content        Content             `json:"content"`
	ChannelContent map[Channel]Content `json:"channel_content,omitempty"`
	Localized      map[string]Content  `json:"localized,omitempty"`  // by locale, e.g. "ko"
	Locale         string              `json:"locale,omitempty"`     // default locale
	Recipients     []Recipient         `json:"recipients,omitempty"` // empty when read back: see Store.GetRecipients
	RecipientCount int                 `json:"recipient_count"`
	CollapseID     string              `json:"collapse_id,omitempty"` // default: the notification id
	Priority       Priority            `json:"priority,omitempty"`
	TTL            time.Duration       `json:"ttl,omitempty"` // how long it may take to arrive (see ExpiresAt); inbox expiry
	SendAt         *time.Time          `json:"send_at,omitempty"`
	// Fingerprint identifies the request that made the notification (RequestFingerprint), so a
	// reused idempotency key with another request is told from a retry. Empty for notifications
	// stored before fingerprints existed, and for campaigns.
	Fingerprint string `json:"fingerprint,omitempty"`
	// TemplateName and TemplateVersion name the stored template the content was rendered from;
	// empty for content sent as it is.
	TemplateName    string `json:"template_name,omitempty"`
	TemplateVersion int    `json:"template_version,omitempty"`
	Lane            Lane   `json:"lane,omitempty"`
	// BatchClaims is set on a realtime notification that ingest hands to the stage queues
	// without an AlimTalk channel: its send batches are claimed whole, as the bulk lane's, and
	// each delivery is stored once, with its outcome (BatchStore.RecordBatch), instead of being
	// created, claimed and completed one by one (docs/design.md §3).
	BatchClaims bool `json:"batch_claims,omitempty"`
	// QuietHours is the night-time rule for this notification's marketing pushes and SMS; nil
	// means the deployment's default (a campaign sets its own).
	QuietHours *QuietHours        `json:"quiet_hours,omitempty"`
	Status     NotificationStatus `json:"status"`
	Stats      Stats              `json:"stats"`
	// Express holds the deliveries of a notification on the express path (see Express); nil
	// for every other notification. Not part of the API's view: its deliveries are listed with
	// the others.
	Express *Express `json:"-"`
	// Accepted is when the request was accepted (its ingest message was sent), when ingest
	// knows it: a user erased since is sent nothing by it (ErasedBefore), though the
	// notification was stored later. Not stored: it travels to prepare in the prepare message.
	Accepted  time.Time `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// EffectiveCollapseID is the id providers use to replace rather than duplicate a message: a
// resend after a crash replaces the first copy on the device.
func (n *Notification) EffectiveCollapseID() string {
	if n.CollapseID != "" {
		return n.CollapseID
	}
	return n.ID
}

// ExpiresAt is when n's deliveries stop being worth sending: its TTL from when it was due (its
// send_at, or its creation). ok is false for a notification without a TTL, which never expires.
func (n *Notification) ExpiresAt() (at time.Time, ok bool) {
	if n.TTL <= 0 {
		return time.Time{}, false
	}
	due := n.CreatedAt
	if n.SendAt != nil && n.SendAt.After(due) {
		due = *n.SendAt
	}
	return due.Add(n.TTL), true
}

// Expired reports whether n's TTL has run out at now.
func (n *Notification) Expired(now time.Time) bool {
	at, ok := n.ExpiresAt()
	return ok && !now.Before(at)
}

// HasChannel reports whether n asks for channel c.
func (n *Notification) HasChannel(c Channel) bool {
	for _, k := range n.Channels {
		if k == c {
			return true
		}
	}
	return false
}

// ContentFor resolves what is shown on channel c for a recipient in locale: the base content,
// then the channel's override, then the locale's override.
func (n *Notification) ContentFor(c Channel, locale string) Content {
	out := n.Content
	if cc, ok := n.ChannelContent[c]; ok {
		out = out.merge(cc)
	}
	if locale == "" {
		locale = n.Locale
	}
	if lc, ok := n.Localized[locale]; ok {
		out = out.merge(lc)
	} else if len(locale) > 2 {
		if lc, ok := n.Localized[locale[:2]]; ok {
			out = out.merge(lc)
		}
	}
	return out
}

// Stats are a notification's aggregates, kept by the Store atomically with delivery transitions.
type Stats struct {
	ChunksTotal    int                      `json:"chunks_total"`
	ChunksPrepared int                      `json:"chunks_prepared"`
	Channels       map[Channel]ChannelStats `json:"channels,omitempty"`
	// SkippedByReason and FailedByReason count the deliveries that ended skipped or failed, by
	// their reason (opted_out, quiet_hours, unregistered, …).
	SkippedByReason map[string]int `json:"skipped_by_reason,omitempty"`
	FailedByReason  map[string]int `json:"failed_by_reason,omitempty"`
	// MembersPrepared is how many recipients the prepared chunks of the bulk lane held
	// (CountMembers): a campaign's members beyond it are dispatched but not yet resolved into
	// deliveries.
	MembersPrepared int `json:"members_prepared,omitempty"`
}

// reasonMark starts the counter keys that count outcomes by reason. Stores keep them beside the
// per-channel counters, changed in the same atomic update, and SplitReasons moves them out of
// Channels when stats are read.
const reasonMark = "~"

// membersKey is the counter key under which a bulk chunk's recipients are counted (its Total),
// moved into Stats.MembersPrepared by SplitReasons.
const membersKey Channel = "#members"

// CountMembers adds n prepared recipients to a chunk's delta (BatchStore.AddChunk), so the
// members resolved so far are counted in the same write as the chunk's deliveries.
func CountMembers(delta map[Channel]ChannelStats, n int) {
	cs := delta[membersKey]
	cs.Total += n
	delta[membersKey] = cs
}

// CountDelivery adds one delivery of channel ch in status st to delta: to Total when created is
// set, to its outcome when st is terminal, and, skipped or failed with a reason, to that reason.
// An EXPIRED delivery counts as failed with reason "expired", whatever reason it carries.
func CountDelivery(delta map[Channel]ChannelStats, ch Channel, st DeliveryStatus, reason string, created bool) {
	cs := delta[ch]
	if created {
		cs.Total++
	}
	cs.AddOutcome(st)
	delta[ch] = cs
	if st == DeliveryExpired {
		reason = ReasonExpired
	}
	if reason != "" && (st == DeliverySkipped || st == DeliveryFailed || st == DeliveryExpired) {
		k := Channel(reasonMark + reason)
		rs := delta[k]
		rs.AddOutcome(st)
		delta[k] = rs
	}
}

// SplitReasons moves the by-reason counters a store read into SkippedByReason and
// FailedByReason, and the members counter into MembersPrepared, leaving only real channels in
// Channels.
func (s *Stats) SplitReasons() {
	for k, cs := range s.Channels {
		if k == membersKey {
			s.MembersPrepared += cs.Total
			delete(s.Channels, k)
			continue
		}
		reason, ok := strings.CutPrefix(string(k), reasonMark)
		if !ok {
			continue
		}
		delete(s.Channels, k)
		if cs.Skipped != 0 {
			if s.SkippedByReason == nil {
				s.SkippedByReason = map[string]int{}
			}
			s.SkippedByReason[reason] += cs.Skipped
		}
		if cs.Failed != 0 {
			if s.FailedByReason == nil {
				s.FailedByReason = map[string]int{}
			}
			s.FailedByReason[reason] += cs.Failed
		}
	}
	if len(s.Channels) == 0 {
		s.Channels = nil
	}
}

// ChannelStats counts deliveries of one channel by outcome. Failed includes the deliveries that
// ended EXPIRED (their TTL passed before they could be sent): they were not delivered, and
// FailedByReason counts them under "expired".
type ChannelStats struct {
	Total   int `json:"total"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// AddOutcome counts one delivery that reached status st; non-terminal statuses count nowhere.
func (c *ChannelStats) AddOutcome(st DeliveryStatus) {
	switch st {
	case DeliverySent:
		c.Sent++
	case DeliveryFailed, DeliveryExpired:
		c.Failed++
	case DeliverySkipped:
		c.Skipped++
	}
}

// Done is how many deliveries reached an end state.
func (c ChannelStats) Done() int { return c.Sent + c.Failed + c.Skipped }

// Sum adds up all channels.
func (s Stats) Sum() ChannelStats {
	var t ChannelStats
	for _, c := range s.Channels {
		t.Total += c.Total
		t.Sent += c.Sent
		t.Failed += c.Failed
		t.Skipped += c.Skipped
	}
	return t
}

// Complete reports whether every chunk is prepared and every delivery is in an end state.
func (s Stats) Complete() bool {
	t := s.Sum()
	return s.ChunksPrepared >= s.ChunksTotal && t.Done() >= t.Total
}

// FinalStatus is the end state that complete stats imply: SENT when something was sent and
// nothing failed, PARTIALLY_SENT when some sent and some failed, FAILED when nothing was sent
// and something failed (an expired delivery is a failed one), SKIPPED when every delivery was
// skipped. Skipped deliveries never turn SENT into anything else. A notification with no
// deliveries at all — a campaign whose only channel is the inbox of an app's devices, delivered
// as one broadcast, or one whose audience turned out empty — had nothing to fail: SENT.
func (s Stats) FinalStatus() NotificationStatus {
	t := s.Sum()
	switch {
	case t.Total == 0:
		return StatusSent
	case t.Sent > 0 && t.Failed == 0:
		return StatusSent
	case t.Sent > 0:
		return StatusPartiallySent
	case t.Failed == 0 && t.Skipped > 0:
		return StatusSkipped
	default:
		return StatusFailed
	}
}
