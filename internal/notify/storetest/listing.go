package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

var listingCases = []storeCase{
	{"Listing/FiltersAndPages", testListNotifications},
	{"Listing/RefusesBadArguments", testListNotificationsBadArguments},
	{"Listing/ByUserNewestFirst", testListNotificationsByUser},
	{"Listing/SuppressionsFilterAndPage", testListSuppressions},
	{"Listing/SuppressionsRefuseBadArguments", testListSuppressionsBadArguments},
}

func notificationLister(t *testing.T, s notify.Store) notify.NotificationLister {
	t.Helper()
	l, ok := s.(notify.NotificationLister)
	if !ok {
		t.Fatalf("%T does not implement notify.NotificationLister", s)
	}
	return l
}

// listAll pages through a listing one entry at a time, so every page and call boundary is crossed.
func listNotificationsAll(t *testing.T, l notify.NotificationLister, f notify.NotificationFilter) map[string]notify.NotificationSummary {
	t.Helper()
	out := map[string]notify.NotificationSummary{}
	cursor := ""
	for range 200 {
		page, next, err := l.ListNotifications(t.Context(), f, cursor, 1)
		noErr(t, err)
		if len(page) > 1 {
			t.Fatalf("a page of limit 1 holds %d entries", len(page))
		}
		for _, n := range page {
			if _, dup := out[n.ID]; dup {
				t.Fatalf("%s listed twice", n.ID)
			}
			out[n.ID] = n
		}
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatal("the listing does not end")
	return nil
}

func testListNotifications(t *testing.T, s notify.Store) {
	l := notificationLister(t, s)
	at := func(n *notify.Notification, d time.Duration) *notify.Notification {
		n.CreatedAt, n.UpdatedAt = t0.Add(d), t0.Add(d)
		return n
	}
	a := mustCreateNotification(t, s, at(newNotification("shop", ""), 0))
	b := newNotification("shop", "order-7")
	b.Category = notify.CategoryMarketing
	b = mustCreateNotification(t, s, at(b, time.Hour))
	c := mustCreateNotification(t, s, at(scheduledNotification("books", t0.Add(48*time.Hour)), 2*time.Hour))
	// A campaign's notification (its bookkeeping) is never listed.
	d := newNotification("shop", "")
	d.Status = notify.StatusDispatching
	mustCreateNotification(t, s, at(d, 3*time.Hour))

	ids := func(m map[string]notify.NotificationSummary) []string {
		var out []string
		for id := range m {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	for name, c := range map[string]struct {
		f    notify.NotificationFilter
		want []string
	}{
		"all":             {notify.NotificationFilter{}, sorted(a.ID, b.ID, c.ID)},
		"status":          {notify.NotificationFilter{Status: notify.StatusScheduled}, sorted(c.ID)},
		"service":         {notify.NotificationFilter{Service: "shop"}, sorted(a.ID, b.ID)},
		"category":        {notify.NotificationFilter{Category: notify.CategoryMarketing}, sorted(b.ID)},
		"idempotency key": {notify.NotificationFilter{Service: "shop", IdempotencyKey: "order-7"}, sorted(b.ID)},
		"from":            {notify.NotificationFilter{From: t0.Add(30 * time.Minute)}, sorted(b.ID, c.ID)},
		"to":              {notify.NotificationFilter{To: t0.Add(time.Hour)}, sorted(a.ID)},
		"from to":         {notify.NotificationFilter{From: t0.Add(time.Hour), To: t0.Add(2 * time.Hour)}, sorted(b.ID)},
		"none":            {notify.NotificationFilter{Service: "nobody"}, nil},
	} {
		if got := ids(listNotificationsAll(t, l, c.f)); !slices.Equal(got, c.want) {
			t.Errorf("%s: listed %v, want %v", name, got, c.want)
		}
	}
	got := listNotificationsAll(t, l, notify.NotificationFilter{Service: "shop", IdempotencyKey: "order-7"})[b.ID]
	if got.Service != "shop" || got.IdempotencyKey != "order-7" || got.Status != notify.StatusAccepted ||
		got.Category != notify.CategoryMarketing || !got.CreatedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("summary = %+v", got)
	}
}

// The recipient view's search: the notifications IndexedUser files under a user, newest first,
// express ones included, the other filters still applying; a notification to several users and
// a campaign's are not filed.
func testListNotificationsByUser(t *testing.T, s notify.Store) {
	l := notificationLister(t, s)
	user, other := notify.NewID("u_", t0), notify.NewID("u_", t0)
	at := func(n *notify.Notification, d time.Duration, rs ...notify.Recipient) *notify.Notification {
		n.CreatedAt, n.UpdatedAt, n.Recipients = t0.Add(d), t0.Add(d), rs
		return n
	}
	a := mustCreateNotification(t, s, at(newNotification("shop", ""), 0, notify.Recipient{UserID: user}))
	x, push, inbox := newExpress("shop", "")
	push.UserID, inbox.UserID = user, user
	x.Express.Deliveries = []notify.Delivery{push, inbox}
	x = mustCreateNotification(t, s, at(x, time.Hour, notify.Recipient{UserID: user}))
	c := mustCreateNotification(t, s, at(newNotification("books", ""), 2*time.Hour,
		notify.Recipient{UserID: user}, notify.Recipient{Email: "someone@example.com"}, notify.Recipient{UserID: user}))
	mustCreateNotification(t, s, at(newNotification("shop", ""), 3*time.Hour, notify.Recipient{UserID: user}, notify.Recipient{UserID: other}))
	o := mustCreateNotification(t, s, at(newNotification("shop", ""), 4*time.Hour, notify.Recipient{UserID: other}))
	d := newNotification("shop", "")
	d.Status = notify.StatusDispatching
	mustCreateNotification(t, s, at(d, 5*time.Hour, notify.Recipient{UserID: user}))

	ordered := func(f notify.NotificationFilter, limit int) []string {
		t.Helper()
		var out []string
		cursor := ""
		for range 100 {
			page, next, err := l.ListNotifications(t.Context(), f, cursor, limit)
			noErr(t, err)
			for _, n := range page {
				out = append(out, n.ID)
			}
			if next == "" {
				return out
			}
			cursor = next
		}
		t.Fatal("the listing does not end")
		return nil
	}
	for name, c := range map[string]struct {
		f    notify.NotificationFilter
		want []string
	}{
		"user":             {notify.NotificationFilter{User: user}, []string{c.ID, x.ID, a.ID}},
		"other user":       {notify.NotificationFilter{User: other}, []string{o.ID}},
		"user and service": {notify.NotificationFilter{User: user, Service: "shop"}, []string{x.ID, a.ID}},
		"user and from":    {notify.NotificationFilter{User: user, From: t0.Add(30 * time.Minute)}, []string{c.ID, x.ID}},
		"user and status":  {notify.NotificationFilter{User: user, Status: notify.StatusAccepted}, []string{c.ID, a.ID}},
		"nobody":           {notify.NotificationFilter{User: notify.NewID("u_", t0)}, nil},
	} {
		for _, limit := range []int{1, 2, notify.MaxReservedPage} {
			if got := ordered(c.f, limit); !slices.Equal(got, c.want) {
				t.Errorf("%s, limit %d: listed %v, want %v (newest first)", name, limit, got, c.want)
			}
		}
	}
	if got := notify.IndexedUser(x); got != user {
		t.Errorf("IndexedUser = %q, want %q", got, user)
	}
}

func testListNotificationsBadArguments(t *testing.T, s notify.Store) {
	l := notificationLister(t, s)
	for _, limit := range []int{0, notify.MaxReservedPage + 1} {
		_, _, err := l.ListNotifications(t.Context(), notify.NotificationFilter{}, "", limit)
		wantCode(t, err, notify.EINVALID)
	}
	_, _, err := l.ListNotifications(t.Context(), notify.NotificationFilter{}, "not a cursor!", 10)
	wantCode(t, err, notify.EINVALID)
}

// listSuppressionsAll pages through a suppression listing limit entries at a time.
func listSuppressionsAll(t *testing.T, s notify.Store, f notify.SuppressionFilter, limit int) map[string]notify.Suppression {
	t.Helper()
	out := map[string]notify.Suppression{}
	cursor := ""
	for range 200 {
		page, next, err := s.ListSuppressions(t.Context(), f, cursor, limit)
		noErr(t, err)
		if len(page) > limit {
			t.Fatalf("a page of limit %d holds %d entries", limit, len(page))
		}
		for _, sp := range page {
			if _, dup := out[sp.Masked]; dup {
				t.Fatalf("%s listed twice", sp.Masked)
			}
			out[sp.Masked] = sp
		}
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatal("the listing does not end")
	return nil
}

func testListSuppressions(t *testing.T, s notify.Store) {
	add := func(c notify.Channel, addr, reason string, d time.Duration) string {
		t.Helper()
		masked := notify.MaskAddress(c, addr)
		noErr(t, s.Suppress(t.Context(), notify.Suppression{AddressKey: notify.AddressKey(c, addr), Masked: masked,
			Channel: c, Reason: reason, CreatedAt: t0.Add(d)}))
		return masked
	}
	a := add(notify.ChannelEmail, "ann@example.com", "bounce", 0)
	b := add(notify.ChannelEmail, "bob@example.com", "complaint", time.Hour)
	c := add(notify.ChannelSMS, "+821012345678", "invalid_number", 2*time.Hour)
	d := add(notify.ChannelEmail, "dan@example.com", "bounce", 3*time.Hour)

	keys := func(m map[string]notify.Suppression) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	for name, c := range map[string]struct {
		f    notify.SuppressionFilter
		want []string
	}{
		"all":     {notify.SuppressionFilter{}, sorted(a, b, c, d)},
		"channel": {notify.SuppressionFilter{Channel: notify.ChannelSMS}, sorted(c)},
		"reason":  {notify.SuppressionFilter{Reason: "bounce"}, sorted(a, d)},
		"both":    {notify.SuppressionFilter{Channel: notify.ChannelEmail, Reason: "complaint"}, sorted(b)},
		"from":    {notify.SuppressionFilter{From: t0.Add(30 * time.Minute)}, sorted(b, c, d)},
		"to":      {notify.SuppressionFilter{To: t0.Add(time.Hour)}, sorted(a)},
		"from to": {notify.SuppressionFilter{From: t0.Add(time.Hour), To: t0.Add(3 * time.Hour)}, sorted(b, c)},
		"none":    {notify.SuppressionFilter{Reason: "nothing"}, nil},
	} {
		for _, limit := range []int{1, 3, notify.MaxSuppressionPage} {
			if got := keys(listSuppressionsAll(t, s, c.f, limit)); !slices.Equal(got, c.want) {
				t.Errorf("%s, limit %d: listed %v, want %v", name, limit, got, c.want)
			}
		}
	}
	got := listSuppressionsAll(t, s, notify.SuppressionFilter{Channel: notify.ChannelSMS}, 10)[c]
	if got.Channel != notify.ChannelSMS || got.Reason != "invalid_number" || !got.CreatedAt.Equal(t0.Add(2*time.Hour)) ||
		got.AddressKey != notify.AddressKey(notify.ChannelSMS, "+821012345678") || strings.Contains(got.Masked, "12345") {
		t.Errorf("listed %+v", got)
	}
}

func testListSuppressionsBadArguments(t *testing.T, s notify.Store) {
	for _, limit := range []int{0, notify.MaxSuppressionPage + 1} {
		_, _, err := s.ListSuppressions(t.Context(), notify.SuppressionFilter{}, "", limit)
		wantCode(t, err, notify.EINVALID)
	}
	_, _, err := s.ListSuppressions(t.Context(), notify.SuppressionFilter{}, "not a cursor!", 10)
	wantCode(t, err, notify.EINVALID)
}
