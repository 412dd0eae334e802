package notify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// CampaignState is the lifecycle of a campaign (docs/design.md §4).
type CampaignState string

const (
	CampaignScheduled        CampaignState = "SCHEDULED"          // waiting for SendAt
	CampaignRunning          CampaignState = "RUNNING"            // paging the audience and dispatching
	CampaignPaused           CampaignState = "PAUSED"             // paused by an operator; resumes on request
	CampaignPausedQuietHours CampaignState = "PAUSED_QUIET_HOURS" // held by its quiet hours until PausedUntil
	CampaignCompleted        CampaignState = "COMPLETED"          // every source exhausted and dispatched
	CampaignCanceled         CampaignState = "CANCELED"
	CampaignFailed           CampaignState = "FAILED"
)

// Final reports whether s is an end state.
func (s CampaignState) Final() bool {
	return s == CampaignCompleted || s == CampaignCanceled || s == CampaignFailed
}

// AudienceKind says where a source's members come from.
type AudienceKind string

const (
	// AudienceAppDevices is every registered device of one provider app, in registration order
	// (the store's per-app, sequence-ordered device index), optionally filtered.
	AudienceAppDevices AudienceKind = "app_devices"
	// AudienceUserList is an uploaded list of user ids (CampaignStore.AppendAudienceList).
	AudienceUserList AudienceKind = "user_list"
)

// Segment is one source of a campaign's audience.
type Segment struct {
	Kind AudienceKind `json:"kind"`
	// app_devices: the provider app and optional filters.
	App              string   `json:"app,omitempty"`
	Platform         Platform `json:"platform,omitempty"`          // only this platform
	Locale           string   `json:"locale,omitempty"`            // only this locale ("ko" also matches "ko-KR")
	MarketingConsent bool     `json:"marketing_consent,omitempty"` // only users who consented to marketing
	// user_list: the uploaded list.
	ListID string `json:"list_id,omitempty"`
}

// Audience is who a campaign goes to: its sources, paged one after another (e.g. active users,
// then dormant users), each with its own cursor.
type Audience struct {
	Sources []Segment `json:"sources"`
}

// MaxAudienceSources is how many sources an audience may have: each is paged on its own, and
// more than a few is a mistake rather than a segment.
const MaxAudienceSources = 20

// Validate reports every problem with the audience, naming fields as "audience.sources[i].x".
func (a Audience) Validate() error {
	if len(a.Sources) == 0 {
		return FieldError("audience.sources", "at least one source is required")
	}
	if len(a.Sources) > MaxAudienceSources {
		return FieldError(fmt.Sprintf("audience.sources[%d]", MaxAudienceSources), "at most %d sources", MaxAudienceSources)
	}
	var errs []error
	for i, s := range a.Sources {
		f := fmt.Sprintf("audience.sources[%d]", i)
		if j := slices.Index(a.Sources[:i], s); j >= 0 {
			// The same members twice: a member would be sent to once per copy.
			errs = append(errs, FieldError(f, "the same source as audience.sources[%d]", j))
			continue
		}
		if len(s.App) > 128 || (s.App != "" && !isKey(s.App)) {
			errs = append(errs, FieldError(f+".app", "must be 1–128 printable ASCII characters without spaces"))
		}
		if s.Locale != "" && !ValidLocale(s.Locale) {
			errs = append(errs, FieldError(f+".locale", "not a locale tag (e.g. \"ko\", \"en-US\")"))
		}
		switch s.Kind {
		case AudienceAppDevices:
			if s.App == "" {
				errs = append(errs, FieldError(f+".app", "an app_devices source needs the provider app"))
			}
			if s.Platform != "" && !s.Platform.Valid() {
				errs = append(errs, FieldError(f+".platform", "unknown platform %q (fcm, apns, webpush)", s.Platform))
			}
		case AudienceUserList:
			if s.ListID == "" {
				errs = append(errs, FieldError(f+".list_id", "a user_list source needs the uploaded list's id"))
			}
		default:
			errs = append(errs, FieldError(f+".kind", "unknown source kind %q (app_devices, user_list)", s.Kind))
		}
	}
	return errors.Join(errs...)
}

// SourceCursor is how far one source has been read: every member with Seq ≤ LastSeq is
// dispatched. Done is set once a page comes back short.
type SourceCursor struct {
	LastSeq int64 `json:"last_seq"`
	Done    bool  `json:"done"`
}

// CampaignCursor is where a campaign stands. It is saved after every page, conditionally on
// the previous value, so two runners can never both advance it and a restart resumes exactly
// after the last committed member (`seq > LastSeq`, never `>=`).
type CampaignCursor struct {
	Sources []SourceCursor `json:"sources"`
	// Members is how many recipients have been appended to the campaign's notification (its
	// RecipientCount); it moves in the same write as Sources.
	Members int `json:"members"`
	// ChunksEnqueued is how many prepare chunks of the notification have been enqueued; chunks
	// in [ChunksEnqueued, ceil(Members/chunk)) are committed but still to be enqueued.
	ChunksEnqueued int `json:"chunks_enqueued"`
}

// Equal reports whether two cursors are the same.
func (c CampaignCursor) Equal(o CampaignCursor) bool {
	if c.Members != o.Members || c.ChunksEnqueued != o.ChunksEnqueued || len(c.Sources) != len(o.Sources) {
		return false
	}
	for i := range c.Sources {
		if c.Sources[i] != o.Sources[i] {
			return false
		}
	}
	return true
}

// Exhausted reports whether every source is done.
func (c CampaignCursor) Exhausted() bool {
	for _, s := range c.Sources {
		if !s.Done {
			return false
		}
	}
	return true
}

// Clone returns a copy that shares nothing with c.
func (c CampaignCursor) Clone() CampaignCursor {
	c.Sources = append([]SourceCursor(nil), c.Sources...)
	return c
}

// CampaignProgress is read from the campaign's notification: its counters move atomically with
// the deliveries (DeliveryStore), so progress is exact at any moment.
type CampaignProgress struct {
	Members int `json:"members"` // recipients dispatched so far
	Total   int `json:"total"`   // deliveries created so far
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// Pending is the deliveries created and not yet in an end state, plus the members
	// dispatched whose chunk is not prepared yet (Unprepared): a member is counted as pending
	// until its deliveries exist, so a campaign whose members are one delivery each (devices)
	// always has sent + failed + skipped + pending = members.
	Pending int `json:"pending"`
	// Unprepared is how many of Members have no deliveries yet (their chunk is queued for
	// prepare); it is part of Pending.
	Unprepared      int            `json:"unprepared"`
	SkippedByReason map[string]int `json:"skipped_by_reason,omitempty"`
	FailedByReason  map[string]int `json:"failed_by_reason,omitempty"`
	// Unpaged is how many audience members are not dispatched yet, at most (AudienceSource.Remaining).
	Unpaged int `json:"unpaged"`
}

// ProgressOf is a campaign's progress from its cursor and its notification's stats; unpaged
// comes from the audience.
func ProgressOf(c CampaignCursor, st Stats, unpaged int) CampaignProgress {
	t := st.Sum()
	unprepared := max(0, c.Members-st.MembersPrepared)
	if st.MembersPrepared == 0 && st.ChunksTotal > 0 && st.ChunksPrepared >= st.ChunksTotal {
		unprepared = 0 // prepared before members were counted: every chunk is
	}
	return CampaignProgress{
		Members: c.Members, Total: t.Total, Sent: t.Sent, Failed: t.Failed, Skipped: t.Skipped,
		Pending: t.Total - t.Done() + unprepared, Unprepared: unprepared,
		SkippedByReason: st.SkippedByReason, FailedByReason: st.FailedByReason,
		Unpaged: unpaged,
	}
}

// Unpaged sums Remaining over the sources of a that cursor c has not finished; a source the
// store rejects as invalid counts as 0, so reading a campaign never fails on its estimate.
func Unpaged(ctx context.Context, src AudienceSource, a Audience, c CampaignCursor) (int, error) {
	total := 0
	for i := range a.Sources {
		var after int64
		if i < len(c.Sources) {
			if c.Sources[i].Done {
				continue
			}
			after = c.Sources[i].LastSeq
		}
		n, err := src.Remaining(ctx, a, i, after)
		if IsCode(err, EINVALID) {
			continue // a source this store cannot size (its paging fails the campaign on its own)
		}
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Campaign is a Notification whose audience is a selector, sent page by page on the bulk lane
// by the steps in internal/campaign. Its notification has the campaign's ID.
type Campaign struct {
	ID      string `json:"id"`
	Service string `json:"service"`
	// Fingerprint identifies the request that created the campaign (the API's fingerprint of
	// it), so a create under the same idempotency key with another request is told apart from a
	// retry; empty for campaigns stored before fingerprints, which any retry matches.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Notification is the template: category, channels, content (with channel and locale
	// overrides), priority, TTL. Recipients are ignored; they are appended page by page.
	Notification Notification     `json:"notification"`
	Audience     Audience         `json:"audience"`
	QuietHours   QuietHours       `json:"quiet_hours"`
	AdPrefix     bool             `json:"ad_prefix,omitempty"` // prefix marketing titles with "(광고)"
	MaxRate      int              `json:"max_rate,omitempty"`  // recipients per second dispatched; 0: no limit
	SendAt       *time.Time       `json:"send_at,omitempty"`
	State        CampaignState    `json:"state"`
	PausedUntil  *time.Time       `json:"paused_until,omitempty"` // PAUSED_QUIET_HOURS: when the window opens
	Error        string           `json:"error,omitempty"`        // FAILED: why
	Cursor       CampaignCursor   `json:"cursor"`
	Progress     CampaignProgress `json:"progress"` // filled by GetCampaign
	CreatedAt    time.Time        `json:"created_at"`
	UpdatedAt    time.Time        `json:"updated_at"`
	StartedAt    *time.Time       `json:"started_at,omitempty"`
	FinishedAt   *time.Time       `json:"finished_at,omitempty"`
}

// StartedOnCreate is the StartedAt a campaign is stored with: one created RUNNING starts at
// CreatedAt (the first RUNNING, as SetCampaignState records it for the others).
func (c *Campaign) StartedOnCreate() *time.Time {
	if c.StartedAt == nil && c.State == CampaignRunning {
		t := c.CreatedAt
		return &t
	}
	return c.StartedAt
}

// Validate reports every problem with a campaign to be created.
func (c *Campaign) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, FieldError("id", "is required"))
	}
	if c.Service == "" {
		errs = append(errs, FieldError("service", "is required"))
	}
	if len(c.Notification.Channels) == 0 {
		errs = append(errs, FieldError("channels", "at least one channel is required"))
	}
	for i, ch := range c.Notification.Channels {
		if !ch.Valid() {
			errs = append(errs, FieldError(fmt.Sprintf("channels[%d]", i), "unknown channel %q", ch))
		}
		if ch == ChannelAlimTalk && c.Notification.Category == CategoryMarketing {
			errs = append(errs, FieldError(fmt.Sprintf("channels[%d]", i), "alimtalk is informational only: a marketing campaign can't use it"))
		}
		if ch == ChannelAlimTalk {
			cc := c.Notification.Content.merge(c.Notification.ChannelContent[ChannelAlimTalk])
			errs = append(errs, validateAlimTalk("channel_content.alimtalk", cc))
		}
	}
	if c.Notification.Category != CategoryMarketing && c.Notification.Category != CategoryTransactional {
		errs = append(errs, FieldError("category", "must be marketing or transactional"))
	}
	if c.MaxRate < 0 {
		errs = append(errs, FieldError("max_rate", "must not be negative"))
	}
	errs = append(errs, validateContents(&c.Notification))
	errs = append(errs, c.Audience.Validate(), c.QuietHours.Validate())
	return errors.Join(errs...)
}

// validateContents checks every content variant of a campaign's template, in a fixed order.
func validateContents(n *Notification) error {
	if err := validateContent("content", n.Content); err != nil {
		return err
	}
	for _, ch := range slices.Sorted(maps.Keys(n.ChannelContent)) {
		if err := validateContent("channel_content."+string(ch), n.ChannelContent[ch]); err != nil {
			return err
		}
	}
	for _, l := range slices.Sorted(maps.Keys(n.Localized)) {
		if err := validateContent("localized."+l, n.Localized[l]); err != nil {
			return err
		}
	}
	return nil
}

// CampaignTransition is a state change and what goes with it.
type CampaignTransition struct {
	To          CampaignState
	PausedUntil *time.Time // kept only for PAUSED_QUIET_HOURS
	Error       string     // kept only for FAILED
	At          time.Time  // becomes UpdatedAt (StartedAt on the first RUNNING, FinishedAt on a final state)
	// SendAt, when set, replaces the campaign's send_at (a reschedule, with To SCHEDULED).
	SendAt *time.Time
}

// CampaignStore keeps campaigns, their cursors and uploaded audience lists. Adapters pass
// internal/notify/campaigntest.
type CampaignStore interface {
	// CreateCampaign stores c with c.State and an empty cursor (one SourceCursor per source),
	// together with its notification — c.Notification with ID c.ID, Service c.Service, lane bulk,
	// status DISPATCHING and no recipients — as one step; one created RUNNING has StartedAt =
	// CreatedAt. If a campaign with c.ID exists it returns the stored one and created=false.
	// EINVALID if c.ID is empty; ECONFLICT if a notification with that id exists without a
	// campaign.
	CreateCampaign(ctx context.Context, c *Campaign) (stored *Campaign, created bool, err error)
	// GetCampaign returns the campaign with Progress read from its notification. ENOTFOUND.
	GetCampaign(ctx context.Context, id string) (*Campaign, error)
	// LoadCampaign returns the campaign as GetCampaign does but with Progress left zero: its own
	// record only, without the notification's counters or the audience's Remaining, which can
	// cost as much as reading the audience. The steps, which read the campaign at every page and
	// never its progress, use it. ENOTFOUND.
	LoadCampaign(ctx context.Context, id string) (*Campaign, error)
	// ListCampaigns returns the campaigns in any of states (all when none), oldest first, with
	// Progress left zero.
	ListCampaigns(ctx context.Context, states ...CampaignState) ([]*Campaign, error)
	// SaveCursor moves the cursor from expected to next and appends recipients to the campaign's
	// notification (positions expected.Members onward), as one step, so the cursor never runs
	// ahead of or behind what was dispatched. ECONFLICT if the stored cursor is not expected (a
	// second runner, or a retried step, already advanced it) or the campaign is in a final state;
	// EINVALID if next.Members != expected.Members+len(recipients) or next has a different number
	// of sources; ENOTFOUND.
	SaveCursor(ctx context.Context, id string, expected, next CampaignCursor, recipients []Recipient) error
	// SetCampaignState applies t if the current state is one of from (any when from is empty).
	// ECONFLICT if it is not; ENOTFOUND.
	SetCampaignState(ctx context.Context, id string, t CampaignTransition, from ...CampaignState) error
	// AppendAudienceList appends user ids to the uploaded list listID (created on first use),
	// giving them increasing sequence numbers after any already there, and returns the last one.
	AppendAudienceList(ctx context.Context, listID string, userIDs []string) (lastSeq int64, err error)
	// ReservedCampaignLister pages the SCHEDULED campaigns (see its contract in reserved.go).
	ReservedCampaignLister
}

// Member is one entry of an audience source, in the order paging returns it.
type Member struct {
	Seq    int64  `json:"seq"`
	UserID string `json:"user_id"`
	// Token and Platform name the device of an app-devices source: such an audience addresses
	// devices, so a user with two phones is two members, each reached once. Empty for user lists.
	Token    string   `json:"token,omitempty"`
	Platform Platform `json:"platform,omitempty"`
}

// AudienceSource pages the members of an audience's sources.
type AudienceSource interface {
	// Page returns up to limit members of a.Sources[source] with Seq > afterSeq, in increasing
	// Seq order (keyset paging: `seq > after ORDER BY seq LIMIT n`, never OFFSET, so the cost of a
	// page does not grow with the position). Fewer than limit members means the source is
	// exhausted as of this read. Seqs are unique within a source and never reused, so a member
	// that is removed and added again comes after the cursor. A user with several devices in an
	// app_devices source appears once per device. EINVALID for a source index out of range, an
	// unknown kind or limit ≤ 0.
	Page(ctx context.Context, a Audience, source int, afterSeq int64, limit int) ([]Member, error)
	// Remaining is how many members of a.Sources[source] come after afterSeq, at most: exact
	// where the store can count cheaply, otherwise an upper bound (DynamoDB counts an app's
	// removed and filtered-out devices too; SQLite counts exactly up to 50,000 members left).
	// It sizes progress and ETA, never paging. EINVALID as Page.
	Remaining(ctx context.Context, a Audience, source int, afterSeq int64) (int, error)
}

// ApplyDefaults fills what a campaign request may leave out, and is idempotent: a marketing
// campaign with no quiet-hours policy at all gets DefaultQuietHours (the law's window; turning
// it off takes an explicit policy), a policy without a zone gets Asia/Seoul, and with AdPrefix
// every title of the template — base, per channel, per locale — starts with "(광고)".
func (c *Campaign) ApplyDefaults() {
	n := &c.Notification
	if n.Category == CategoryMarketing && c.QuietHours == (QuietHours{}) {
		c.QuietHours = DefaultQuietHours()
	}
	if c.QuietHours.TimeZone == "" {
		c.QuietHours.TimeZone = DefaultTimeZone
	}
	if !c.AdPrefix || n.Category != CategoryMarketing {
		return
	}
	n.Content.Title = AdTitle(n.Category, n.Content.Title, true)
	for ch, cc := range n.ChannelContent {
		if cc.Title != "" {
			cc.Title = AdTitle(n.Category, cc.Title, true)
			n.ChannelContent[ch] = cc
		}
	}
	for loc, lc := range n.Localized {
		if lc.Title != "" {
			lc.Title = AdTitle(n.Category, lc.Title, true)
			n.Localized[loc] = lc
		}
	}
}
