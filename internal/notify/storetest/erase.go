package storetest

import (
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
)

// erasureCases cover notify.ErasureStore: a user's erasure, its record and tombstone.
var erasureCases = []storeCase{
	{"Erasure/Record", testErasureRecord},
	{"Erasure/EverythingOfTheUser", testEraseEverything},
	{"Erasure/ResumedAfterACrash", testEraseResumed},
}

func eraser(t *testing.T, s notify.Store) notify.ErasureStore {
	t.Helper()
	es, ok := s.(notify.ErasureStore)
	if !ok {
		t.Fatalf("%T does not implement notify.ErasureStore", s)
	}
	return es
}

func testErasureRecord(t *testing.T, s notify.Store) {
	es, ctx := eraser(t, s), t.Context()
	hash := notify.UserHash("rec-1")
	wantCode(t, es.SaveErasure(ctx, notify.Erasure{UserHash: hash, UserID: "rec-1", Status: notify.ErasureRunning}), notify.ENOTFOUND)
	_, err := es.GetErasure(ctx, hash)
	wantCode(t, err, notify.ENOTFOUND)
	_, _, err = es.BeginErasure(ctx, notify.Erasure{UserHash: hash, RequestedAt: t0})
	wantCode(t, err, notify.EINVALID)

	first := notify.Erasure{UserHash: hash, UserID: "rec-1", Actor: "shop", RequestedAt: t0, Removed: map[string]int{}}
	got, created, err := es.BeginErasure(ctx, first)
	noErr(t, err)
	if !created || got.Status != notify.ErasureRunning || got.UserID != "rec-1" {
		t.Fatalf("first begin = %+v created=%v, want a running erasure", got, created)
	}
	// A second request while it runs gets the running one, to resume.
	got.Step, got.Cursor, got.Removed = 3, "more", map[string]int{notify.EraseDevices: 2}
	noErr(t, es.SaveErasure(ctx, got))
	again, created, err := es.BeginErasure(ctx, notify.Erasure{UserHash: hash, UserID: "rec-1", Actor: "crm", RequestedAt: t0.Add(time.Minute)})
	noErr(t, err)
	if created || again.Step != 3 || again.Cursor != "more" || again.Actor != "shop" || again.UserID != "rec-1" ||
		again.Removed[notify.EraseDevices] != 2 {
		t.Fatalf("begin while running = %+v created=%v, want the running one with its checkpoint", again, created)
	}
	sameTime(t, "requested_at", again.RequestedAt, t0)

	erased, err := es.ErasedSince(ctx, t0.Add(-time.Hour))
	noErr(t, err)
	sameTime(t, "tombstone", erased[hash], t0)
	if len(erased) != 1 {
		t.Fatalf("erased since = %v, want only %s", erased, hash)
	}
	if later, err := es.ErasedSince(ctx, t0.Add(time.Second)); err != nil || len(later) != 0 {
		t.Fatalf("erased since after it = %v, %v; want none", later, err)
	}

	done := t0.Add(2 * time.Minute)
	again.Status, again.FinishedAt = notify.ErasureFinished, &done
	noErr(t, es.SaveErasure(ctx, again))
	fin, err := es.GetErasure(ctx, hash)
	noErr(t, err)
	if fin.Status != notify.ErasureFinished || fin.UserID != "" || fin.Cursor != "" || fin.FinishedAt == nil ||
		fin.Removed[notify.EraseDevices] != 2 {
		t.Fatalf("finished erasure = %+v, want finished, without the user id, with its counts", fin)
	}
	sameTimePtr(t, "finished_at", fin.FinishedAt, &done)
	// A finished erasure cannot be changed, but the user can be erased again (registered since).
	wantCode(t, es.SaveErasure(ctx, again), notify.ECONFLICT)
	next, created, err := es.BeginErasure(ctx, notify.Erasure{UserHash: hash, UserID: "rec-1", Actor: "crm", RequestedAt: t0.Add(time.Hour)})
	noErr(t, err)
	if !created || next.Status != notify.ErasureRunning || next.Actor != "crm" {
		t.Fatalf("begin after finished = %+v created=%v, want a new running erasure", next, created)
	}
	erased, err = es.ErasedSince(ctx, t0.Add(-time.Hour))
	noErr(t, err)
	sameTime(t, "tombstone of the second erasure", erased[hash], t0.Add(time.Hour))
}

// eraseFixture gives "gone" and "stays" every kind of data a store keeps on a user, and returns
// the ids of a notification to gone alone and one to both.
func eraseFixture(t *testing.T, s notify.Store) (alone, both string) {
	ctx := t.Context()
	for _, u := range []string{"gone", "stays"} {
		noErr(t, s.PutDevice(ctx, device(u, "tok-"+u)))
		noErr(t, s.PutDevice(ctx, notify.Device{UserID: u, Platform: notify.PlatformWebPush, App: "web",
			Token: `{"endpoint":"https://push.example.com/` + u + `"}`, Environment: "production", UpdatedAt: t0}))
		noErr(t, s.PutContact(ctx, notify.Contact{UserID: u, Email: u + "@example.com", Phone: "+8210555" + map[string]string{"gone": "10001", "stays": "20002"}[u], UpdatedAt: t0}))
		noErr(t, s.PutPreferences(ctx, notify.Preferences{UserID: u, MarketingConsent: ptr(t0), UpdatedAt: t0}))
		noErr(t, s.Suppress(ctx, notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelEmail, u+"@example.com"),
			Masked: notify.MaskAddress(notify.ChannelEmail, u+"@example.com"), Channel: notify.ChannelEmail, Reason: "bounce", CreatedAt: t0}))
	}
	// More inbox items than one page of any store's deletes.
	var items []notify.InboxItem
	for i := range 510 {
		items = append(items, inboxItem("gone", fmt.Sprintf("n_inbox_%03d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	items = append(items, inboxItem("stays", "n_inbox_000", t0))
	putInbox(t, s, items...)
	putBroadcast(t, s, broadcast("b_erase", t0, notify.BroadcastTarget{App: "web"}))
	noErr(t, s.MarkRead(ctx, "gone", "b_erase", t0.Add(time.Minute)))
	noErr(t, s.MarkRead(ctx, "stays", "b_erase", t0.Add(time.Minute)))

	n := newNotification("shop", "")
	n.Recipients = []notify.Recipient{{UserID: "gone"}}
	n.Content = notify.Content{Title: "Hi Gone", Body: "Your order 1234 has shipped"}
	mustCreateNotification(t, s, n)
	ds := []notify.Delivery{
		{ID: "d_alone_push", NotificationID: n.ID, UserID: "gone", Channel: notify.ChannelPush, Provider: notify.ProviderFCM,
			App: "default", AddressMasked: notify.MaskToken("tok-gone"), Status: notify.DeliveryPending, UpdatedAt: t0},
		{ID: "d_alone_mail", NotificationID: n.ID, UserID: "gone", Channel: notify.ChannelEmail, Provider: notify.ProviderSES,
			AddressMasked: notify.MaskAddress(notify.ChannelEmail, "gone@example.com"), Status: notify.DeliveryFailed,
			Reason: notify.ReasonBounced, Detail: "550 gone@example.com: no such user", UpdatedAt: t0},
	}
	createChunk(t, s, n.ID, 0, ds)
	alone = n.ID

	m := newNotification("shop", "")
	m.ID = notify.NewID("n_", t0.Add(time.Second))
	m.Recipients = []notify.Recipient{{UserID: "gone"}, {UserID: "stays"}}
	mustCreateNotification(t, s, m)
	createChunk(t, s, m.ID, 0, []notify.Delivery{
		{ID: "d_both_gone", NotificationID: m.ID, UserID: "gone", Channel: notify.ChannelPush, Provider: notify.ProviderFCM,
			App: "default", AddressMasked: notify.MaskToken("tok-gone"), Status: notify.DeliveryPending, UpdatedAt: t0},
		{ID: "d_both_stays", NotificationID: m.ID, UserID: "stays", Channel: notify.ChannelPush, Provider: notify.ProviderFCM,
			App: "default", AddressMasked: notify.MaskToken("tok-stays"), Status: notify.DeliveryPending, UpdatedAt: t0},
	})
	return alone, m.ID
}

// eraseAll runs every step of gone's erasure to its end, from the cursor of each step given in
// from (a resumed erasure), and returns what each step changed.
func eraseAll(t *testing.T, es notify.ErasureStore, user string, fromStep int, fromCursor string) map[string]int {
	t.Helper()
	changed := map[string]int{}
	for i := fromStep; i < len(notify.ErasureSteps); i++ {
		step, cursor := notify.ErasureSteps[i], ""
		if i == fromStep {
			cursor = fromCursor
		}
		for calls := 0; ; calls++ {
			if calls > 100 {
				t.Fatalf("step %s did not end in 100 calls", step)
			}
			k, next, err := es.EraseStep(t.Context(), user, step, cursor)
			noErr(t, err)
			changed[step] += k
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return changed
}

// checkErased checks that nothing of gone is left but hashes, and that stays lost nothing.
func checkErased(t *testing.T, s notify.Store, alone, both string) {
	t.Helper()
	ctx := t.Context()
	devs := listDevices(t, s, "gone", "stays")
	if len(devs["gone"]) != 0 || len(devs["stays"]) != 2 {
		t.Fatalf("devices after the erasure: gone %d, stays %d; want 0 and 2", len(devs["gone"]), len(devs["stays"]))
	}
	contacts, err := s.GetContacts(ctx, []string{"gone", "stays"})
	noErr(t, err)
	if _, ok := contacts["gone"]; ok || contacts["stays"].Email != "stays@example.com" {
		t.Fatalf("contacts after the erasure = %+v, want only stays'", contacts)
	}
	if f, ok := s.(notify.AddressFinder); ok {
		_, err := f.UserByAddress(ctx, notify.ChannelEmail, "gone@example.com")
		wantCode(t, err, notify.ENOTFOUND)
		_, err = f.UserByAddress(ctx, notify.ChannelPush, "tok-gone")
		wantCode(t, err, notify.ENOTFOUND)
		if u, err := f.UserByAddress(ctx, notify.ChannelEmail, "stays@example.com"); err != nil || u != "stays" {
			t.Fatalf("stays' email belongs to %q, %v", u, err)
		}
	}
	prefs, err := s.GetPreferences(ctx, []string{"gone", "stays"})
	noErr(t, err)
	if _, ok := prefs["gone"]; ok || prefs["stays"].MarketingConsent == nil {
		t.Fatalf("preferences after the erasure = %+v, want only stays'", prefs)
	}
	goneKey, staysKey := notify.AddressKey(notify.ChannelEmail, "gone@example.com"), notify.AddressKey(notify.ChannelEmail, "stays@example.com")
	sup, err := s.Suppressed(ctx, []string{goneKey, staysKey})
	noErr(t, err)
	if g, ok := sup[goneKey]; !ok || g.Masked != "" || g.Reason != "bounce" {
		t.Fatalf("gone's suppression = %+v (kept %v), want kept by its hash alone", g, ok)
	}
	if sup[staysKey].Masked == "" {
		t.Fatalf("stays' suppression lost its masked address: %+v", sup[staysKey])
	}
	now := t0.Add(time.Hour)
	if left := listInbox(t, s, "gone", 1000, now); len(left) != 0 {
		t.Fatalf("gone's inbox holds %d items after the erasure: %v", len(left), inboxIDs(left))
	}
	// The broadcast is the app's, not gone's: a new registration would see it unread again.
	if got := inboxIDs(listInbox(t, s, "stays", 1000, now)); len(got) != 2 {
		t.Fatalf("stays' inbox = %v, want their item and the broadcast", got)
	}
	if it := findItem(t, s, "stays", "b_erase", now); it.ReadAt == nil {
		t.Fatal("stays' read marker of the broadcast was removed")
	}

	hash := notify.UserHash("gone")
	rs, err := s.GetRecipients(ctx, alone, 0, 10)
	noErr(t, err)
	if len(rs) != 1 || rs[0] != (notify.Recipient{UserID: hash}) {
		t.Fatalf("recipients of the notification to gone alone = %+v, want the hash", rs)
	}
	n, err := s.GetNotification(ctx, alone)
	noErr(t, err)
	if !n.Content.IsZero() || n.Service != "shop" || n.RecipientCount != 1 {
		t.Fatalf("notification to gone alone = %+v, want its content dropped, the rest kept", n)
	}
	if page, _, err := notificationLister(t, s).ListNotifications(ctx, notify.NotificationFilter{User: "gone"}, "", 10); err != nil || len(page) != 0 {
		t.Fatalf("notifications listed under gone after the erasure: %v, %v", page, err)
	}
	page, _, err := notificationLister(t, s).ListNotifications(ctx, notify.NotificationFilter{User: hash}, "", 10)
	noErr(t, err)
	if len(page) != 1 || page[0].ID != alone {
		t.Fatalf("notifications listed under gone's hash = %+v, want %s", page, alone)
	}
	st := getStats(t, s, alone)
	if st.Channels[notify.ChannelPush].Total != 1 || st.Channels[notify.ChannelEmail].Failed != 1 {
		t.Fatalf("counts of the notification to gone changed: %+v", st.Channels)
	}
	for _, d := range listAll(t, s, alone, 100) {
		if d.UserID != hash || d.AddressMasked != "" || d.Detail != "" {
			t.Fatalf("delivery %s after the erasure = %+v, want the hash and no address", d.ID, d)
		}
	}
	got := byID(listAll(t, s, both, 100))
	if got["d_both_stays"].UserID != "stays" || got["d_both_stays"].AddressMasked == "" {
		t.Fatalf("stays' delivery changed: %+v", got["d_both_stays"])
	}
	if rs, err := s.GetRecipients(ctx, both, 0, 10); err != nil || rs[1].UserID != "stays" {
		t.Fatalf("recipients of the notification to both = %+v, %v; want stays kept", rs, err)
	}
}

func testEraseEverything(t *testing.T, s notify.Store) {
	es := eraser(t, s)
	alone, both := eraseFixture(t, s)
	changed := eraseAll(t, es, "gone", 0, "")
	checkErased(t, s, alone, both)
	for step, want := range map[string]int{notify.EraseDevices: 2, notify.EraseContact: 1, notify.ErasePreferences: 1,
		notify.EraseSuppressions: 1, notify.EraseSent: 1} {
		if changed[step] != want {
			t.Errorf("step %s changed %d, want %d (all: %v)", step, changed[step], want, changed)
		}
	}
	if changed[notify.EraseInbox] < 511 {
		t.Errorf("step inbox changed %d, want the 510 items and the marker", changed[notify.EraseInbox])
	}
	// Run again: nothing is left to change, and nothing else is touched.
	again := eraseAll(t, es, "gone", 0, "")
	for step, k := range again {
		if k != 0 {
			t.Errorf("a second erasure changed %d in step %s", k, step)
		}
	}
	checkErased(t, s, alone, both)
	_, _, err := es.EraseStep(t.Context(), "gone", "everything", "")
	wantCode(t, err, notify.EINVALID)
}

// testEraseResumed stops an erasure in the middle of its inbox step, as a crash would, and goes
// on from the checkpoint; then runs it again from the very start: both end as one run does.
func testEraseResumed(t *testing.T, s notify.Store) {
	es := eraser(t, s)
	alone, both := eraseFixture(t, s)
	inbox := 0
	for i, step := range notify.ErasureSteps {
		if step == notify.EraseInbox {
			inbox = i
		}
	}
	for _, step := range notify.ErasureSteps[:inbox] {
		for cursor := ""; ; {
			_, next, err := es.EraseStep(t.Context(), "gone", step, cursor)
			noErr(t, err)
			if cursor = next; next == "" {
				break
			}
		}
	}
	k, next, err := es.EraseStep(t.Context(), "gone", notify.EraseInbox, "")
	noErr(t, err)
	if next == "" || k == 0 {
		t.Fatalf("the first call of the inbox step removed %d and ended it: 510 items are more than one call's work", k)
	}
	// The crash: the checkpoint holds the cursor, and the run goes on from it.
	eraseAll(t, es, "gone", inbox, next)
	checkErased(t, s, alone, both)
	eraseAll(t, es, "gone", 0, "")
	checkErased(t, s, alone, both)
}
