// Package campaigntest is the conformance suite for notify.CampaignStore and
// notify.AudienceSource. Every adapter (SQLite locally, DynamoDB in AWS) runs Run unchanged. The
// device index that app_devices sources page is fed through notify.UserStore, so the suite
// takes a store that implements all three ports.
package campaigntest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/suite"
)

// Store is what the suite exercises.
type Store interface {
	notify.Store
	notify.CampaignStore
	notify.AudienceSource
}

// t0 is the suite's "now".
var t0 = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

type campaignCase struct {
	Name string
	Run  func(t *testing.T, s Store)
}

// Run runs every case as a parallel subtest, each on a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	suite.Run(t, cases, newStore)
}

// noErr and wantCode are the assertions every suite shares.
var noErr, wantCode = suite.NoErr, suite.WantCode

// createWithTwoMembers creates campaign id and pages its first two members.
func createWithTwoMembers(t *testing.T, s Store, id string) *notify.Campaign {
	t.Helper()
	c := mustCreate(t, s, newCampaign(id))
	next := c.Cursor.Clone()
	next.Members = 2
	noErr(t, s.SaveCursor(t.Context(), c.ID, c.Cursor, next, users("u", 0, 2)))
	return c
}

func newCampaign(id string, sources ...notify.Segment) *notify.Campaign {
	if len(sources) == 0 {
		sources = []notify.Segment{{Kind: notify.AudienceUserList, ListID: "list-" + id}}
	}
	return &notify.Campaign{
		ID:      id,
		Service: "marketing",
		Notification: notify.Notification{
			Category: notify.CategoryMarketing,
			Channels: []notify.Channel{notify.ChannelPush, notify.ChannelInbox},
			Content:  notify.Content{Title: "Weekend sale", Body: "30% off"},
		},
		Audience:   notify.Audience{Sources: sources},
		QuietHours: notify.DefaultQuietHours(),
		MaxRate:    1000,
		State:      notify.CampaignRunning,
		CreatedAt:  t0,
		UpdatedAt:  t0,
	}
}

func mustCreate(t *testing.T, s Store, c *notify.Campaign) *notify.Campaign {
	t.Helper()
	stored, created, err := s.CreateCampaign(t.Context(), c)
	noErr(t, err)
	if !created {
		t.Fatalf("CreateCampaign(%s) created = false, want true", c.ID)
	}
	return stored
}

func users(prefix string, from, n int) []notify.Recipient {
	out := make([]notify.Recipient, n)
	for i := range out {
		out[i] = notify.Recipient{UserID: fmt.Sprintf("%s%05d", prefix, from+i)}
	}
	return out
}

// pageAll reads a source to the end in pages of limit and checks the keyset contract on the way.
func pageAll(t *testing.T, s Store, a notify.Audience, source, limit int) []notify.Member {
	t.Helper()
	var (
		all   []notify.Member
		after int64
	)
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("paging did not end")
		}
		page, err := s.Page(t.Context(), a, source, after, limit)
		noErr(t, err)
		for _, m := range page {
			if m.Seq <= after {
				t.Fatalf("page after %d returned seq %d", after, m.Seq)
			}
			after = m.Seq
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
	}
}

func userIDs(ms []notify.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.UserID
	}
	return out
}

func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s has %d entries, want %d: %v", what, len(got), len(want), got)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s[%d] = %q, want %q (got %v)", what, i, got[i], want[i], got)
		}
	}
}

var cases = []campaignCase{
	{"CreateAndGet", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := newCampaign("c_create", notify.Segment{Kind: notify.AudienceAppDevices, App: "shop"},
			notify.Segment{Kind: notify.AudienceUserList, ListID: "dormant"})
		c.Cursor = notify.CampaignCursor{Members: 99} // ignored: a new campaign starts at the beginning
		mustCreate(t, s, c)
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if got.State != notify.CampaignRunning || got.Service != "marketing" || got.MaxRate != 1000 ||
			got.Notification.Content.Title != "Weekend sale" || !got.QuietHours.Enabled {
			t.Fatalf("GetCampaign = %+v", got)
		}
		if len(got.Cursor.Sources) != 2 || got.Cursor.Members != 0 || got.Cursor.Sources[0] != (notify.SourceCursor{}) {
			t.Fatalf("cursor = %+v, want two empty sources", got.Cursor)
		}
		if !got.CreatedAt.Equal(t0) {
			t.Fatalf("CreatedAt = %v, want %v", got.CreatedAt, t0)
		}
		if got.StartedAt == nil || !got.StartedAt.Equal(t0) {
			t.Fatalf("created RUNNING: StartedAt = %v, want CreatedAt %v", got.StartedAt, t0)
		}
		later := newCampaign("c_create_later")
		later.State = notify.CampaignScheduled
		mustCreate(t, s, later)
		if got, err := s.GetCampaign(ctx, later.ID); err != nil || got.StartedAt != nil {
			t.Fatalf("created SCHEDULED: StartedAt = %v (%v), want none", got.StartedAt, err)
		}
		n, err := s.GetNotification(ctx, c.ID)
		noErr(t, err)
		if n.Status != notify.StatusDispatching || n.Lane != notify.LaneBulk || n.RecipientCount != 0 ||
			n.Service != "marketing" || n.Category != notify.CategoryMarketing {
			t.Fatalf("campaign notification = %+v", n)
		}
		again, created, err := s.CreateCampaign(ctx, newCampaign("c_create"))
		noErr(t, err)
		if created || len(again.Audience.Sources) != 2 {
			t.Fatalf("second CreateCampaign created=%v audience=%+v, want the stored one", created, again.Audience)
		}
	}},
	{"NotificationListingsOmitCampaigns", func(t *testing.T, s Store) {
		ctx := t.Context()
		l, ok := s.(notify.NotificationLister)
		if !ok {
			t.Skipf("%T lists no notifications", s)
		}
		c := mustCreate(t, s, newCampaign("c_listed"))
		noErr(t, s.SetNotificationStatus(ctx, c.ID, notify.StatusSent)) // an ended campaign
		_, _, err := s.CreateNotification(ctx, &notify.Notification{ID: "n_listed", Service: "marketing",
			Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Recipients: []notify.Recipient{{UserID: "u"}}, Status: notify.StatusSent, CreatedAt: t0, UpdatedAt: t0})
		noErr(t, err)
		var ids []string
		cursor := ""
		for range 100 {
			page, next, err := l.ListNotifications(ctx, notify.NotificationFilter{}, cursor, 10)
			noErr(t, err)
			for _, n := range page {
				ids = append(ids, n.ID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		if len(ids) != 1 || ids[0] != "n_listed" {
			t.Fatalf("listed %v, want the notification alone: a campaign is listed as a campaign", ids)
		}
	}},
	{"FingerprintRoundTrips", func(t *testing.T, s Store) {
		c := newCampaign("c_fingerprint")
		c.Fingerprint = "f-first"
		mustCreate(t, s, c)
		got, err := s.GetCampaign(t.Context(), c.ID)
		noErr(t, err)
		if got.Fingerprint != "f-first" {
			t.Fatalf("Fingerprint = %q, want f-first", got.Fingerprint)
		}
		other := newCampaign("c_fingerprint")
		other.Fingerprint = "f-other"
		stored, created, err := s.CreateCampaign(t.Context(), other)
		noErr(t, err)
		if created || stored.Fingerprint != "f-first" {
			t.Fatalf("a second create = %q created=%v, want the stored campaign's f-first", stored.Fingerprint, created)
		}
	}},
	{"CreateConflictsWithNotification", func(t *testing.T, s Store) {
		ctx := t.Context()
		_, _, err := s.CreateNotification(ctx, &notify.Notification{ID: "c_taken", Service: "x",
			Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
			Recipients: []notify.Recipient{{UserID: "u"}}, Status: notify.StatusAccepted, CreatedAt: t0, UpdatedAt: t0})
		noErr(t, err)
		_, _, err = s.CreateCampaign(ctx, newCampaign("c_taken"))
		wantCode(t, err, notify.ECONFLICT)
		_, err = s.GetCampaign(ctx, "c_taken")
		wantCode(t, err, notify.ENOTFOUND)
	}},
	{"CreateWithoutID", func(t *testing.T, s Store) {
		_, _, err := s.CreateCampaign(t.Context(), newCampaign(""))
		wantCode(t, err, notify.EINVALID)
	}},
	{"GetUnknown", func(t *testing.T, s Store) {
		_, err := s.GetCampaign(t.Context(), "c_nope")
		wantCode(t, err, notify.ENOTFOUND)
		err = s.SetCampaignState(t.Context(), "c_nope", notify.CampaignTransition{To: notify.CampaignPaused})
		wantCode(t, err, notify.ENOTFOUND)
		err = s.SaveCursor(t.Context(), "c_nope", notify.CampaignCursor{}, notify.CampaignCursor{}, nil)
		wantCode(t, err, notify.ENOTFOUND)
	}},
	{"SaveCursorAppendsRecipients", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := mustCreate(t, s, newCampaign("c_save"))
		cur := c.Cursor
		// 700, 300, 1 then 1,200: crosses the adapters' recipient page boundaries at odd offsets,
		// the last one filling a page begun before it and writing whole ones after.
		for _, k := range []struct{ from, n int }{{0, 700}, {700, 300}, {1000, 1}, {1001, 1200}} {
			next := cur.Clone()
			next.Sources[0].LastSeq = int64(k.from + k.n)
			next.Members = k.from + k.n
			noErr(t, s.SaveCursor(ctx, c.ID, cur, next, users("u", k.from, k.n)))
			cur = next
		}
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if !got.Cursor.Equal(cur) || got.Progress.Members != 2201 {
			t.Fatalf("cursor = %+v progress %+v, want %+v", got.Cursor, got.Progress, cur)
		}
		n, err := s.GetNotification(ctx, c.ID)
		noErr(t, err)
		if n.RecipientCount != 2201 {
			t.Fatalf("RecipientCount = %d, want 2201", n.RecipientCount)
		}
		rs, err := s.GetRecipients(ctx, c.ID, 0, 3000)
		noErr(t, err)
		want := users("u", 0, 2201)
		if len(rs) != len(want) {
			t.Fatalf("GetRecipients returned %d, want %d", len(rs), len(want))
		}
		for i := range rs {
			if rs[i] != want[i] {
				t.Fatalf("recipient %d = %+v, want %+v", i, rs[i], want[i])
			}
		}
	}},
	{"SaveCursorConflicts", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := mustCreate(t, s, newCampaign("c_conflict"))
		start := c.Cursor
		next := start.Clone()
		next.Sources[0].LastSeq, next.Members = 10, 10
		// Two runners holding the same cursor: exactly one advances it.
		var (
			wg   sync.WaitGroup
			errs = make([]error, 4)
		)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.SaveCursor(ctx, c.ID, start, next, users("r", 0, 10))
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				wantCode(t, err, notify.ECONFLICT)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d concurrent SaveCursor calls succeeded, want 1", ok, len(errs))
		}
		n, err := s.GetNotification(ctx, c.ID)
		noErr(t, err)
		if n.RecipientCount != 10 {
			t.Fatalf("RecipientCount = %d after racing saves, want 10", n.RecipientCount)
		}
		// A retried step with the stale cursor changes nothing.
		wantCode(t, s.SaveCursor(ctx, c.ID, start, next, users("r", 0, 10)), notify.ECONFLICT)
		// A bookkeeping-only save (no recipients) works from the current cursor.
		marked := next.Clone()
		marked.ChunksEnqueued = 1
		noErr(t, s.SaveCursor(ctx, c.ID, next, marked, nil))
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if !got.Cursor.Equal(marked) {
			t.Fatalf("cursor = %+v, want %+v", got.Cursor, marked)
		}
	}},
	{"SaveCursorInvalid", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := mustCreate(t, s, newCampaign("c_invalid"))
		next := c.Cursor.Clone()
		next.Members = 5
		wantCode(t, s.SaveCursor(ctx, c.ID, c.Cursor, next, users("u", 0, 4)), notify.EINVALID)
		wrong := notify.CampaignCursor{Sources: make([]notify.SourceCursor, 3)}
		wantCode(t, s.SaveCursor(ctx, c.ID, c.Cursor, wrong, nil), notify.EINVALID)
	}},
	{"SaveCursorAfterFinal", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := mustCreate(t, s, newCampaign("c_final"))
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignCanceled, At: t0}))
		next := c.Cursor.Clone()
		next.Members = 1
		wantCode(t, s.SaveCursor(ctx, c.ID, c.Cursor, next, users("u", 0, 1)), notify.ECONFLICT)
	}},
	{"SetCampaignState", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := newCampaign("c_state")
		c.State = notify.CampaignScheduled
		mustCreate(t, s, c)
		wantCode(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignPaused},
			notify.CampaignRunning), notify.ECONFLICT)
		t1 := t0.Add(time.Hour)
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignRunning, At: t1},
			notify.CampaignScheduled))
		until := t0.Add(12 * time.Hour)
		t2 := t0.Add(2 * time.Hour)
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignPausedQuietHours,
			PausedUntil: &until, At: t2}, notify.CampaignRunning))
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if got.State != notify.CampaignPausedQuietHours || got.PausedUntil == nil || !got.PausedUntil.Equal(until) ||
			got.StartedAt == nil || !got.StartedAt.Equal(t1) || !got.UpdatedAt.Equal(t2) || got.FinishedAt != nil {
			t.Fatalf("after quiet pause: %+v", got)
		}
		t3 := t0.Add(13 * time.Hour)
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignRunning, At: t3},
			notify.CampaignPausedQuietHours, notify.CampaignPaused))
		t4 := t0.Add(14 * time.Hour)
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignFailed, Error: "boom", At: t4}))
		got, err = s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if got.State != notify.CampaignFailed || got.PausedUntil != nil || got.Error != "boom" ||
			!got.StartedAt.Equal(t1) || got.FinishedAt == nil || !got.FinishedAt.Equal(t4) {
			t.Fatalf("after failure: %+v", got)
		}
	}},
	{"RescheduleMovesSendAt", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := newCampaign("c_resched")
		first := t0.Add(24 * time.Hour)
		c.State, c.SendAt = notify.CampaignScheduled, &first
		mustCreate(t, s, c)
		later := t0.Add(48 * time.Hour)
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignScheduled, SendAt: &later, At: t0},
			notify.CampaignScheduled))
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if got.State != notify.CampaignScheduled || got.SendAt == nil || !got.SendAt.Equal(later) ||
			got.Notification.Content.Title != c.Notification.Content.Title || len(got.Audience.Sources) != len(c.Audience.Sources) {
			t.Fatalf("after reschedule: state %s send_at %v, content %+v; want SCHEDULED at %v, the rest unchanged",
				got.State, got.SendAt, got.Notification.Content, later)
		}
		// Once it runs, it can't be rescheduled.
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignRunning, At: later}))
		wantCode(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignScheduled, SendAt: &first},
			notify.CampaignScheduled), notify.ECONFLICT)
	}},
	{"ListCampaigns", func(t *testing.T, s Store) {
		ctx := t.Context()
		for i, st := range []notify.CampaignState{notify.CampaignRunning, notify.CampaignScheduled, notify.CampaignRunning} {
			c := newCampaign(fmt.Sprintf("c_list%d", i))
			c.State, c.CreatedAt = st, t0.Add(time.Duration(i)*time.Second)
			mustCreate(t, s, c)
		}
		running, err := s.ListCampaigns(ctx, notify.CampaignRunning, notify.CampaignPaused)
		noErr(t, err)
		var ids []string
		for _, c := range running {
			ids = append(ids, c.ID)
		}
		sameList(t, "running campaigns", ids, []string{"c_list0", "c_list2"})
		all, err := s.ListCampaigns(ctx)
		noErr(t, err)
		if len(all) != 3 {
			t.Fatalf("ListCampaigns() = %d campaigns, want 3", len(all))
		}
	}},
	{"ProgressFollowsDeliveries", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := createWithTwoMembers(t, s, "c_progress")
		noErr(t, s.SetChunksTotal(ctx, c.ID, 1))
		// Dispatched, not prepared yet: both members are pending, with no delivery yet.
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		if want := (notify.CampaignProgress{Members: 2, Pending: 2, Unprepared: 2}); !reflect.DeepEqual(got.Progress, want) {
			t.Fatalf("Progress before prepare = %+v, want %+v", got.Progress, want)
		}
		// The bulk lane's prepare counts the chunk's deliveries and its members in one write.
		delta := map[notify.Channel]notify.ChannelStats{}
		notify.CountDelivery(delta, notify.ChannelPush, notify.DeliveryPending, "", true)
		notify.CountDelivery(delta, notify.ChannelPush, notify.DeliverySkipped, notify.ReasonNoConsent, true)
		notify.CountMembers(delta, 2)
		_, err = s.AddChunk(ctx, c.ID, 0, delta)
		noErr(t, err)
		got, err = s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		want := notify.CampaignProgress{Members: 2, Total: 2, Skipped: 1, Pending: 1,
			SkippedByReason: map[string]int{notify.ReasonNoConsent: 1}}
		if !reflect.DeepEqual(got.Progress, want) {
			t.Fatalf("Progress = %+v, want %+v", got.Progress, want)
		}
	}},
	{"LoadCampaignIsGetCampaignWithoutProgress", func(t *testing.T, s Store) {
		ctx := t.Context()
		c := createWithTwoMembers(t, s, "c_load")
		noErr(t, s.SetCampaignState(ctx, c.ID, notify.CampaignTransition{To: notify.CampaignPaused, At: t0.Add(time.Minute)}))
		got, err := s.GetCampaign(ctx, c.ID)
		noErr(t, err)
		loaded, err := s.LoadCampaign(ctx, c.ID)
		noErr(t, err)
		if loaded.Progress.Members != 0 || loaded.Progress.Pending != 0 || loaded.Progress.Unpaged != 0 {
			t.Fatalf("LoadCampaign() Progress = %+v, want zero", loaded.Progress)
		}
		if got.Progress.Members != 2 {
			t.Fatalf("GetCampaign() Progress = %+v, want 2 members", got.Progress)
		}
		got.Progress = notify.CampaignProgress{}
		if !reflect.DeepEqual(loaded, got) {
			t.Fatalf("LoadCampaign() = %+v\nwant GetCampaign's %+v without progress", loaded, got)
		}
		_, err = s.LoadCampaign(ctx, "c_load_missing")
		wantCode(t, err, notify.ENOTFOUND)
	}},
	{"RemainingCountsWhatIsNotPaged", func(t *testing.T, s Store) {
		ctx := t.Context()
		list := make([]string, 30)
		for i := range list {
			list[i] = fmt.Sprintf("rem-user-%02d", i)
		}
		_, err := s.AppendAudienceList(ctx, "rem", list)
		noErr(t, err)
		for i := range 5 {
			noErr(t, s.PutDevice(ctx, notify.Device{UserID: fmt.Sprintf("rem-dev-%d", i), Token: fmt.Sprintf("rem-tok-%d", i),
				App: "rem-app", Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: t0}))
		}
		a := notify.Audience{Sources: []notify.Segment{
			{Kind: notify.AudienceUserList, ListID: "rem"}, {Kind: notify.AudienceAppDevices, App: "rem-app"}}}
		page, err := s.Page(ctx, a, 0, 0, 12)
		noErr(t, err)
		if n, err := s.Remaining(ctx, a, 0, page[len(page)-1].Seq); err != nil || n != 18 {
			t.Fatalf("Remaining after 12 of 30 list members = %d, %v; want 18", n, err)
		}
		if n, err := s.Remaining(ctx, a, 1, 0); err != nil || n != 5 {
			t.Fatalf("Remaining of 5 devices = %d, %v; want 5", n, err)
		}
		cur := notify.CampaignCursor{Sources: []notify.SourceCursor{{LastSeq: page[len(page)-1].Seq}, {}}}
		if n, err := notify.Unpaged(ctx, s, a, cur); err != nil || n != 23 {
			t.Fatalf("Unpaged = %d, %v; want 23", n, err)
		}
		cur.Sources[0].Done = true
		if n, err := notify.Unpaged(ctx, s, a, cur); err != nil || n != 5 {
			t.Fatalf("Unpaged with the list done = %d, %v; want 5", n, err)
		}
		_, err = s.Remaining(ctx, a, 2, 0)
		wantCode(t, err, notify.EINVALID)
	}},
	{"UserListPaging", func(t *testing.T, s Store) {
		ctx := t.Context()
		var want []string
		for i := range 1203 {
			want = append(want, fmt.Sprintf("list-user-%04d", i))
		}
		last, err := s.AppendAudienceList(ctx, "weekend", want[:700])
		noErr(t, err)
		last2, err := s.AppendAudienceList(ctx, "weekend", want[700:])
		noErr(t, err)
		if last2 <= last {
			t.Fatalf("second append's last seq %d not after first's %d", last2, last)
		}
		_, err = s.AppendAudienceList(ctx, "other", []string{"someone-else"})
		noErr(t, err)
		a := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "weekend"}}}
		got := pageAll(t, s, a, 0, 500)
		sameList(t, "list members", userIDs(got), want)
		if got[len(got)-1].Seq != last2 {
			t.Fatalf("last member seq = %d, want %d", got[len(got)-1].Seq, last2)
		}
		// Resuming after the last member returns nothing, and after a middle one, exactly the rest.
		rest, err := s.Page(ctx, a, 0, got[499].Seq, 1000)
		noErr(t, err)
		sameList(t, "members after #500", userIDs(rest), want[500:])
		end, err := s.Page(ctx, a, 0, last2, 10)
		noErr(t, err)
		if len(end) != 0 {
			t.Fatalf("page after the end = %v, want none", end)
		}
	}},
	{"AppDevicesPaging", func(t *testing.T, s Store) {
		ctx := t.Context()
		put := func(user, token, app string, pl notify.Platform, locale string) {
			t.Helper()
			noErr(t, s.PutDevice(ctx, notify.Device{UserID: user, Token: token, App: app, Platform: pl,
				Locale: locale, Environment: "production", UpdatedAt: t0}))
		}
		put("u1", "t1", "shop", notify.PlatformFCM, "ko-KR")
		put("u2", "t2", "shop", notify.PlatformAPNs, "en-US")
		put("u3", "t3", "other", notify.PlatformFCM, "ko")
		put("u4", "t4", "shop", notify.PlatformFCM, "ko")
		put("u1", "t5", "shop", notify.PlatformAPNs, "kor")  // "kor" is not locale "ko"
		put("u1", "t1", "shop", notify.PlatformFCM, "ko-KR") // re-registration: still one member, same place
		shop := func(seg notify.Segment) notify.Audience {
			seg.Kind, seg.App = notify.AudienceAppDevices, "shop"
			return notify.Audience{Sources: []notify.Segment{seg}}
		}
		all := pageAll(t, s, shop(notify.Segment{}), 0, 2)
		sameList(t, "shop devices", userIDs(all), []string{"u1", "u2", "u4", "u1"})
		for i, want := range []notify.Member{{Token: "t1", Platform: notify.PlatformFCM}, {Token: "t2", Platform: notify.PlatformAPNs},
			{Token: "t4", Platform: notify.PlatformFCM}, {Token: "t5", Platform: notify.PlatformAPNs}} {
			if all[i].Token != want.Token || all[i].Platform != want.Platform {
				t.Fatalf("member %d is device %s/%s, want %s/%s", i, all[i].Token, all[i].Platform, want.Token, want.Platform)
			}
		}
		sameList(t, "shop fcm", userIDs(pageAll(t, s, shop(notify.Segment{Platform: notify.PlatformFCM}), 0, 10)),
			[]string{"u1", "u4"})
		sameList(t, "shop ko", userIDs(pageAll(t, s, shop(notify.Segment{Locale: "ko"}), 0, 10)),
			[]string{"u1", "u4"})

		noErr(t, s.PutPreferences(ctx, notify.Preferences{UserID: "u4", MarketingConsent: &t0, UpdatedAt: t0}))
		noErr(t, s.PutPreferences(ctx, notify.Preferences{UserID: "u2", UpdatedAt: t0}))
		sameList(t, "shop with consent", userIDs(pageAll(t, s, shop(notify.Segment{MarketingConsent: true}), 0, 10)),
			[]string{"u4"})

		// Removal drops a device; registering it again puts it after every earlier member.
		noErr(t, s.DeleteDevice(ctx, "u2", "t2"))
		if ok, err := s.RemoveDeadDevice(ctx, "t5", t0.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("RemoveDeadDevice = %v, %v", ok, err)
		}
		sameList(t, "after removals", userIDs(pageAll(t, s, shop(notify.Segment{}), 0, 10)), []string{"u1", "u4"})
		put("u2", "t2", "shop", notify.PlatformAPNs, "en-US")
		again := pageAll(t, s, shop(notify.Segment{}), 0, 10)
		sameList(t, "after re-adding", userIDs(again), []string{"u1", "u4", "u2"})
		if again[2].Seq <= all[len(all)-1].Seq {
			t.Fatalf("re-added device seq %d is not after the old last seq %d", again[2].Seq, all[len(all)-1].Seq)
		}
		// A token moving to another user and app moves with its index entry.
		put("u9", "t4", "other", notify.PlatformFCM, "ko")
		sameList(t, "after move", userIDs(pageAll(t, s, shop(notify.Segment{}), 0, 10)), []string{"u1", "u2"})
	}},
	{"PageInvalid", func(t *testing.T, s Store) {
		ctx := t.Context()
		a := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "l"}}}
		_, err := s.Page(ctx, a, 1, 0, 10)
		wantCode(t, err, notify.EINVALID)
		_, err = s.Page(ctx, a, 0, 0, 0)
		wantCode(t, err, notify.EINVALID)
		_, err = s.Page(ctx, notify.Audience{Sources: []notify.Segment{{Kind: "segment"}}}, 0, 0, 10)
		wantCode(t, err, notify.EINVALID)
	}},
}
