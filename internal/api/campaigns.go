package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"herald/internal/notify"
)

// Campaigns is what the campaign routes need: creating and reading campaigns (a
// notify.CampaignStore) and the operator transitions of the campaign steps (pause, resume,
// cancel: campaign.Steps locally, the state machine's API in AWS). Nil Options.Campaigns: the
// routes answer 501.
type Campaigns interface {
	// CreateCampaign stores c, or returns the one already stored under c.ID with created=false.
	CreateCampaign(ctx context.Context, c *notify.Campaign) (stored *notify.Campaign, created bool, err error)
	// GetCampaign returns the campaign with its progress. ENOTFOUND.
	GetCampaign(ctx context.Context, id string) (*notify.Campaign, error)
	// Reschedule moves a SCHEDULED campaign's send_at; Pause, Resume and Cancel move the
	// campaign. ECONFLICT when its state does not allow it.
	Reschedule(ctx context.Context, id string, at time.Time) error
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Cancel(ctx context.Context, id string) error
}

// campaignRequest is POST /v1/campaigns.
type campaignRequest struct {
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	Category       notify.Category  `json:"category,omitempty"` // default marketing
	Channels       []notify.Channel `json:"channels"`
	Content        notify.Content   `json:"content"`
	// Template names a stored template to render instead of Content: exactly one of the two.
	Template *notify.TemplateRef `json:"template,omitempty"`
	Audience notify.Audience     `json:"audience"`
	SendAt   *time.Time          `json:"send_at,omitempty"`
	// QuietHours absent: the law's 21:00–08:00 for marketing; {"enabled": false} turns it off.
	QuietHours *notify.QuietHours `json:"quiet_hours,omitempty"`
	AdPrefix   bool               `json:"ad_prefix,omitempty"`
	MaxRate    int                `json:"max_rate,omitempty"`
}

// campaignState answers POST /v1/campaigns and the transitions.
type campaignState struct {
	ID    string               `json:"id"`
	State notify.CampaignState `json:"state"`
}

// campaignView is GET /v1/campaigns/{id}.
type campaignView struct {
	ID          string               `json:"id"`
	State       notify.CampaignState `json:"state"`
	Category    notify.Category      `json:"category"`
	Channels    []notify.Channel     `json:"channels"`
	MaxRate     int                  `json:"max_rate"`
	QuietHours  notify.QuietHours    `json:"quiet_hours"`
	SendAt      *time.Time           `json:"send_at"`
	PausedUntil *time.Time           `json:"paused_until"`
	Error       string               `json:"error,omitempty"`
	CreatedAt   time.Time            `json:"created_at"`
	UpdatedAt   time.Time            `json:"updated_at"`
	StartedAt   *time.Time           `json:"started_at"`
	FinishedAt  *time.Time           `json:"finished_at"`
	Totals      campaignTotals       `json:"totals"`
	// RatePerSecond is the deliveries that reached an end state per second since the campaign
	// started; ETA extrapolates Remaining at that rate while it runs (null otherwise).
	RatePerSecond float64 `json:"rate_per_second"`
	// RecipientsPerSecond is the audience members dispatched per second since the campaign
	// started: the unit of MaxRate, which caps it.
	RecipientsPerSecond float64      `json:"recipients_per_second"`
	ETA                 *time.Time   `json:"eta"`
	Sources             []sourceView `json:"sources"`
}

// campaignTotals: Members are recipients dispatched so far, Total deliveries created from them.
// Remaining is the deliveries not yet in an end state plus the audience members not yet paged;
// it is exact (RemainingExact) once every source has been read, an estimate before (the audience
// is paged, never loaded up front).
type campaignTotals struct {
	Members        int  `json:"members"`
	Total          int  `json:"total"`
	Sent           int  `json:"sent"`
	Failed         int  `json:"failed"`
	Skipped        int  `json:"skipped"`
	Pending        int  `json:"pending"`
	Remaining      int  `json:"remaining"`
	RemainingExact bool `json:"remaining_exact"`
	// Audience is the campaign's recipients: those dispatched and those its sources have not
	// been read for yet — exact with RemainingExact, an estimate before.
	Audience        int            `json:"audience"`
	SkippedByReason map[string]int `json:"skipped_by_reason"`
	FailedByReason  map[string]int `json:"failed_by_reason"`
}

// sourceView is one audience source and how far its cursor has read.
type sourceView struct {
	Kind    notify.AudienceKind `json:"kind"`
	App     string              `json:"app,omitempty"`
	ListID  string              `json:"list_id,omitempty"`
	LastSeq int64               `json:"last_seq"`
	Done    bool                `json:"done"`
}

func (s *server) requireCampaigns(w http.ResponseWriter) bool {
	if s.campaigns == nil {
		writeNotImplemented(w, "campaigns are not available in this runtime")
		return false
	}
	return true
}

func (s *server) createCampaign(w http.ResponseWriter, r *http.Request) error {
	if !s.requireCampaigns(w) {
		return nil
	}
	ctx := r.Context()
	service := serviceOf(r)
	var req campaignRequest
	if err := s.decodeSendAt(w, r, &req); err != nil {
		return err
	}
	now := s.clock.Now()
	// A template is rendered now, once for the whole campaign: every page sends the same text.
	var rendered *notify.Rendered
	var tmpl *notify.Template
	if req.Template != nil {
		if err := notify.CheckContentOrTemplate(req.Template, req.Content); err != nil {
			return err
		}
		var err error
		if tmpl, rendered, err = notify.RenderTemplate(ctx, s.store, service, req.Template, req.Channels, "template", ""); err != nil {
			return err
		}
	}
	c, err := req.campaign(service, now, tmpl, rendered)
	if err != nil {
		return err
	}
	if err := s.checkAudienceApps(c.Audience); err != nil {
		return err
	}
	if err := s.scopeAudience(r, c); err != nil {
		return err
	}
	if req.IdempotencyKey != "" {
		// A campaign created with this key before campaign ids had their own prefix has the
		// key's notification id: a retry of that create is answered with it, not made twice.
		legacy := notify.NotificationIDFor(service, req.IdempotencyKey, now)
		if old, err := s.campaigns.GetCampaign(ctx, legacy); err == nil && old.Service == service {
			w.Header().Set("Location", "/v1/campaigns/"+url.PathEscape(old.ID))
			writeJSON(w, http.StatusOK, campaignState{ID: old.ID, State: old.State})
			return nil
		} else if err != nil && !notify.IsCode(err, notify.ENOTFOUND) {
			return fmt.Errorf("look up campaign %s: %w", legacy, err)
		}
	}
	stored, created, err := s.campaigns.CreateCampaign(ctx, c)
	if err != nil {
		if notify.IsCode(err, notify.ECONFLICT) {
			return notify.Wrap(notify.ECONFLICT, err, "idempotency_key is already used by a notification that is not a campaign")
		}
		return fmt.Errorf("create campaign %s: %w", c.ID, err)
	}
	if stored.Service != service {
		return notify.FieldError("idempotency_key", "already used")
	}
	if !created && stored.Fingerprint != "" && stored.Fingerprint != c.Fingerprint {
		return &notify.Error{Code: notify.EKEYREUSED, Field: "idempotency_key", Message: fmt.Sprintf(
			"idempotency_key already names campaign %s, created with a different request; use a new key for a new campaign", stored.ID)}
	}
	w.Header().Set("Location", "/v1/campaigns/"+url.PathEscape(stored.ID))
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, campaignState{ID: stored.ID, State: stored.State})
	return nil
}

// campaign validates the request and builds the campaign to store, naming the field of every
// problem.
// tmpl and rendered, when the request names a template, are the template and its rendering,
// which take the place of the request's content.
func (req *campaignRequest) campaign(service string, now time.Time, tmpl *notify.Template, rendered *notify.Rendered) (*notify.Campaign, error) {
	if err := notify.ValidateSendAt(req.SendAt, now); err != nil {
		return nil, err
	}
	if len(req.IdempotencyKey) > notify.MaxIdempotencyKey || (req.IdempotencyKey != "" && !printable.MatchString(req.IdempotencyKey)) {
		return nil, notify.FieldError("idempotency_key", "must be 1–%d printable ASCII characters without spaces", notify.MaxIdempotencyKey)
	}
	switch {
	case rendered != nil: // checked as it was stored and as it rendered
	case req.Content.Title == "" && req.Content.Body == "":
		return nil, notify.FieldError("content.body", "a title or a body is required")
	case len(req.Content.Title) > notify.MaxTitleBytes:
		return nil, notify.FieldError("content.title", "at most %d bytes", notify.MaxTitleBytes)
	case len(req.Content.Body) > notify.MaxBodyBytes:
		return nil, notify.FieldError("content.body", "at most %d bytes", notify.MaxBodyBytes)
	}
	if req.Category == "" {
		req.Category = notify.CategoryMarketing
	}
	id := notify.CampaignIDFor(service, req.IdempotencyKey, now)
	c := &notify.Campaign{
		ID: id, Service: service,
		Notification: notify.Notification{Category: req.Category, Channels: req.Channels, Content: req.Content},
		Audience:     req.Audience,
		AdPrefix:     req.AdPrefix,
		MaxRate:      req.MaxRate,
		State:        notify.CampaignRunning,
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	if rendered != nil {
		n := &c.Notification
		n.Content, n.ChannelContent, n.Localized = rendered.Content, rendered.ChannelContent, rendered.Localized
		n.TemplateName, n.TemplateVersion = tmpl.Name, tmpl.Version
	}
	if req.QuietHours != nil {
		c.QuietHours = *req.QuietHours
		if c.QuietHours.TimeZone == "" {
			// An explicit policy is kept as given, even {"enabled": false}, which would otherwise
			// read as "no policy" and get the default.
			c.QuietHours.TimeZone = notify.DefaultTimeZone
		}
	}
	if req.SendAt != nil && req.SendAt.After(now) {
		at := notify.ReservedTime(*req.SendAt) // whole seconds, as the schedule keeps it
		c.SendAt = &at
		c.State = notify.CampaignScheduled
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Fingerprint = req.fingerprint()
	return c, nil
}

// fingerprint identifies what a validated campaign request asks for, as
// notify.RequestFingerprint does a send request's: the SHA-256 of its canonical JSON with the
// defaults it may leave out filled in, so a retry matches and any change of meaning does not.
// A template is fingerprinted by its reference, not its rendering: a retry after the template
// changed is still the same request.
func (req *campaignRequest) fingerprint() string {
	c := *req
	if c.Category == "" {
		c.Category = notify.CategoryMarketing
	}
	if c.SendAt != nil {
		at := notify.ReservedTime(*c.SendAt)
		c.SendAt = &at
	}
	if c.QuietHours != nil && c.QuietHours.TimeZone == "" {
		q := *c.QuietHours
		q.TimeZone = notify.DefaultTimeZone
		c.QuietHours = &q
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

// ownCampaign returns the caller's campaign; another service's is reported like a missing one.
func (s *server) ownCampaign(r *http.Request, id string) (*notify.Campaign, error) {
	c, err := s.campaigns.GetCampaign(r.Context(), id)
	if notify.IsCode(err, notify.ENOTFOUND) || (err == nil && c.Service != serviceOf(r) && !s.operatorView(r)) {
		if !notify.IsCampaignID(id) {
			return nil, notify.Errorf(notify.ENOTFOUND, "campaign %s not found; a notification is at /v1/notifications/%s", id, id)
		}
		return nil, notify.Errorf(notify.ENOTFOUND, "campaign %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get campaign %s: %w", id, err)
	}
	return c, nil
}

func (s *server) getCampaign(w http.ResponseWriter, r *http.Request) error {
	if !s.requireCampaigns(w) {
		return nil
	}
	c, err := s.ownCampaign(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCampaignView(c, s.clock.Now()))
	return nil
}

func toCampaignView(c *notify.Campaign, now time.Time) campaignView {
	p := c.Progress
	v := campaignView{
		ID: c.ID, State: c.State, Category: c.Notification.Category, Channels: c.Notification.Channels,
		MaxRate: c.MaxRate, QuietHours: c.QuietHours, SendAt: utcPtr(c.SendAt), PausedUntil: utcPtr(c.PausedUntil),
		Error: c.Error, CreatedAt: utc(c.CreatedAt), UpdatedAt: utc(c.UpdatedAt),
		StartedAt: utcPtr(c.StartedAt), FinishedAt: utcPtr(c.FinishedAt),
		Totals: campaignTotals{Members: p.Members, Total: p.Total, Sent: p.Sent, Failed: p.Failed,
			Skipped: p.Skipped, Pending: p.Pending, Remaining: p.Pending + p.Unpaged,
			RemainingExact: c.Cursor.Exhausted() || c.State == notify.CampaignCompleted, Audience: p.Members + p.Unpaged,
			SkippedByReason: orEmpty(p.SkippedByReason), FailedByReason: orEmpty(p.FailedByReason)},
		Sources: make([]sourceView, 0, len(c.Audience.Sources)),
	}
	if v.Channels == nil {
		v.Channels = []notify.Channel{}
	}
	if c.StartedAt != nil {
		end := now
		if c.FinishedAt != nil {
			end = *c.FinishedAt
		}
		if secs := end.Sub(*c.StartedAt).Seconds(); secs > 0 {
			v.RatePerSecond = math.Round(float64(p.Sent+p.Failed+p.Skipped)/secs*10) / 10
			v.RecipientsPerSecond = math.Round(float64(p.Members)/secs*10) / 10
		}
	}
	if c.State == notify.CampaignRunning && v.RatePerSecond > 0 {
		eta := now.Add(time.Duration(float64(v.Totals.Remaining) / v.RatePerSecond * float64(time.Second))).UTC().Truncate(time.Second)
		v.ETA = &eta
	}
	for i, src := range c.Audience.Sources {
		sv := sourceView{Kind: src.Kind, App: src.App, ListID: unscopedListID(c.Service, src.ListID)}
		if i < len(c.Cursor.Sources) {
			sv.LastSeq, sv.Done = c.Cursor.Sources[i].LastSeq, c.Cursor.Sources[i].Done
		}
		v.Sources = append(v.Sources, sv)
	}
	return v
}

func orEmpty(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// rescheduleCampaign is PATCH /v1/campaigns/{id} {"send_at"}: a reserved campaign starts at the
// new time instead.
func (s *server) rescheduleCampaign(w http.ResponseWriter, r *http.Request) (err error) {
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditCampaignReschedule, notify.AuditTargetCampaign, r.PathValue("id"), params, &err)
	if !s.requireCampaigns(w) {
		return nil
	}
	var req rescheduleRequest
	if err := s.decodeSendAt(w, r, &req); err != nil {
		return err
	}
	if req.SendAt != nil {
		params["send_at"] = notify.ReservedTime(*req.SendAt).Format(time.RFC3339)
	}
	if err := validSendAt(req.SendAt, s.clock.Now()); err != nil {
		return err
	}
	id := r.PathValue("id")
	old, err := s.ownCampaign(r, id)
	if err != nil {
		return err
	}
	params["previous_send_at"] = timeParam(old.SendAt)
	if err := s.campaigns.Reschedule(r.Context(), id, notify.ReservedTime(*req.SendAt)); err != nil {
		return err
	}
	c, err := s.ownCampaign(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCampaignView(c, s.clock.Now()))
	return nil
}

func (s *server) pauseCampaign(w http.ResponseWriter, r *http.Request) (err error) {
	defer s.audit(w, r, notify.AuditCampaignPause, notify.AuditTargetCampaign, r.PathValue("id"), nil, &err)
	return s.transitionCampaign(w, r, "pause", s.campaigns.Pause)
}

func (s *server) resumeCampaign(w http.ResponseWriter, r *http.Request) (err error) {
	defer s.audit(w, r, notify.AuditCampaignResume, notify.AuditTargetCampaign, r.PathValue("id"), nil, &err)
	return s.transitionCampaign(w, r, "resume", s.campaigns.Resume)
}

// cancelCampaign cancels a campaign that has not finished. Cancelling twice answers the same
// (200, CANCELED), as for notifications; a campaign that already ended otherwise (COMPLETED,
// FAILED) is a 409 already_finished.
func (s *server) cancelCampaign(w http.ResponseWriter, r *http.Request) (err error) {
	defer s.audit(w, r, notify.AuditCampaignCancel, notify.AuditTargetCampaign, r.PathValue("id"), nil, &err)
	return s.transitionCampaign(w, r, "cancel", s.campaigns.Cancel)
}

func (s *server) transitionCampaign(w http.ResponseWriter, r *http.Request, verb string, move func(context.Context, string) error) error {
	if !s.requireCampaigns(w) {
		return nil
	}
	id := r.PathValue("id")
	c, err := s.ownCampaign(r, id)
	if err != nil {
		return err
	}
	canceled := func(c *notify.Campaign) bool { return verb == "cancel" && c.State == notify.CampaignCanceled }
	if canceled(c) {
		writeJSON(w, http.StatusOK, campaignState{ID: id, State: c.State})
		return nil
	}
	if err := move(r.Context(), id); err != nil {
		if notify.IsCode(err, notify.ECONFLICT) {
			if c, gerr := s.ownCampaign(r, id); gerr == nil {
				switch {
				case canceled(c): // a concurrent cancel won: the answer is the same
					writeJSON(w, http.StatusOK, campaignState{ID: id, State: c.State})
					return nil
				case c.State.Final():
					return notify.Wrap(notify.EFINISHED, err, "campaign %s is %s: it already ended and can't %s", id, c.State, verb)
				}
				return notify.Wrap(notify.ECONFLICT, err, "campaign %s is %s; it can't %s", id, c.State, verb)
			}
			return notify.Wrap(notify.ECONFLICT, err, "campaign %s can't %s in its current state", id, verb)
		}
		return fmt.Errorf("%s campaign %s: %w", verb, id, err)
	}
	if c, err = s.ownCampaign(r, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, campaignState{ID: id, State: c.State})
	return nil
}
