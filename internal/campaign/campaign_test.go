package campaign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// producer records what the steps enqueue.
type producer struct {
	mu   sync.Mutex
	msgs map[string][]notify.OutMessage
}

func (p *producer) Send(_ context.Context, queue string, msgs ...notify.OutMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs[queue] = append(p.msgs[queue], msgs...)
	return nil
}

// chunks returns how many times each prepare chunk of id was enqueued on the bulk lane.
func (p *producer) chunks(t *testing.T, id string) map[int]int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]int{}
	for _, m := range p.msgs[notify.LaneQueue(notify.StagePrepare, notify.LaneBulk)] {
		var pm struct {
			NotificationID string `json:"notification_id"`
			Chunk          int    `json:"chunk"`
			Count          int    `json:"count"` // a run of chunks in one message (a page)
		}
		if err := json.Unmarshal(m.Body, &pm); err != nil {
			t.Fatal(err)
		}
		if pm.NotificationID == id {
			for k := pm.Chunk; k < pm.Chunk+max(pm.Count, 1); k++ {
				out[k]++
			}
		}
	}
	return out
}

func (p *producer) count(queue string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs[queue])
}

type env struct {
	store *sqlite.Store
	db    *sqlite.DB
	clock *fakeClock
	queue *producer
	steps *campaign.Steps
}

const chunkSize = 100

var kst = func() *time.Location {
	l, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		panic(err)
	}
	return l
}()

// noon is a Monday at 12:00 in Seoul, far from quiet hours.
var noon = time.Date(2026, 11, 30, 12, 0, 0, 0, kst)

func setup(t *testing.T) *env {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, _ := seal.New(make([]byte, 32))
	st, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: st, db: db, clock: &fakeClock{now: noon}, queue: &producer{msgs: map[string][]notify.OutMessage{}}}
	e.steps = e.newSteps()
	return e
}

// newSteps builds the steps again on the same store, as a restarted process would.
func (e *env) newSteps() *campaign.Steps {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Clock: e.clock, Logger: log},
		pipeline.Config{ChunkSize: chunkSize})
	return campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: p, Clock: e.clock, Logger: log}, campaign.Config{PageSize: 250})
}

// listCampaign creates a marketing campaign over an uploaded list of n users.
func (e *env) listCampaign(t *testing.T, id string, n int, mod func(*notify.Campaign)) *notify.Campaign {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("u%05d", i))
	}
	if _, err := e.store.AppendAudienceList(t.Context(), "list-"+id, ids); err != nil {
		t.Fatal(err)
	}
	c := &notify.Campaign{
		ID: id, Service: "marketing",
		Notification: notify.Notification{Category: notify.CategoryMarketing,
			Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Title: "Sale", Body: "Now"}},
		Audience:   notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "list-" + id}}},
		QuietHours: notify.DefaultQuietHours(),
		State:      notify.CampaignRunning,
		CreatedAt:  e.clock.Now(),
	}
	if mod != nil {
		mod(c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	stored, _, err := e.store.CreateCampaign(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// runUntilIdle steps until no campaign has a page ready, failing after limit rounds.
func runUntilIdle(t *testing.T, r *campaign.Runner, limit int) {
	t.Helper()
	for range limit {
		ready, err := r.RunOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ready == 0 {
			return
		}
	}
	t.Fatalf("runner still busy after %d rounds", limit)
}

func (e *env) campaign(t *testing.T, id string) *notify.Campaign {
	t.Helper()
	c, err := e.store.GetCampaign(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantEveryChunkOnce checks that chunks 0..want-1 were each enqueued exactly once, and that the
// notification's recipients are the list in order, each user once.
func (e *env) wantEveryChunkOnce(t *testing.T, id string, members, want int) {
	t.Helper()
	got := e.queue.chunks(t, id)
	if len(got) != want {
		t.Fatalf("%d distinct chunks enqueued, want %d: %v", len(got), want, got)
	}
	for k := range want {
		if got[k] != 1 {
			t.Fatalf("chunk %d enqueued %d times, want once (all: %v)", k, got[k], got)
		}
	}
	rs, err := e.store.GetRecipients(t.Context(), id, 0, members+10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != members {
		t.Fatalf("%d recipients appended, want %d", len(rs), members)
	}
	for i, r := range rs {
		if w := fmt.Sprintf("u%05d", i); r.UserID != w {
			t.Fatalf("recipient %d = %q, want %q", i, r.UserID, w)
		}
	}
}

func TestRunToCompletion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_all", 1234, nil)
	r := campaign.NewRunner(e.steps, time.Millisecond)
	runUntilIdle(t, r, 50)

	c := e.campaign(t, "c_all")
	if c.State != notify.CampaignCompleted || c.FinishedAt == nil || c.StartedAt != nil && c.StartedAt.After(*c.FinishedAt) {
		t.Fatalf("campaign = %s (started %v finished %v), want COMPLETED", c.State, c.StartedAt, c.FinishedAt)
	}
	if !c.Cursor.Exhausted() || c.Cursor.Members != 1234 || c.Cursor.ChunksEnqueued != 13 {
		t.Fatalf("cursor = %+v", c.Cursor)
	}
	e.wantEveryChunkOnce(t, "c_all", 1234, 13)
	n, err := e.store.GetNotification(t.Context(), "c_all")
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusProcessing || n.Stats.ChunksTotal != 13 || n.Lane != notify.LaneBulk {
		t.Fatalf("notification status %s chunks %d lane %s, want PROCESSING 13 bulk", n.Status, n.Stats.ChunksTotal, n.Lane)
	}
	if k := e.queue.count(notify.LaneQueue(notify.StageRecord, notify.LaneBulk)); k != 1 {
		t.Fatalf("%d record messages, want 1 from Finish", k)
	}
	if e.queue.count(notify.LaneQueue(notify.StagePrepare, notify.LaneRealtime)) != 0 {
		t.Fatal("campaign work went to the realtime lane")
	}
}

func TestSeveralSourcesInSequence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Source 0 ("active") has u00000..u00149; source 1 ("dormant") u00150..u00379.
	var active, dormant []string
	for i := range 380 {
		if i < 150 {
			active = append(active, fmt.Sprintf("u%05d", i))
		} else {
			dormant = append(dormant, fmt.Sprintf("u%05d", i))
		}
	}
	for id, users := range map[string][]string{"active": active, "dormant": dormant} {
		if _, err := e.store.AppendAudienceList(t.Context(), id, users); err != nil {
			t.Fatal(err)
		}
	}
	e.listCampaign(t, "c_seq", 0, func(c *notify.Campaign) {
		c.Audience.Sources = []notify.Segment{{Kind: notify.AudienceUserList, ListID: "active"},
			{Kind: notify.AudienceUserList, ListID: "dormant"}}
	})
	runUntilIdle(t, campaign.NewRunner(e.steps, time.Millisecond), 50)
	c := e.campaign(t, "c_seq")
	if c.State != notify.CampaignCompleted || len(c.Cursor.Sources) != 2 || !c.Cursor.Sources[0].Done || !c.Cursor.Sources[1].Done {
		t.Fatalf("campaign = %s cursor %+v", c.State, c.Cursor)
	}
	e.wantEveryChunkOnce(t, "c_seq", 380, 4)
}

func TestQuietHoursPauseAndResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.clock.Set(time.Date(2026, 11, 30, 20, 59, 0, 0, kst))
	e.listCampaign(t, "c_night", 1000, nil)
	r := campaign.NewRunner(e.steps, time.Millisecond)

	// Two pages before 21:00.
	for range 2 {
		if _, err := r.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	before := e.campaign(t, "c_night").Cursor
	if before.Members != 400 {
		t.Fatalf("members before 21:00 = %d, want 400", before.Members)
	}

	e.clock.Set(time.Date(2026, 11, 30, 21, 0, 0, 0, kst))
	runUntilIdle(t, r, 5)
	c := e.campaign(t, "c_night")
	open := time.Date(2026, 12, 1, 8, 0, 0, 0, kst)
	if c.State != notify.CampaignPausedQuietHours || c.PausedUntil == nil || !c.PausedUntil.Equal(open) {
		t.Fatalf("at 21:00: state %s until %v, want PAUSED_QUIET_HOURS until %v", c.State, c.PausedUntil, open)
	}
	if !c.Cursor.Equal(before) {
		t.Fatalf("cursor moved in quiet hours: %+v, was %+v", c.Cursor, before)
	}

	// Still quiet at 07:59, across midnight; a restart in the night changes nothing.
	for _, at := range []time.Time{time.Date(2026, 12, 1, 0, 30, 0, 0, kst), time.Date(2026, 12, 1, 7, 59, 59, 0, kst)} {
		e.clock.Set(at)
		r = campaign.NewRunner(e.newSteps(), time.Millisecond)
		runUntilIdle(t, r, 5)
		if c := e.campaign(t, "c_night"); c.State != notify.CampaignPausedQuietHours || !c.Cursor.Equal(before) {
			t.Fatalf("at %v: state %s cursor %+v", at, c.State, c.Cursor)
		}
	}

	e.clock.Set(open)
	runUntilIdle(t, r, 50)
	c = e.campaign(t, "c_night")
	if c.State != notify.CampaignCompleted {
		t.Fatalf("after 08:00: state %s, want COMPLETED", c.State)
	}
	e.wantEveryChunkOnce(t, "c_night", 1000, 10)
}

func TestTransactionalIgnoresQuietHours(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.clock.Set(time.Date(2026, 11, 30, 23, 0, 0, 0, kst))
	e.listCampaign(t, "c_tx", 150, func(c *notify.Campaign) { c.Notification.Category = notify.CategoryTransactional })
	runUntilIdle(t, campaign.NewRunner(e.steps, time.Millisecond), 20)
	if c := e.campaign(t, "c_tx"); c.State != notify.CampaignCompleted {
		t.Fatalf("state %s, want COMPLETED", c.State)
	}
}

func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_crash", 1000, nil)
	r := campaign.NewRunner(e.steps, time.Millisecond)
	for range 2 {
		if _, err := r.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Crash between committing a page and enqueuing its chunks.
	c := e.campaign(t, "c_crash")
	p, err := e.steps.FetchPage(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.steps.SaveCursor(t.Context(), c.ID, p); err != nil {
		t.Fatal(err)
	}
	// A stale runner retrying the same commit loses.
	if err := e.steps.SaveCursor(t.Context(), c.ID, p); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("second SaveCursor = %v, want ECONFLICT", err)
	}
	// A new process takes over from the store alone.
	runUntilIdle(t, campaign.NewRunner(e.newSteps(), time.Millisecond), 50)
	if c := e.campaign(t, "c_crash"); c.State != notify.CampaignCompleted {
		t.Fatalf("state %s, want COMPLETED", c.State)
	}
	e.wantEveryChunkOnce(t, "c_crash", 1000, 10)
}

func TestPauseResumeCancel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_ctl", 1000, nil)
	r := campaign.NewRunner(e.steps, time.Millisecond)
	if _, err := r.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.steps.Pause(t.Context(), "c_ctl"); err != nil {
		t.Fatal(err)
	}
	paused := e.campaign(t, "c_ctl").Cursor
	runUntilIdle(t, r, 5)
	if c := e.campaign(t, "c_ctl"); c.State != notify.CampaignPaused || !c.Cursor.Equal(paused) {
		t.Fatalf("paused campaign moved: %s %+v", c.State, c.Cursor)
	}
	if err := e.steps.Resume(t.Context(), "c_ctl"); err != nil {
		t.Fatal(err)
	}
	if err := e.steps.Resume(t.Context(), "c_ctl"); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("Resume of a running campaign = %v, want ECONFLICT", err)
	}
	if _, err := r.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := e.campaign(t, "c_ctl"); c.Cursor.Members <= paused.Members {
		t.Fatalf("resumed campaign did not move: %+v", c.Cursor)
	}
	if err := e.steps.Cancel(t.Context(), "c_ctl"); err != nil {
		t.Fatal(err)
	}
	canceled := e.campaign(t, "c_ctl")
	runUntilIdle(t, r, 5)
	c := e.campaign(t, "c_ctl")
	if c.State != notify.CampaignCanceled || !c.Cursor.Equal(canceled.Cursor) || c.FinishedAt == nil {
		t.Fatalf("canceled campaign: %s %+v", c.State, c.Cursor)
	}
	n, err := e.store.GetNotification(t.Context(), "c_ctl")
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusCanceled {
		t.Fatalf("notification %s, want CANCELED so enqueued batches are skipped", n.Status)
	}
	if err := e.steps.Cancel(t.Context(), "c_ctl"); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("second Cancel = %v, want ECONFLICT", err)
	}
}

func TestScheduledStartsAtSendAt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	at := noon.Add(time.Hour)
	e.listCampaign(t, "c_later", 150, func(c *notify.Campaign) { c.State, c.SendAt = notify.CampaignScheduled, &at })
	r := campaign.NewRunner(e.steps, time.Millisecond)
	runUntilIdle(t, r, 5)
	if c := e.campaign(t, "c_later"); c.State != notify.CampaignScheduled || c.Cursor.Members != 0 {
		t.Fatalf("before send_at: %s %+v", c.State, c.Cursor)
	}
	e.clock.Set(at)
	runUntilIdle(t, r, 20)
	if c := e.campaign(t, "c_later"); c.State != notify.CampaignCompleted || c.StartedAt == nil || !c.StartedAt.Equal(at) {
		t.Fatalf("after send_at: %s started %v", c.State, c.StartedAt)
	}
}

func TestMaxRateSpacesPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_rate", 1000, func(c *notify.Campaign) { c.MaxRate = 100 }) // 200 per page → 2s apart
	r := campaign.NewRunner(e.steps, time.Millisecond)
	runUntilIdle(t, r, 5)
	if m := e.campaign(t, "c_rate").Cursor.Members; m != 200 {
		t.Fatalf("members after the first page = %d, want 200 (the rest waits for the rate)", m)
	}
	e.clock.Set(noon.Add(1999 * time.Millisecond))
	runUntilIdle(t, r, 5)
	if m := e.campaign(t, "c_rate").Cursor.Members; m != 200 {
		t.Fatalf("members before 2s = %d, want 200", m)
	}
	e.clock.Set(noon.Add(2 * time.Second))
	runUntilIdle(t, r, 5)
	if m := e.campaign(t, "c_rate").Cursor.Members; m != 400 {
		t.Fatalf("members at 2s = %d, want 400", m)
	}
}

func TestFailsOnPermanentError(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// A source kind the store does not know passes nothing but Page's EINVALID.
	e.listCampaign(t, "c_bad", 10, nil)
	if _, err := e.db.W.ExecContext(t.Context(), `UPDATE campaigns SET doc = json_set(CAST(doc AS TEXT), '$.audience.sources[0].kind', 'segment') WHERE id = 'c_bad'`); err != nil {
		t.Fatal(err)
	}
	runUntilIdle(t, campaign.NewRunner(e.steps, time.Millisecond), 5)
	if c := e.campaign(t, "c_bad"); c.State != notify.CampaignFailed || c.Error == "" {
		t.Fatalf("state %s error %q, want FAILED with a reason", c.State, c.Error)
	}
}

// TestTwoRunnersShareACampaign: two processes stepping the same campaign at once never append
// a member twice or skip one; the conditional SaveCursor lets exactly one of them commit each page.
func TestTwoRunnersShareACampaign(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.listCampaign(t, "c_two", 2000, nil)
	var wg sync.WaitGroup
	for range 2 {
		r := campaign.NewRunner(e.newSteps(), time.Millisecond)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := r.RunOnce(t.Context()); err != nil {
					t.Error(err)
					return
				}
				if e.campaign(t, "c_two").State == notify.CampaignCompleted {
					return
				}
			}
		}()
	}
	wg.Wait()
	c := e.campaign(t, "c_two")
	if c.State != notify.CampaignCompleted || c.Cursor.Members != 2000 {
		t.Fatalf("state %s cursor %+v, want COMPLETED with 2000 members", c.State, c.Cursor)
	}
	rs, err := e.store.GetRecipients(t.Context(), "c_two", 0, 3000)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if w := fmt.Sprintf("u%05d", i); r.UserID != w {
			t.Fatalf("recipient %d = %q, want %q", i, r.UserID, w)
		}
	}
	chunks := e.queue.chunks(t, "c_two")
	for k := range 20 {
		if chunks[k] == 0 {
			t.Fatalf("chunk %d never enqueued", k)
		}
	}
}

// TestOperatorEvents: the structured events alerts subscribe to are logged once each.
func TestOperatorEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	p := pipeline.New(pipeline.Deps{Store: e.store, Queue: e.queue, Clock: e.clock, Logger: log}, pipeline.Config{ChunkSize: chunkSize})
	steps := campaign.New(campaign.Deps{Campaigns: e.store, Audience: e.store, Notifications: e.store,
		Dispatcher: p, Clock: e.clock, Logger: log}, campaign.Config{PageSize: 400})
	e.listCampaign(t, "c_events", 1500, nil)
	runUntilIdle(t, campaign.NewRunner(steps, time.Millisecond), 50)
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec struct {
			Event      string `json:"event"`
			CampaignID string `json:"campaign_id"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Event != "" && rec.CampaignID == "c_events" {
			counts[rec.Event]++
		}
	}
	if counts["large_send_started"] != 1 || counts["campaign_finished"] != 1 || counts["campaign_failed"] != 0 {
		t.Fatalf("events = %v, want one large_send_started and one campaign_finished", counts)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.WriteString(string(p))
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
