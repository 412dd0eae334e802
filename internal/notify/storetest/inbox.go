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
	{"Inbox/UsersIsolated", testInboxIsolated},
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

	// A redelivered prepare step writes the item again, with other content and unread.
	again := inboxItem("u1", "n_1", t0.Add(time.Hour))
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
