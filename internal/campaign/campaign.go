// Package campaign runs campaigns (docs/design.md §4): a notification whose audience is a
// selector, paged with a keyset cursor and sent on the bulk lane. The steps — CheckWindow, FetchPage,
// SaveCursor, DispatchBatches, Finish — are plain functions over ports, so the AWS Step
// Functions state machine (one task per step) and the local Runner loop run the same code.
//
// # How a page becomes prepare work
//
// CreateCampaign stores the campaign together with its notification (same id, lane bulk, status
// DISPATCHING, no recipients). Each iteration:
//
//  1. CheckWindow decides run / wait / stop: SendAt not reached, operator pause, cancel, and the
//     campaign's quiet hours (marketing only; the campaign moves to PAUSED_QUIET_HOURS with
//     PausedUntil = the window's end and back to RUNNING when it opens).
//  2. DispatchBatches enqueues prepare messages (bulk lane) for every chunk that is committed
//     but not yet enqueued, then records ChunksEnqueued in the cursor. After a crash it re-sends
//     the chunks of the last page; prepare is idempotent per chunk and send claims each
//     delivery, so nothing is delivered twice.
//  3. FetchPage reads up to PageSize members after the saved per-source cursors, walking the
//     sources in order, and turns each member into a user recipient.
//  4. SaveCursor commits the page: in one store write the recipients are appended to the
//     notification and the cursor moves, conditional on the cursor read in 3. A second runner
//     (or a retried step) gets ECONFLICT and re-reads; the cursor can never run ahead of, or
//     behind, what was appended. Then back to 1 (whose step 2 dispatches the new chunks).
//  5. Finish, once every source is done and dispatched: the notification moves DISPATCHING →
//     PROCESSING and a record message is enqueued; record finalizes it when every delivery has
//     ended, exactly as for any notification.
//
// Why the order commit-then-dispatch: the notification's recipient list is the truth of what
// the campaign has reached; prepare messages only point into it. Appending and advancing the
// cursor atomically means a crash at any point either loses the page entirely (re-fetched from
// the same cursor) or keeps it entirely (re-dispatched from ChunksEnqueued).
//
// Why pages are whole chunks: prepare chunk k covers recipients [k·ChunkSize, (k+1)·ChunkSize)
// and marks the chunk prepared once. FetchPage fills PageSize (a multiple of ChunkSize) across
// sources and stops short only when every source is exhausted, so every commit but the last
// ends on a chunk boundary and no chunk is prepared before all its recipients are appended.
//
// Why record leaves the campaign alone until Finish: record finalizes only PROCESSING (or
// ACCEPTED) notifications; while DISPATCHING a campaign's counters may be momentarily complete
// between pages. Prepare re-reads a DISPATCHING notification when a chunk lies beyond its cached
// recipient count. Nothing else in the stages knows about campaigns.
//
// A user with several devices in an app_devices source is a member once per device; the
// repeated recipient resolves to the same delivery ids (DeliveryID hashes notification, channel
// and address), so the store's create-if-absent keeps one delivery per device.
//
// The inbox of an app_devices audience is one broadcast (notify.Broadcast), stored by SaveCursor
// before the first page and merged into the inbox reads of the users it targets, instead of an
// item per member: a million-device campaign writes one broadcast, and a user a marker only
// when they read or delete it (docs/design.md §6, §10).
package campaign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"herald/internal/notify"
)

// LargeSend is how many recipients make a send large enough for operators to hear of it: the
// large_send_started event is emitted when a campaign's dispatched members first reach it.
const LargeSend = notify.LargeSend

// Config tunes the steps. Zero fields take defaults.
type Config struct {
	// PageSize is how many members one FetchPage reads (default 5000); rounded down to a
	// multiple of the pipeline's chunk size, and at least one chunk.
	PageSize int
	// InboxTTL is how long a campaign's inbox broadcast lives when its notification has no TTL
	// (default 30 days, as the pipeline's inbox items).
	InboxTTL time.Duration
}

// Broadcasts stores a campaign's inbox broadcast (implemented by the stores' InboxStore).
type Broadcasts interface {
	PutBroadcast(ctx context.Context, b notify.Broadcast) error
	WithdrawBroadcast(ctx context.Context, id string, at time.Time) error
}

// Dispatcher is what the steps need of the pipeline (implemented by *pipeline.Pipeline).
type Dispatcher interface {
	// ChunkSize is how many recipients one prepare message covers.
	ChunkSize() int
	// EnqueuePrepare enqueues prepare messages for chunks [from, to) of n on n's lane, the k-th
	// delayed by delay(k).
	EnqueuePrepare(ctx context.Context, n *notify.Notification, from, to int, delay func(k int) time.Duration) error
	// EnqueueRecord asks record to look at n.
	EnqueueRecord(ctx context.Context, n *notify.Notification) error
}

// Deps are the ports the steps use.
type Deps struct {
	Campaigns     notify.CampaignStore
	Audience      notify.AudienceSource
	Notifications notify.NotificationStore
	Dispatcher    Dispatcher
	// Broadcasts stores the one inbox broadcast of a campaign with the inbox channel and an
	// app-devices source; such a campaign fails without it.
	Broadcasts Broadcasts
	Clock      notify.Clock // nil: system clock
	Logger     *slog.Logger // nil: slog.Default()
	// Events receives large_send_started, campaign_finished and campaign_failed; nil: they are
	// only logged (notify.LogEvents on Logger).
	Events notify.Events
	// InboxEvents hears each stored broadcast, for the users connected to the live inbox
	// stream; nil: none.
	InboxEvents notify.InboxEvents
}

// Steps are the campaign steps over their ports.
type Steps struct {
	d        Deps
	pageSize int
	chunk    int
	inboxTTL time.Duration
}

// New returns the steps.
func New(d Deps, cfg Config) *Steps {
	if d.Clock == nil {
		d.Clock = notify.SystemClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Events == nil {
		d.Events = notify.LogEvents{Logger: d.Logger}
	}
	if d.InboxEvents == nil {
		d.InboxEvents = notify.NopInboxEvents{}
	}
	chunk := d.Dispatcher.ChunkSize()
	if chunk <= 0 {
		chunk = 500
	}
	ps := cfg.PageSize
	if ps <= 0 {
		ps = 5000
	}
	ps = max(chunk, ps/chunk*chunk)
	ttl := cfg.InboxTTL
	if ttl <= 0 {
		ttl = 30 * 24 * time.Hour
	}
	return &Steps{d: d, pageSize: ps, chunk: chunk, inboxTTL: ttl}
}

// Action is what CheckWindow tells the caller to do next.
type Action string

const (
	ActionRun  Action = "run"  // fetch and dispatch the next page
	ActionWait Action = "wait" // check again at Until (Step Functions: a Wait state)
	ActionStop Action = "stop" // paused by an operator or finished: nothing to do until resumed
)

// Window is CheckWindow's verdict.
type Window struct {
	Action Action               `json:"action"`
	Until  time.Time            `json:"until,omitzero"`
	State  notify.CampaignState `json:"state"`
}

// CheckWindow decides whether campaign id may send now, moving it between SCHEDULED, RUNNING and
// PAUSED_QUIET_HOURS as time requires. A state changed concurrently (pause, cancel) wins: the
// transition's ECONFLICT makes it look again.
func (s *Steps) CheckWindow(ctx context.Context, id string) (Window, error) {
	for range 3 {
		c, err := s.d.Campaigns.LoadCampaign(ctx, id)
		if err != nil {
			return Window{}, fmt.Errorf("check window %s: %w", id, err)
		}
		w, to, from := s.window(c)
		if to == "" {
			return w, nil
		}
		t := notify.CampaignTransition{To: to, At: s.d.Clock.Now()}
		if to == notify.CampaignPausedQuietHours {
			t.PausedUntil = &w.Until
		}
		err = s.d.Campaigns.SetCampaignState(ctx, id, t, from...)
		if notify.IsCode(err, notify.ECONFLICT) {
			continue
		}
		if err != nil {
			return Window{}, fmt.Errorf("check window %s: %w", id, err)
		}
		switch to {
		case notify.CampaignRunning:
			s.d.Logger.InfoContext(ctx, "campaign running", "campaign_id", id, "from", c.State)
		case notify.CampaignPausedQuietHours:
			s.d.Logger.InfoContext(ctx, "campaign paused for quiet hours", "campaign_id", id, "until", w.Until)
		}
		return w, nil
	}
	return Window{}, fmt.Errorf("check window %s: %w", id, notify.Errorf(notify.ECONFLICT, "state keeps changing"))
}

// window is CheckWindow's pure decision: the verdict, and the transition (to, from) it needs.
func (s *Steps) window(c *notify.Campaign) (w Window, to notify.CampaignState, from []notify.CampaignState) {
	now := s.d.Clock.Now()
	st := c.State
	switch {
	case st.Final() || st == notify.CampaignPaused:
		return Window{Action: ActionStop, State: st}, "", nil
	case st == notify.CampaignScheduled && c.SendAt != nil && now.Before(*c.SendAt):
		return Window{Action: ActionWait, Until: *c.SendAt, State: st}, "", nil
	}
	if c.Notification.Category == notify.CategoryMarketing && c.QuietHours.IsQuietAt(now, c.QuietHours.TimeZone) {
		until := c.QuietHours.NextOpen(now, c.QuietHours.TimeZone)
		w = Window{Action: ActionWait, Until: until, State: notify.CampaignPausedQuietHours}
		if st == notify.CampaignPausedQuietHours && c.PausedUntil != nil && c.PausedUntil.Equal(until) {
			return w, "", nil
		}
		return w, notify.CampaignPausedQuietHours, []notify.CampaignState{st}
	}
	w = Window{Action: ActionRun, State: notify.CampaignRunning}
	if st == notify.CampaignRunning {
		return w, "", nil
	}
	return w, notify.CampaignRunning, []notify.CampaignState{st} // SCHEDULED or PAUSED_QUIET_HOURS
}

// Page is one fetched page: the cursor it was read from, the cursor after it, and its
// recipients in member order.
type Page struct {
	Expected   notify.CampaignCursor `json:"expected"`
	Next       notify.CampaignCursor `json:"next"`
	Recipients []notify.Recipient    `json:"recipients"`
}

// FetchPage reads the members after c's cursor: up to PageSize, walking the sources in order.
// A source that returns fewer members than asked is done; the page is short only when every
// source is done.
func (s *Steps) FetchPage(ctx context.Context, c *notify.Campaign) (Page, error) {
	p := Page{Expected: c.Cursor.Clone(), Next: c.Cursor.Clone()}
	for i := range c.Audience.Sources {
		if i >= len(p.Next.Sources) {
			return Page{}, notify.Errorf(notify.EINTERNAL, "fetch page %s: cursor has %d sources, audience %d",
				c.ID, len(p.Next.Sources), len(c.Audience.Sources))
		}
		cur := &p.Next.Sources[i]
		for !cur.Done && len(p.Recipients) < s.pageSize {
			want := s.pageSize - len(p.Recipients)
			ms, err := s.d.Audience.Page(ctx, c.Audience, i, cur.LastSeq, want)
			if err != nil {
				return Page{}, fmt.Errorf("fetch page %s source %d: %w", c.ID, i, err)
			}
			for _, m := range ms {
				p.Recipients = append(p.Recipients, memberRecipient(c.Audience.Sources[i], m))
				cur.LastSeq = m.Seq
			}
			if len(ms) < want {
				cur.Done = true
			}
		}
		if len(p.Recipients) >= s.pageSize {
			break
		}
	}
	p.Next.Members += len(p.Recipients)
	return p, nil
}

// memberRecipient is the recipient a member stands for: a user of a list, or one device (and its
// user, whose preferences still apply) of an app-devices source.
func memberRecipient(seg notify.Segment, m notify.Member) notify.Recipient {
	r := notify.Recipient{UserID: m.UserID}
	switch {
	case m.Token == "":
	case m.Platform == notify.PlatformAPNs:
		r.APNsToken, r.App = m.Token, seg.App
	default:
		// FCM, and web push: a member with a user is found among that user's devices by its
		// token, and the stored device's platform picks the provider (prepare's providerOf).
		r.FCMToken, r.App = m.Token, seg.App
	}
	return r
}

// SaveCursor commits p: its recipients are appended to the campaign's notification and the
// cursor moves from p.Expected to p.Next in one store write. ECONFLICT when someone else moved
// the cursor first; the caller re-reads and carries on from there.
//
// Before the first page commits, a campaign with the inbox channel stores its inbox broadcast:
// one write for every app-devices source, however many devices they hold (prepare writes no
// inbox item for a device member; docs/design.md §6). It goes first because PutBroadcast is
// idempotent and the first page is recognised by its cursor: a crash between the two writes redoes both,
// while the other order could commit the page and never write the broadcast.
func (s *Steps) SaveCursor(ctx context.Context, id string, p Page) error {
	if p.Expected.Members == 0 {
		if err := s.putBroadcast(ctx, id); err != nil {
			return fmt.Errorf("save cursor %s: %w", id, err)
		}
	}
	if err := s.d.Campaigns.SaveCursor(ctx, id, p.Expected, p.Next, p.Recipients); err != nil {
		return fmt.Errorf("save cursor %s: %w", id, err)
	}
	return nil
}

// putBroadcast stores campaign id's inbox broadcast, if it has one.
func (s *Steps) putBroadcast(ctx context.Context, id string) error {
	c, err := s.d.Campaigns.LoadCampaign(ctx, id)
	if err != nil {
		return err
	}
	b, ok := s.broadcastOf(c)
	if !ok {
		return nil
	}
	if s.d.Broadcasts == nil {
		return notify.Errorf(notify.EINVALID, "campaign %s sends to the inbox of an app's devices, but no broadcast store is configured", id)
	}
	if err := s.d.Broadcasts.PutBroadcast(ctx, b); err != nil {
		return err
	}
	s.d.Logger.InfoContext(ctx, "campaign inbox broadcast stored", "campaign_id", id, "targets", len(b.Targets))
	s.d.InboxEvents.PublishBroadcast(ctx, b)
	return nil
}

// broadcastOf is the inbox broadcast of c: its inbox content, expiring as prepare's inbox items
// do, targeting its app-devices sources. ok is false when c has no inbox channel or no such
// source (a user-list member still gets an inbox item of their own from prepare).
func (s *Steps) broadcastOf(c *notify.Campaign) (b notify.Broadcast, ok bool) {
	n := &c.Notification
	if !n.HasChannel(notify.ChannelInbox) {
		return b, false
	}
	for _, src := range c.Audience.Sources {
		if src.Kind == notify.AudienceAppDevices {
			b.Targets = append(b.Targets, notify.TargetOf(src))
		}
	}
	if len(b.Targets) == 0 {
		return b, false
	}
	created := n.CreatedAt
	if created.IsZero() {
		created = c.CreatedAt
	}
	ttl := s.inboxTTL
	if n.TTL > 0 {
		ttl = n.TTL
	}
	exp := created.Add(ttl)
	ct := n.ContentFor(notify.ChannelInbox, "")
	b.ID, b.Service, b.Category = c.ID, c.Service, n.Category
	b.Title, b.Body, b.Data, b.Link, b.ImageURL = ct.Title, ct.Body, ct.Data, ct.Link, ct.ImageURL
	b.CreatedAt, b.ExpiresAt = created, &exp
	return b, true
}

// DispatchBatches enqueues prepare messages for the chunks of c that are committed but not yet
// enqueued, spreading them over time at c.MaxRate, records how far it got, and returns how long
// the caller should wait before the next page so the campaign keeps to MaxRate.
func (s *Steps) DispatchBatches(ctx context.Context, c *notify.Campaign) (wait time.Duration, err error) {
	from, to := c.Cursor.ChunksEnqueued, s.chunks(c.Cursor.Members)
	if from >= to {
		return 0, nil
	}
	n, err := s.d.Notifications.GetNotification(ctx, c.ID)
	if err != nil {
		return 0, fmt.Errorf("dispatch %s: %w", c.ID, err)
	}
	// Informational while DISPATCHING (record does not finalize it yet); Finish sets the last value.
	if err := s.d.Notifications.SetChunksTotal(ctx, c.ID, to); err != nil {
		return 0, fmt.Errorf("dispatch %s: %w", c.ID, err)
	}
	var delay func(int) time.Duration
	if c.MaxRate > 0 {
		per := time.Duration(float64(s.chunk) / float64(c.MaxRate) * float64(time.Second))
		delay = func(k int) time.Duration { return min(time.Duration(k)*per, notify.MaxQueueDelay) }
		wait = time.Duration(to-from) * per
	}
	if err := s.d.Dispatcher.EnqueuePrepare(ctx, n, from, to, delay); err != nil {
		return 0, fmt.Errorf("dispatch %s: %w", c.ID, err)
	}
	if from*s.chunk < LargeSend && c.Cursor.Members >= LargeSend {
		s.emit(ctx, s.largeSend(c))
	}
	next := c.Cursor.Clone()
	next.ChunksEnqueued = to
	if err := s.d.Campaigns.SaveCursor(ctx, c.ID, c.Cursor, next, nil); err != nil {
		return 0, fmt.Errorf("dispatch %s: %w", c.ID, err)
	}
	c.Cursor = next
	s.d.Logger.InfoContext(ctx, "campaign page dispatched", "campaign_id", c.ID, "chunks", to-from,
		"members", c.Cursor.Members)
	return wait, nil
}

func (s *Steps) chunks(members int) int { return (members + s.chunk - 1) / s.chunk }

// Finish completes a campaign whose sources are all done and dispatched: its notification
// moves to PROCESSING (record finalizes it once every delivery has ended) and the campaign to
// COMPLETED. It is idempotent. ECONFLICT if the campaign is not finished dispatching.
func (s *Steps) Finish(ctx context.Context, id string) error {
	c, err := s.d.Campaigns.LoadCampaign(ctx, id)
	if err != nil {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	if c.State == notify.CampaignCompleted {
		return nil
	}
	if !c.Cursor.Exhausted() || c.Cursor.ChunksEnqueued < s.chunks(c.Cursor.Members) {
		return fmt.Errorf("finish %s: %w", id, notify.Errorf(notify.ECONFLICT, "audience not exhausted or not dispatched"))
	}
	if err := s.d.Notifications.SetChunksTotal(ctx, id, s.chunks(c.Cursor.Members)); err != nil {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	err = s.d.Notifications.SetNotificationStatus(ctx, id, notify.StatusProcessing, notify.StatusDispatching)
	if err != nil && !notify.IsCode(err, notify.ECONFLICT) {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	n, err := s.d.Notifications.GetNotification(ctx, id)
	if err != nil {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	if err := s.d.Dispatcher.EnqueueRecord(ctx, n); err != nil {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	err = s.d.Campaigns.SetCampaignState(ctx, id, notify.CampaignTransition{To: notify.CampaignCompleted, At: s.d.Clock.Now()},
		notify.CampaignRunning)
	if err != nil {
		return fmt.Errorf("finish %s: %w", id, err)
	}
	s.emit(ctx, notify.Event{Type: notify.EventCampaignFinished, Time: s.d.Clock.Now(), Service: c.Service,
		CampaignID: id, Recipients: c.Cursor.Members, Detail: map[string]any{"chunks": s.chunks(c.Cursor.Members)}})
	return nil
}

// Fail ends campaign c after a step failed permanently with err: the campaign moves to FAILED
// (with err's message, as the API shows it) and campaign_failed is emitted. A retryable err, an
// ECONFLICT or a canceled context changes nothing — the next step retries — and so does a
// campaign that ended meanwhile. It reports whether it failed the campaign.
func (s *Steps) Fail(ctx context.Context, c *notify.Campaign, err error) bool {
	if err == nil || notify.IsRetryable(err) || notify.IsCode(err, notify.ECONFLICT) || errors.Is(err, context.Canceled) {
		return false
	}
	return s.markFailed(ctx, c, err)
}

// markFailed is Fail without its judgement of err: for a failure that is final although its
// code is retryable (the state machine's retries are spent).
func (s *Steps) markFailed(ctx context.Context, c *notify.Campaign, err error) bool {
	ferr := s.d.Campaigns.SetCampaignState(ctx, c.ID, notify.CampaignTransition{
		To: notify.CampaignFailed, Error: notify.ErrorMessage(err), At: s.d.Clock.Now()}, active...)
	if notify.IsCode(ferr, notify.ECONFLICT) {
		return false // canceled, completed or failed by someone else: not ours to report
	}
	if ferr != nil {
		s.d.Logger.ErrorContext(ctx, "mark campaign failed", "campaign_id", c.ID, "error", ferr)
	}
	if cur, gerr := s.d.Campaigns.LoadCampaign(ctx, c.ID); gerr == nil {
		c = cur // c may predate the failing step's pages; the event counts the members reached
	}
	s.emit(ctx, notify.Event{Type: notify.EventCampaignFailed, Time: s.d.Clock.Now(), Service: c.Service,
		CampaignID: c.ID, Recipients: c.Cursor.Members,
		Detail: map[string]any{"code": notify.ErrorCode(err), "error": notify.ErrorMessage(err)}})
	return true
}

func (s *Steps) largeSend(c *notify.Campaign) notify.Event {
	return notify.Event{Type: notify.EventLargeSendStarted, Time: s.d.Clock.Now(), Service: c.Service,
		CampaignID: c.ID, Recipients: c.Cursor.Members,
		Detail: map[string]any{"category": c.Notification.Category, "channels": c.Notification.Channels}}
}

// emit hands e to Events. Operator events are advisory: a failure is logged (the adapter counts
// it) and never fails the step, which has already done its work.
func (s *Steps) emit(ctx context.Context, e notify.Event) {
	if err := s.d.Events.Emit(ctx, e); err != nil {
		s.d.Logger.WarnContext(ctx, "operator event not emitted", "event", e.Type, "campaign_id", e.CampaignID, "error", err)
	}
}

// Pause stops a running (or quiet-hours-paused) campaign until Resume. ECONFLICT otherwise.
func (s *Steps) Pause(ctx context.Context, id string) error {
	return s.setState(ctx, id, notify.CampaignPaused, notify.CampaignRunning, notify.CampaignPausedQuietHours)
}

// Reschedule moves a reserved campaign's send_at to at. ECONFLICT unless it is still SCHEDULED.
func (s *Steps) Reschedule(ctx context.Context, id string, at time.Time) error {
	err := s.d.Campaigns.SetCampaignState(ctx, id, notify.CampaignTransition{To: notify.CampaignScheduled, SendAt: &at,
		At: s.d.Clock.Now()}, notify.CampaignScheduled)
	if err != nil {
		return fmt.Errorf("reschedule campaign %s: %w", id, err)
	}
	return nil
}

// Resume restarts a paused campaign; CheckWindow re-applies quiet hours. ECONFLICT unless PAUSED.
func (s *Steps) Resume(ctx context.Context, id string) error {
	return s.setState(ctx, id, notify.CampaignRunning, notify.CampaignPaused)
}

// Cancel ends a campaign that has not ended, and cancels its notification, so batches already
// enqueued are skipped as canceled by send. ECONFLICT if the campaign already ended.
func (s *Steps) Cancel(ctx context.Context, id string) error {
	if err := s.setState(ctx, id, notify.CampaignCanceled, notify.CampaignScheduled, notify.CampaignRunning,
		notify.CampaignPaused, notify.CampaignPausedQuietHours); err != nil {
		if !notify.IsCode(err, notify.ECONFLICT) {
			return err
		}
		// Canceled before: finish what that cancel may not have (a retry repairs), and still
		// say it was not this call that canceled it.
		c, gerr := s.d.Campaigns.LoadCampaign(ctx, id)
		if gerr != nil || c.State != notify.CampaignCanceled {
			return err
		}
		if rerr := s.afterCancel(ctx, id); rerr != nil {
			return rerr
		}
		return err
	}
	return s.afterCancel(ctx, id)
}

// afterCancel cancels a canceled campaign's notification, so batches already enqueued are
// skipped, and withdraws its inbox broadcast. Both are idempotent.
func (s *Steps) afterCancel(ctx context.Context, id string) error {
	err := s.d.Notifications.SetNotificationStatus(ctx, id, notify.StatusCanceled,
		notify.StatusDispatching, notify.StatusProcessing, notify.StatusAccepted)
	if err != nil && !notify.IsCode(err, notify.ECONFLICT) {
		return fmt.Errorf("cancel %s: %w", id, err)
	}
	// Its inbox broadcast, if it stored one, leaves every inbox.
	if s.d.Broadcasts != nil {
		if err := s.d.Broadcasts.WithdrawBroadcast(ctx, id, s.d.Clock.Now()); err != nil {
			return fmt.Errorf("cancel %s: withdraw its inbox broadcast: %w", id, err)
		}
	}
	return nil
}

func (s *Steps) setState(ctx context.Context, id string, to notify.CampaignState, from ...notify.CampaignState) error {
	err := s.d.Campaigns.SetCampaignState(ctx, id, notify.CampaignTransition{To: to, At: s.d.Clock.Now()}, from...)
	if err != nil {
		return fmt.Errorf("campaign %s to %s: %w", id, to, err)
	}
	return nil
}

// Step runs one iteration for campaign id — CheckWindow, DispatchBatches of committed chunks,
// then FetchPage+SaveCursor+DispatchBatches of a new page, or Finish — and says when to come
// back. It is what the local Runner calls and what the state machine's loop body does.
func (s *Steps) Step(ctx context.Context, id string) (Window, error) {
	w, err := s.CheckWindow(ctx, id)
	if err != nil || w.Action != ActionRun {
		return w, err
	}
	c, err := s.d.Campaigns.LoadCampaign(ctx, id)
	if err != nil {
		return Window{}, fmt.Errorf("step %s: %w", id, err)
	}
	// Chunks committed by an earlier run that crashed before enqueuing them.
	if _, err := s.DispatchBatches(ctx, c); err != nil {
		return Window{}, err
	}
	if c.Cursor.Exhausted() {
		if err := s.Finish(ctx, id); err != nil {
			return Window{}, err
		}
		return Window{Action: ActionStop, State: notify.CampaignCompleted}, nil
	}
	p, err := s.FetchPage(ctx, c)
	if err != nil {
		return Window{}, err
	}
	if err := s.SaveCursor(ctx, id, p); err != nil {
		if errors.Is(err, context.Canceled) || !notify.IsCode(err, notify.ECONFLICT) {
			return Window{}, err
		}
		return Window{Action: ActionRun, State: w.State}, nil // someone else moved it: look again
	}
	c.Cursor = p.Next
	wait, err := s.DispatchBatches(ctx, c)
	if err != nil {
		return Window{}, err
	}
	if wait > 0 {
		return Window{Action: ActionWait, Until: s.d.Clock.Now().Add(wait), State: notify.CampaignRunning}, nil
	}
	return Window{Action: ActionRun, State: notify.CampaignRunning}, nil
}
