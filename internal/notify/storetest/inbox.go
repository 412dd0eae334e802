package storetest

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
)

var inboxCases = []storeCase{
	{"Inbox/RoundTrip", testInboxRoundTrip},
	{"Inbox/NewestFirst", testInboxNewestFirst},
	{"Inbox/Pagination", testInboxPagination},
	{"Inbox/ExpiredInvisible", testInboxExpired},
	{"Inbox/PutIdempotent", testInboxPutIdempotent},
	{"Inbox/MarkRead", testInboxMarkRead},
	{"Inbox/MarkAllRead", testInboxMarkAllRead},
	{"Inbox/Delete", testInboxDelete},
	{"Inbox/OldItemsInALongInbox", testInboxOldItems},
	{"Inbox/UsersIsolated", testInboxIsolated},
	{"Inbox/Broadcast/Targeting", testBroadcastTargeting},
	{"Inbox/Broadcast/TargetedAtReadTime", testBroadcastReadTime},
	{"Inbox/Broadcast/MergedOrderAndPagination", testBroadcastMerged},
	{"Inbox/Broadcast/OwnItemShadows", testBroadcastShadowed},
	{"Inbox/Broadcast/UnreadCount", testBroadcastUnread},
	{"Inbox/Broadcast/MarkRead", testBroadcastMarkRead},
	{"Inbox/Broadcast/MarkAllRead", testBroadcastMarkAllRead},
	{"Inbox/Broadcast/Delete", testBroadcastDelete},
	{"Inbox/Broadcast/Withdraw", testBroadcastWithdraw},
	{"Inbox/Broadcast/PutIdempotent", testBroadcastPutIdempotent},
	{"Inbox/Broadcast/ExpiredInvisible", testBroadcastExpired},
	{"Inbox/Broadcast/Invalid", testBroadcastInvalid},
}

func inboxItem(user, id string, createdAt time.Time) notify.InboxItem {
	return notify.InboxItem{UserID: user, ID: id, Service: "billing", Category: notify.CategoryTransactional,
		Title: "Title " + id, Body: "Body " + id, CreatedAt: createdAt}
}

func putInbox(t *testing.T, s notify.Store, items ...notify.InboxItem) {
	t.Helper()
	noErr(t, s.PutInboxItems(t.Context(), items))
}

// listInbox pages through a user's whole inbox at now with page size limit.
func listInbox(t *testing.T, s notify.Store, user string, limit int, now time.Time) []notify.InboxItem {
	t.Helper()
	var all []notify.InboxItem
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("ListInbox never returned an empty next cursor")
		}
		items, next, err := s.ListInbox(t.Context(), user, cursor, limit, now)
		noErr(t, err)
		if len(items) > limit {
			t.Fatalf("ListInbox returned %d items, limit %d", len(items), limit)
		}
		all = append(all, items...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func inboxIDs(items []notify.InboxItem) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// newestFirst is the order ListInbox promises: CreatedAt descending, then ID descending.
func newestFirst(items []notify.InboxItem) []string {
	s := slices.Clone(items)
	slices.SortFunc(s, func(a, b notify.InboxItem) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return inboxIDs(s)
}

func unread(t *testing.T, s notify.Store, user string, now time.Time) int {
	t.Helper()
	n, err := s.UnreadCount(t.Context(), user, now)
	noErr(t, err)
	return n
}

func findItem(t *testing.T, s notify.Store, user, id string, now time.Time) notify.InboxItem {
	t.Helper()
	for _, it := range listInbox(t, s, user, 100, now) {
		if it.ID == id {
			return it
		}
	}
	t.Fatalf("inbox of %s has no item %s", user, id)
	return notify.InboxItem{}
}

func testInboxRoundTrip(t *testing.T, s notify.Store) {
	it := inboxItem("u1", "n_1", t0)
	it.Category = notify.CategoryMarketing
	it.Data = map[string]string{"coupon": "SPRING"}
	it.Link = "app://coupons/spring"
	it.ImageURL = "https://cdn.example.com/spring.png"
	it.ExpiresAt = ptr(t0.Add(7 * 24 * time.Hour))
	putInbox(t, s, it)

	got := findItem(t, s, "u1", "n_1", t0)
	if got.ID != it.ID || got.Service != it.Service || got.Category != it.Category || got.Title != it.Title ||
		got.Body != it.Body || got.Link != it.Link || got.ImageURL != it.ImageURL || !reflect.DeepEqual(got.Data, it.Data) {
		t.Fatalf("item = %+v, want %+v", got, it)
	}
	sameTime(t, "CreatedAt", got.CreatedAt, it.CreatedAt)
	sameTimePtr(t, "ExpiresAt", got.ExpiresAt, it.ExpiresAt)
	sameTimePtr(t, "ReadAt", got.ReadAt, nil)
}

func testInboxNewestFirst(t *testing.T, s notify.Store) {
	var items []notify.InboxItem
	// Groups of three share a CreatedAt, so the ID tie-break decides within a group; insertion
	// order is scrambled so nothing depends on it.
	for _, i := range []int{4, 0, 7, 2, 9, 1, 5, 11, 3, 8, 10, 6} {
		items = append(items, inboxItem("u1", fmt.Sprintf("n_%02d", (i*5)%12), t0.Add(time.Duration(i/3)*time.Second)))
	}
	putInbox(t, s, items...)
	got, next, err := s.ListInbox(t.Context(), "u1", "", 50, t0)
	noErr(t, err)
	if next != "" {
		t.Fatalf("next = %q with everything on one page, want \"\"", next)
	}
	if g, w := inboxIDs(got), newestFirst(items); !slices.Equal(g, w) {
		t.Fatalf("order = %v, want %v", g, w)
	}
}

func testInboxPagination(t *testing.T, s notify.Store) {
	var items []notify.InboxItem
	for i := range 23 {
		items = append(items, inboxItem("u1", fmt.Sprintf("n_%02d", (i*7)%23), t0.Add(time.Duration(i/4)*time.Minute)))
	}
	putInbox(t, s, items...)
	want := newestFirst(items)
	for _, limit := range []int{1, 4, 5, 22, 23, 24} {
		if got := inboxIDs(listInbox(t, s, "u1", limit, t0)); !slices.Equal(got, want) {
			t.Fatalf("limit %d: pages joined = %v, want %v", limit, got, want)
		}
	}
	first, next, err := s.ListInbox(t.Context(), "u1", "", 5, t0)
	noErr(t, err)
	if len(first) != 5 || next == "" {
		t.Fatalf("first page: %d items, next %q; want 5 and a cursor", len(first), next)
	}
	// A new item arriving between pages does not shift the rest of the walk.
	putInbox(t, s, inboxItem("u1", "n_zz_new", t0.Add(time.Hour)))
	var rest []notify.InboxItem
	for next != "" {
		var page []notify.InboxItem
		page, next, err = s.ListInbox(t.Context(), "u1", next, 5, t0)
		noErr(t, err)
		rest = append(rest, page...)
	}
	if got := inboxIDs(rest); !slices.Equal(got, want[5:]) {
		t.Fatalf("pages after the first = %v, want %v", got, want[5:])
	}
}

func testInboxExpired(t *testing.T, s notify.Store) {
	now := t0.Add(time.Hour)
	expiredNow := inboxItem("u1", "n_a", t0)
	expiredNow.ExpiresAt = ptr(now) // ExpiresAt <= now: gone
	expiredEarlier := inboxItem("u1", "n_b", t0.Add(time.Second))
	expiredEarlier.ExpiresAt = ptr(now.Add(-time.Second))
	later := inboxItem("u1", "n_c", t0.Add(2*time.Second))
	later.ExpiresAt = ptr(now.Add(time.Second))
	never := inboxItem("u1", "n_d", t0.Add(3*time.Second))
	putInbox(t, s, expiredNow, expiredEarlier, later, never)

	for _, limit := range []int{1, 10} {
		if got := inboxIDs(listInbox(t, s, "u1", limit, now)); !slices.Equal(got, []string{"n_d", "n_c"}) {
			t.Fatalf("limit %d: visible = %v, want [n_d n_c]", limit, got)
		}
	}
	if got := unread(t, s, "u1", now); got != 2 {
		t.Fatalf("UnreadCount = %d, want 2", got)
	}
	after := now.Add(2 * time.Second)
	if got := inboxIDs(listInbox(t, s, "u1", 10, after)); !slices.Equal(got, []string{"n_d"}) {
		t.Fatalf("visible later = %v, want [n_d]", got)
	}
	if got := unread(t, s, "u1", after); got != 1 {
		t.Fatalf("UnreadCount later = %d, want 1", got)
	}
	// Before any expiry everything is there.
	if got := unread(t, s, "u1", t0.Add(4*time.Second)); got != 4 {
		t.Fatalf("UnreadCount before expiry = %d, want 4", got)
	}
}

func testInboxPutIdempotent(t *testing.T, s notify.Store) {
	first := inboxItem("u1", "n_1", t0)
	putInbox(t, s, first)
	readAt := t0.Add(time.Minute)
	noErr(t, s.MarkRead(t.Context(), "u1", "n_1", readAt))

	// A redelivered prepare step writes the item again (its CreatedAt is the notification's),
	// with other content and unread.
	again := inboxItem("u1", "n_1", t0)
	again.Title = "rewritten"
	putInbox(t, s, again, inboxItem("u1", "n_2", t0))
	putInbox(t, s, again)

	items := listInbox(t, s, "u1", 10, t0.Add(2*time.Hour))
	if len(items) != 2 {
		t.Fatalf("inbox holds %d items, want 2", len(items))
	}
	got := findItem(t, s, "u1", "n_1", t0.Add(2*time.Hour))
	if got.Title != first.Title || !got.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("existing item overwritten: %+v", got)
	}
	sameTimePtr(t, "ReadAt", got.ReadAt, &readAt)
}

func testInboxMarkRead(t *testing.T, s notify.Store) {
	putInbox(t, s, inboxItem("u1", "n_1", t0), inboxItem("u1", "n_2", t0), inboxItem("u2", "n_3", t0))
	if got := unread(t, s, "u1", t0); got != 2 {
		t.Fatalf("UnreadCount = %d, want 2", got)
	}
	first := t0.Add(time.Minute)
	noErr(t, s.MarkRead(t.Context(), "u1", "n_1", first))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_1", first.Add(time.Minute)))
	if got := unread(t, s, "u1", t0); got != 1 {
		t.Fatalf("UnreadCount after marking one item twice = %d, want 1", got)
	}
	sameTimePtr(t, "ReadAt", findItem(t, s, "u1", "n_1", t0).ReadAt, &first)
	sameTimePtr(t, "ReadAt of the other item", findItem(t, s, "u1", "n_2", t0).ReadAt, nil)

	wantCode(t, s.MarkRead(t.Context(), "u1", "n_3", first), notify.ENOTFOUND) // u2's item
	wantCode(t, s.MarkRead(t.Context(), "u1", "n_missing", first), notify.ENOTFOUND)
	if got := unread(t, s, "u2", t0); got != 1 {
		t.Fatalf("u2 UnreadCount = %d, want 1", got)
	}
}

func testInboxMarkAllRead(t *testing.T, s notify.Store) {
	for i := range 5 {
		putInbox(t, s, inboxItem("u1", fmt.Sprintf("n_%d", i), t0.Add(time.Duration(i)*time.Second)))
	}
	putInbox(t, s, inboxItem("u2", "n_other", t0))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_0", t0))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_3", t0))

	n, err := s.MarkAllRead(t.Context(), "u1", t0.Add(time.Minute))
	noErr(t, err)
	if n != 3 {
		t.Fatalf("MarkAllRead = %d, want 3", n)
	}
	if got := unread(t, s, "u1", t0.Add(time.Minute)); got != 0 {
		t.Fatalf("UnreadCount = %d after MarkAllRead, want 0", got)
	}
	for _, it := range listInbox(t, s, "u1", 10, t0.Add(time.Minute)) {
		if it.ReadAt == nil {
			t.Fatalf("%s unread after MarkAllRead", it.ID)
		}
	}
	n, err = s.MarkAllRead(t.Context(), "u1", t0.Add(2*time.Minute))
	noErr(t, err)
	if n != 0 {
		t.Fatalf("second MarkAllRead = %d, want 0", n)
	}
	if got := unread(t, s, "u2", t0); got != 1 {
		t.Fatalf("u2 UnreadCount = %d, want 1", got)
	}
}

func testInboxDelete(t *testing.T, s notify.Store) {
	putInbox(t, s, inboxItem("u1", "n_1", t0), inboxItem("u1", "n_2", t0), inboxItem("u2", "n_3", t0))
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "n_1"))
	if got := inboxIDs(listInbox(t, s, "u1", 10, t0)); !slices.Equal(got, []string{"n_2"}) {
		t.Fatalf("inbox after delete = %v, want [n_2]", got)
	}
	wantCode(t, s.DeleteInboxItem(t.Context(), "u1", "n_1"), notify.ENOTFOUND)
	wantCode(t, s.DeleteInboxItem(t.Context(), "u1", "n_3"), notify.ENOTFOUND) // u2's item
	if got := inboxIDs(listInbox(t, s, "u2", 10, t0)); !slices.Equal(got, []string{"n_3"}) {
		t.Fatalf("u2's inbox = %v, want [n_3]", got)
	}
}

func testInboxOldItems(t *testing.T, s notify.Store) {
	// An item far down a long inbox is found by its id as readily as the newest one.
	const n = 150
	items := make([]notify.InboxItem, n)
	for i := range n {
		items[i] = inboxItem("u1", fmt.Sprintf("n_%03d", i), t0.Add(time.Duration(i)*time.Second))
	}
	putInbox(t, s, items...)
	now := t0.Add(n * time.Second)
	noErr(t, s.MarkRead(t.Context(), "u1", "n_000", now))   // the oldest
	noErr(t, s.MarkRead(t.Context(), "u1", "n_149", now))   // the newest
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "n_001")) // the second oldest
	if got := unread(t, s, "u1", now); got != n-3 {
		t.Fatalf("UnreadCount = %d, want %d", got, n-3)
	}
	sameTimePtr(t, "ReadAt of the oldest", findItem(t, s, "u1", "n_000", now).ReadAt, &now)
	wantCode(t, s.DeleteInboxItem(t.Context(), "u1", "n_001"), notify.ENOTFOUND)
	wantCode(t, s.MarkRead(t.Context(), "u1", "n_001", now), notify.ENOTFOUND)
	all := listInbox(t, s, "u1", 1000, now)
	if len(all) != n-1 || all[len(all)-1].ID != "n_000" {
		t.Fatalf("inbox holds %d items ending with %s, want %d ending with n_000", len(all), all[len(all)-1].ID, n-1)
	}
}

func testInboxIsolated(t *testing.T, s notify.Store) {
	// One notification lands in several inboxes under the same item id.
	putInbox(t, s, inboxItem("u1", "n_shared", t0), inboxItem("u2", "n_shared", t0),
		inboxItem("u1", "n_u1", t0.Add(time.Second)), inboxItem("u2", "n_u2", t0.Add(time.Second)))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_shared", t0))
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "n_u1"))

	if got := inboxIDs(listInbox(t, s, "u1", 10, t0)); !slices.Equal(got, []string{"n_shared"}) {
		t.Fatalf("u1 inbox = %v, want [n_shared]", got)
	}
	if got := inboxIDs(listInbox(t, s, "u2", 10, t0)); !slices.Equal(got, []string{"n_u2", "n_shared"}) {
		t.Fatalf("u2 inbox = %v, want [n_u2 n_shared]", got)
	}
	if got := unread(t, s, "u2", t0); got != 2 {
		t.Fatalf("u2 UnreadCount = %d, want 2", got)
	}
	if got := findItem(t, s, "u2", "n_shared", t0).ReadAt; got != nil {
		t.Fatalf("u2's copy read at %v after u1 read theirs", got)
	}
	if items := listInbox(t, s, "u3", 10, t0); len(items) != 0 {
		t.Fatalf("u3 inbox = %v, want empty", inboxIDs(items))
	}
}

// ---- broadcasts (fan-out on read) ----

func broadcast(id string, createdAt time.Time, targets ...notify.BroadcastTarget) notify.Broadcast {
	return notify.Broadcast{ID: id, Service: "promo", Category: notify.CategoryTransactional,
		Title: "Title " + id, Body: "Body " + id, CreatedAt: createdAt, Targets: targets}
}

func putBroadcast(t *testing.T, s notify.Store, bs ...notify.Broadcast) {
	t.Helper()
	for _, b := range bs {
		noErr(t, s.PutBroadcast(t.Context(), b))
	}
}

// appDevice registers token for user in app.
func appDevice(t *testing.T, s notify.Store, user, token, app string, pl notify.Platform, locale string) {
	t.Helper()
	noErr(t, s.PutDevice(t.Context(), notify.Device{UserID: user, Platform: pl, App: app, Token: token,
		Environment: "production", Locale: locale, UpdatedAt: t0}))
}

func visibleIDs(t *testing.T, s notify.Store, user string, now time.Time) []string {
	t.Helper()
	ids := inboxIDs(listInbox(t, s, user, 100, now))
	slices.Sort(ids)
	return ids
}

func testBroadcastTargeting(t *testing.T, s notify.Store) {
	ctx := t.Context()
	consent := t0.Add(-time.Hour)
	// u1: two shop phones (Korean), marketing consent. u2: a shop iPad in English, no consent.
	// u3: only a device of another app. u4: no device. u5: a shop phone in Korean, consented to
	// marketing but opted out of marketing in the inbox.
	appDevice(t, s, "u1", "tok-u1-a", "shop", notify.PlatformFCM, "ko-KR")
	appDevice(t, s, "u1", "tok-u1-b", "shop", notify.PlatformFCM, "ko-KR")
	appDevice(t, s, "u2", "tok-u2", "shop", notify.PlatformAPNs, "en")
	appDevice(t, s, "u3", "tok-u3", "news", notify.PlatformFCM, "en")
	appDevice(t, s, "u5", "tok-u5", "shop", notify.PlatformFCM, "ko")
	noErr(t, s.PutPreferences(ctx, notify.Preferences{UserID: "u1", MarketingConsent: &consent, UpdatedAt: t0}))
	noErr(t, s.PutPreferences(ctx, notify.Preferences{UserID: "u5", MarketingConsent: &consent, UpdatedAt: t0,
		OptOut: map[notify.Channel][]notify.Category{notify.ChannelInbox: {notify.CategoryMarketing}}}))

	all := broadcast("b_all", t0, notify.BroadcastTarget{App: "shop"})
	all.Data = map[string]string{"coupon": "SPRING"}
	all.Link, all.ImageURL = "app://coupons/spring", "https://cdn.example.com/spring.png"
	all.ExpiresAt = ptr(t0.Add(7 * 24 * time.Hour))
	apns := broadcast("b_apns", t0.Add(time.Second), notify.BroadcastTarget{App: "shop", Platform: notify.PlatformAPNs})
	ko := broadcast("b_ko", t0.Add(2*time.Second), notify.BroadcastTarget{App: "shop", Locale: "ko"})
	ads := broadcast("b_ads", t0.Add(3*time.Second), notify.BroadcastTarget{App: "shop", MarketingConsent: true})
	ads.Category = notify.CategoryMarketing
	multi := broadcast("b_multi", t0.Add(4*time.Second), notify.BroadcastTarget{App: "news"},
		notify.BroadcastTarget{App: "shop", Locale: "en"})
	putBroadcast(t, s, all, apns, ko, ads, multi)

	for user, want := range map[string][]string{
		"u1": {"b_ads", "b_all", "b_ko"},
		"u2": {"b_all", "b_apns", "b_multi"},
		"u3": {"b_multi"},
		"u4": nil,
		"u5": {"b_all", "b_ko"},
	} {
		if got := visibleIDs(t, s, user, t0); !slices.Equal(got, want) {
			t.Fatalf("%s sees %v, want %v", user, got, want)
		}
		if got := unread(t, s, user, t0); got != len(want) {
			t.Fatalf("%s UnreadCount = %d, want %d", user, got, len(want))
		}
	}
	// Content as stored, under the broadcast's id, unread.
	got := findItem(t, s, "u1", "b_all", t0)
	if got.UserID != "u1" || got.Service != all.Service || got.Category != all.Category || got.Title != all.Title ||
		got.Body != all.Body || got.Link != all.Link || got.ImageURL != all.ImageURL || !reflect.DeepEqual(got.Data, all.Data) {
		t.Fatalf("broadcast item = %+v, want the content of %+v", got, all)
	}
	sameTime(t, "CreatedAt", got.CreatedAt, all.CreatedAt)
	sameTimePtr(t, "ExpiresAt", got.ExpiresAt, all.ExpiresAt)
	sameTimePtr(t, "ReadAt", got.ReadAt, nil)
	// Invisible broadcasts cannot be marked or deleted by who does not see them.
	wantCode(t, s.MarkRead(ctx, "u4", "b_all", t0), notify.ENOTFOUND)
	wantCode(t, s.MarkRead(ctx, "u3", "b_all", t0), notify.ENOTFOUND)
	wantCode(t, s.DeleteInboxItem(ctx, "u1", "b_apns"), notify.ENOTFOUND)
	wantCode(t, s.MarkRead(ctx, "u5", "b_ads", t0), notify.ENOTFOUND)
}

func testBroadcastReadTime(t *testing.T, s notify.Store) {
	putBroadcast(t, s, broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"}))
	if got := visibleIDs(t, s, "u1", t0); len(got) != 0 {
		t.Fatalf("u1 without devices sees %v", got)
	}
	// Targeting is judged at each read: a device registered later brings the broadcast in, and
	// removing the last matching device takes it out.
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	if got := visibleIDs(t, s, "u1", t0); !slices.Equal(got, []string{"b_1"}) {
		t.Fatalf("u1 after registering sees %v, want [b_1]", got)
	}
	noErr(t, s.DeleteDevice(t.Context(), "u1", "tok-1"))
	if got := visibleIDs(t, s, "u1", t0); len(got) != 0 {
		t.Fatalf("u1 after removing the device sees %v", got)
	}
}

func testBroadcastMerged(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	var own []notify.InboxItem
	var all []notify.InboxItem
	// 17 own items and 9 broadcasts interleaved, with CreatedAt ties inside and across the two
	// kinds, so the id tie-break decides between an own item and a broadcast too.
	for i := range 17 {
		it := inboxItem("u1", fmt.Sprintf("n_%02d", (i*7)%17), t0.Add(time.Duration(i/3)*time.Minute))
		own = append(own, it)
		all = append(all, it)
	}
	putInbox(t, s, own...)
	for i := range 9 {
		b := broadcast(fmt.Sprintf("n_b%d", (i*4)%9), t0.Add(time.Duration(i/2)*time.Minute), notify.BroadcastTarget{App: "shop"})
		putBroadcast(t, s, b)
		all = append(all, b.Item("u1", nil))
	}
	putInbox(t, s, inboxItem("u2", "n_other", t0)) // another user's item never shows
	want := newestFirst(all)
	for _, limit := range []int{1, 2, 4, 5, 9, 25, 26, 27, 100} {
		if got := inboxIDs(listInbox(t, s, "u1", limit, t0)); !slices.Equal(got, want) {
			t.Fatalf("limit %d: pages joined = %v, want %v", limit, got, want)
		}
	}
	first, next, err := s.ListInbox(t.Context(), "u1", "", 5, t0)
	noErr(t, err)
	if len(first) != 5 || next == "" {
		t.Fatalf("first page: %d items, next %q; want 5 and a cursor", len(first), next)
	}
	// A broadcast and an item arriving between pages do not shift the rest of the walk.
	putBroadcast(t, s, broadcast("n_zz_bnew", t0.Add(time.Hour), notify.BroadcastTarget{App: "shop"}))
	putInbox(t, s, inboxItem("u1", "n_zz_new", t0.Add(time.Hour)))
	var rest []notify.InboxItem
	for next != "" {
		var page []notify.InboxItem
		page, next, err = s.ListInbox(t.Context(), "u1", next, 5, t0)
		noErr(t, err)
		rest = append(rest, page...)
	}
	if got := inboxIDs(rest); !slices.Equal(got, want[5:]) {
		t.Fatalf("pages after the first = %v, want %v", got, want[5:])
	}
}

func testBroadcastShadowed(t *testing.T, s notify.Store) {
	// A campaign reaching u1 both through a user list (an own item) and through the app's devices
	// (the broadcast) shows once: the own item wins.
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	appDevice(t, s, "u2", "tok-2", "shop", notify.PlatformFCM, "")
	putBroadcast(t, s, broadcast("n_c", t0, notify.BroadcastTarget{App: "shop"}))
	mine := inboxItem("u1", "n_c", t0)
	mine.Title = "own copy"
	putInbox(t, s, mine)
	items := listInbox(t, s, "u1", 10, t0)
	if len(items) != 1 || items[0].Title != "own copy" {
		t.Fatalf("u1 inbox = %+v, want only the own item", items)
	}
	if got := unread(t, s, "u1", t0); got != 1 {
		t.Fatalf("u1 UnreadCount = %d, want 1", got)
	}
	n, err := s.MarkAllRead(t.Context(), "u1", t0)
	noErr(t, err)
	if n != 1 {
		t.Fatalf("MarkAllRead = %d, want 1", n)
	}
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "n_c")) // the own item
	if got := inboxIDs(listInbox(t, s, "u2", 10, t0)); !slices.Equal(got, []string{"n_c"}) {
		t.Fatalf("u2 inbox = %v, want [n_c]", got)
	}
}

func testBroadcastUnread(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	appDevice(t, s, "u2", "tok-2", "shop", notify.PlatformFCM, "")
	putInbox(t, s, inboxItem("u1", "n_1", t0), inboxItem("u1", "n_2", t0))
	putBroadcast(t, s, broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"}),
		broadcast("b_2", t0, notify.BroadcastTarget{App: "shop"}), broadcast("b_3", t0, notify.BroadcastTarget{App: "shop"}))
	if got := unread(t, s, "u1", t0); got != 5 {
		t.Fatalf("UnreadCount = %d, want 5 (2 own, 3 broadcasts)", got)
	}
	noErr(t, s.MarkRead(t.Context(), "u1", "b_2", t0))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_1", t0))
	if got := unread(t, s, "u1", t0); got != 3 {
		t.Fatalf("UnreadCount after two reads = %d, want 3", got)
	}
	if got := unread(t, s, "u2", t0); got != 3 {
		t.Fatalf("u2 UnreadCount = %d, want 3", got)
	}
}

func testBroadcastMarkRead(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	appDevice(t, s, "u2", "tok-2", "shop", notify.PlatformFCM, "")
	putBroadcast(t, s, broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"}),
		broadcast("b_2", t0, notify.BroadcastTarget{App: "shop"}))
	first := t0.Add(time.Minute)
	noErr(t, s.MarkRead(t.Context(), "u1", "b_1", first))
	noErr(t, s.MarkRead(t.Context(), "u1", "b_1", first.Add(time.Minute)))
	sameTimePtr(t, "u1 ReadAt", findItem(t, s, "u1", "b_1", t0).ReadAt, &first)
	sameTimePtr(t, "u1 ReadAt of the other broadcast", findItem(t, s, "u1", "b_2", t0).ReadAt, nil)
	sameTimePtr(t, "u2 ReadAt", findItem(t, s, "u2", "b_1", t0).ReadAt, nil)
	if got := unread(t, s, "u1", t0); got != 1 {
		t.Fatalf("u1 UnreadCount = %d, want 1", got)
	}
	if got := unread(t, s, "u2", t0); got != 2 {
		t.Fatalf("u2 UnreadCount = %d, want 2", got)
	}
	wantCode(t, s.MarkRead(t.Context(), "u1", "b_missing", first), notify.ENOTFOUND)
}

func testBroadcastMarkAllRead(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	appDevice(t, s, "u2", "tok-2", "shop", notify.PlatformFCM, "")
	putInbox(t, s, inboxItem("u1", "n_1", t0), inboxItem("u1", "n_2", t0))
	for i := range 4 {
		putBroadcast(t, s, broadcast(fmt.Sprintf("b_%d", i), t0.Add(time.Duration(i)*time.Second), notify.BroadcastTarget{App: "shop"}))
	}
	gone := broadcast("b_expired", t0, notify.BroadcastTarget{App: "shop"})
	gone.ExpiresAt = ptr(t0.Add(30 * time.Second))
	putBroadcast(t, s, gone)
	noErr(t, s.MarkRead(t.Context(), "u1", "b_1", t0))
	noErr(t, s.MarkRead(t.Context(), "u1", "n_2", t0))

	at := t0.Add(time.Minute) // b_expired is invisible by now: neither marked nor counted
	n, err := s.MarkAllRead(t.Context(), "u1", at)
	noErr(t, err)
	if n != 4 {
		t.Fatalf("MarkAllRead = %d, want 4 (1 own item, 3 broadcasts)", n)
	}
	if got := unread(t, s, "u1", at); got != 0 {
		t.Fatalf("UnreadCount after MarkAllRead = %d, want 0", got)
	}
	for _, it := range listInbox(t, s, "u1", 10, at) {
		if it.ReadAt == nil {
			t.Fatalf("%s unread after MarkAllRead", it.ID)
		}
	}
	sameTimePtr(t, "ReadAt of the broadcast read before", findItem(t, s, "u1", "b_1", at).ReadAt, &t0)
	if n, err = s.MarkAllRead(t.Context(), "u1", at.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("second MarkAllRead = %d, %v; want 0", n, err)
	}
	if got := unread(t, s, "u2", at); got != 4 {
		t.Fatalf("u2 UnreadCount = %d, want 4", got)
	}
}

func testBroadcastDelete(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	appDevice(t, s, "u2", "tok-2", "shop", notify.PlatformFCM, "")
	putBroadcast(t, s, broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"}),
		broadcast("b_2", t0, notify.BroadcastTarget{App: "shop"}))
	noErr(t, s.MarkRead(t.Context(), "u1", "b_1", t0))
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "b_1"))
	noErr(t, s.DeleteInboxItem(t.Context(), "u1", "b_2"))
	if got := visibleIDs(t, s, "u1", t0); len(got) != 0 {
		t.Fatalf("u1 after deleting sees %v", got)
	}
	if got := unread(t, s, "u1", t0); got != 0 {
		t.Fatalf("u1 UnreadCount = %d, want 0", got)
	}
	wantCode(t, s.DeleteInboxItem(t.Context(), "u1", "b_1"), notify.ENOTFOUND)
	wantCode(t, s.MarkRead(t.Context(), "u1", "b_2", t0), notify.ENOTFOUND)
	if n, err := s.MarkAllRead(t.Context(), "u1", t0); err != nil || n != 0 {
		t.Fatalf("MarkAllRead after deleting = %d, %v; want 0", n, err)
	}
	if got := visibleIDs(t, s, "u1", t0); len(got) != 0 {
		t.Fatalf("u1 after MarkAllRead sees %v", got)
	}
	// Deleted for u1 only.
	if got := visibleIDs(t, s, "u2", t0); !slices.Equal(got, []string{"b_1", "b_2"}) {
		t.Fatalf("u2 sees %v, want [b_1 b_2]", got)
	}
	if got := unread(t, s, "u2", t0); got != 2 {
		t.Fatalf("u2 UnreadCount = %d, want 2", got)
	}
	// Stored again (a retried campaign step), it stays deleted for u1.
	putBroadcast(t, s, broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"}))
	if got := visibleIDs(t, s, "u1", t0); len(got) != 0 {
		t.Fatalf("u1 after the broadcast was put again sees %v", got)
	}
}

func testBroadcastPutIdempotent(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	first := broadcast("b_1", t0, notify.BroadcastTarget{App: "shop"})
	putBroadcast(t, s, first)
	readAt := t0.Add(time.Minute)
	noErr(t, s.MarkRead(t.Context(), "u1", "b_1", readAt))

	again := broadcast("b_1", t0.Add(time.Hour), notify.BroadcastTarget{App: "shop"})
	again.Title = "rewritten"
	putBroadcast(t, s, again, again)

	items := listInbox(t, s, "u1", 10, t0.Add(2*time.Hour))
	if len(items) != 1 {
		t.Fatalf("inbox holds %v, want one broadcast", inboxIDs(items))
	}
	got := items[0]
	if got.Title != first.Title || !got.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("existing broadcast overwritten: %+v", got)
	}
	sameTimePtr(t, "ReadAt", got.ReadAt, &readAt)
}

func testBroadcastExpired(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	now := t0.Add(time.Hour)
	mk := func(id string, exp *time.Time) notify.Broadcast {
		b := broadcast(id, t0, notify.BroadcastTarget{App: "shop"})
		b.ExpiresAt = exp
		return b
	}
	putBroadcast(t, s, mk("b_a", ptr(now)), mk("b_b", ptr(now.Add(-time.Second))), mk("b_c", ptr(now.Add(time.Second))),
		mk("b_d", nil))
	putInbox(t, s, inboxItem("u1", "n_own", t0))
	for _, limit := range []int{1, 10} {
		if got := inboxIDs(listInbox(t, s, "u1", limit, now)); !slices.Equal(got, []string{"n_own", "b_d", "b_c"}) {
			t.Fatalf("limit %d: visible = %v, want [n_own b_d b_c]", limit, got)
		}
	}
	if got := unread(t, s, "u1", now); got != 3 {
		t.Fatalf("UnreadCount = %d, want 3", got)
	}
	wantCode(t, s.MarkRead(t.Context(), "u1", "b_a", now), notify.ENOTFOUND)
	if got := unread(t, s, "u1", t0); got != 5 {
		t.Fatalf("UnreadCount before any expiry = %d, want 5", got)
	}
	after := now.Add(2 * time.Second)
	if got := visibleIDs(t, s, "u1", after); !slices.Equal(got, []string{"b_d", "n_own"}) {
		t.Fatalf("visible later = %v, want [b_d n_own]", got)
	}
}

func testBroadcastInvalid(t *testing.T, s notify.Store) {
	for name, b := range map[string]notify.Broadcast{
		"no id":         broadcast("", t0, notify.BroadcastTarget{App: "shop"}),
		"no target":     broadcast("b_1", t0),
		"target no app": broadcast("b_1", t0, notify.BroadcastTarget{Platform: notify.PlatformFCM}),
		"bad platform":  broadcast("b_1", t0, notify.BroadcastTarget{App: "shop", Platform: "sms"}),
	} {
		if err := s.PutBroadcast(t.Context(), b); !notify.IsCode(err, notify.EINVALID) {
			t.Fatalf("%s: PutBroadcast = %v, want %s", name, err, notify.EINVALID)
		}
	}
}

func testBroadcastWithdraw(t *testing.T, s notify.Store) {
	appDevice(t, s, "u1", "tok-1", "shop", notify.PlatformFCM, "")
	putBroadcast(t, s, broadcast("b_kept", t0, notify.BroadcastTarget{App: "shop"}),
		broadcast("b_gone", t0.Add(time.Second), notify.BroadcastTarget{App: "shop"}))
	noErr(t, s.MarkRead(t.Context(), "u1", "b_gone", t0.Add(2*time.Second)))
	at := t0.Add(time.Minute)
	for range 2 { // idempotent
		noErr(t, s.WithdrawBroadcast(t.Context(), "b_gone", at))
	}
	noErr(t, s.WithdrawBroadcast(t.Context(), "b_never_stored", at))
	if got := visibleIDs(t, s, "u1", at.Add(-time.Second)); !slices.Equal(got, []string{"b_gone", "b_kept"}) {
		t.Fatalf("before the withdrawal time u1 sees %v, want both", got)
	}
	now := at.Add(time.Second)
	if got := visibleIDs(t, s, "u1", now); !slices.Equal(got, []string{"b_kept"}) {
		t.Fatalf("after the withdrawal u1 sees %v, want [b_kept]", got)
	}
	if got := unread(t, s, "u1", now); got != 1 {
		t.Fatalf("UnreadCount = %d, want 1", got)
	}
	wantCode(t, s.MarkRead(t.Context(), "u1", "b_gone", now), notify.ENOTFOUND)
}
