package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
)

var notificationCases = []storeCase{
	{"CreateNotification/RoundTrip", testCreateRoundTrip},
	{"CreateNotification/DedupeByIdempotencyKey", testDedupeByKey},
	{"CreateNotification/FingerprintRoundTrips", testFingerprintRoundTrips},
	{"CreateNotification/DedupeByID", testDedupeByID},
	{"CreateNotification/EmptyKeyNeverDedupes", testEmptyKeyNeverDedupes},
	{"CreateNotification/KeyScopedToService", testKeyScopedToService},
	{"GetNotification/NotFound", testGetNotFound},
	{"SetNotificationStatus/Unconditional", testSetStatusUnconditional},
	{"SetNotificationStatus/FromSet", testSetStatusFromSet},
	{"SetNotificationStatus/NotFound", testSetStatusNotFound},
	{"SetChunksTotal/Idempotent", testSetChunksTotal},
}

// sameNotification compares every field a caller set; times with Equal, since stores may hand
// back another location.
func sameNotification(t *testing.T, got, want *notify.Notification) {
	t.Helper()
	if got.ID != want.ID || got.Service != want.Service || got.IdempotencyKey != want.IdempotencyKey ||
		got.Category != want.Category || got.Locale != want.Locale || got.CollapseID != want.CollapseID ||
		got.Priority != want.Priority || got.TTL != want.TTL || got.Lane != want.Lane || got.Status != want.Status {
		t.Fatalf("notification = %+v\nwant %+v", got, want)
	}
	if !slices.Equal(got.Channels, want.Channels) {
		t.Fatalf("Channels = %v, want %v", got.Channels, want.Channels)
	}
	if !reflect.DeepEqual(got.Content, want.Content) {
		t.Fatalf("Content = %+v, want %+v", got.Content, want.Content)
	}
	if !reflect.DeepEqual(got.ChannelContent, want.ChannelContent) {
		t.Fatalf("ChannelContent = %+v, want %+v", got.ChannelContent, want.ChannelContent)
	}
	if !reflect.DeepEqual(got.Localized, want.Localized) {
		t.Fatalf("Localized = %+v, want %+v", got.Localized, want.Localized)
	}
	if got.RecipientCount != len(want.Recipients) {
		t.Fatalf("RecipientCount = %d, want %d", got.RecipientCount, len(want.Recipients))
	}
	sameTimePtr(t, "SendAt", got.SendAt, want.SendAt)
	sameTime(t, "CreatedAt", got.CreatedAt, want.CreatedAt)
}

func testCreateRoundTrip(t *testing.T, s notify.Store) {
	n := newNotification("billing", "order-42")
	n.Category = notify.CategoryMarketing
	n.Channels = []notify.Channel{notify.ChannelPush, notify.ChannelEmail, notify.ChannelSMS, notify.ChannelInbox}
	n.Content.Data = map[string]string{"order": "42", "kind": "receipt"}
	n.Content.Link = "app://orders/42"
	n.ChannelContent = map[notify.Channel]notify.Content{notify.ChannelEmail: {Title: "Your receipt", HTML: "<p>hi</p>"}}
	n.Localized = map[string]notify.Content{"ko": {Title: "영수증"}}
	n.Locale = "en"
	n.CollapseID = "order-42"
	n.Priority = notify.PriorityNormal
	n.TTL = 36 * time.Hour
	n.SendAt = ptr(t0.Add(time.Hour))
	n.Lane = notify.LaneBulk
	n.Status = notify.StatusScheduled // stored with the status it is given
	// The largest notification a request may carry.
	n.Recipients = make([]notify.Recipient, notify.MaxRecipients)
	for i := range n.Recipients {
		switch i % 3 {
		case 0:
			n.Recipients[i] = notify.Recipient{UserID: fmt.Sprintf("user-%05d", i)}
		case 1:
			n.Recipients[i] = notify.Recipient{Email: fmt.Sprintf("r%05d@example.com", i)}
		default:
			n.Recipients[i] = notify.Recipient{FCMToken: fmt.Sprintf("tok-%05d", i), App: "shop"}
		}
	}

	stored, created, err := s.CreateNotification(t.Context(), n)
	noErr(t, err)
	if !created {
		t.Fatal("created = false for a new notification")
	}
	sameNotification(t, stored, n)

	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	sameNotification(t, got, n)
	if len(got.Recipients) != 0 {
		t.Fatalf("GetNotification returned %d recipients; they are read with GetRecipients", len(got.Recipients))
	}
	// Pages of any alignment come back in order, fewer at the end, none past it.
	for _, c := range []struct{ offset, limit int }{{0, 500}, {499, 3}, {1000, 500}, {0, notify.MaxRecipients}, {9990, 50}, {20000, 10}, {7, 0}} {
		rs, err := s.GetRecipients(t.Context(), n.ID, c.offset, c.limit)
		noErr(t, err)
		lo, hi := min(c.offset, len(n.Recipients)), min(c.offset+c.limit, len(n.Recipients))
		if !reflect.DeepEqual(rs, n.Recipients[lo:hi]) && !(len(rs) == 0 && lo == hi) {
			t.Fatalf("GetRecipients(%d, %d): %d recipients, want recipients [%d, %d)", c.offset, c.limit, len(rs), lo, hi)
		}
	}
	if _, err := s.GetRecipients(t.Context(), "n_unknown", 0, 10); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("GetRecipients of an unknown notification: %v, want ENOTFOUND", err)
	}
	if got.Stats.ChunksTotal != 0 || got.Stats.ChunksPrepared != 0 || got.Stats.Sum() != (notify.ChannelStats{}) {
		t.Fatalf("new notification Stats = %+v, want zero", got.Stats)
	}
}

func testDedupeByKey(t *testing.T, s notify.Store) {
	first := mustCreateNotification(t, s, newNotification("billing", "key-1"))

	again := newNotification("billing", "key-1") // another id, same (service, key)
	again.Content.Body = "a retried request"
	if again.ID == first.ID {
		t.Fatal("test needs distinct ids")
	}
	stored, created, err := s.CreateNotification(t.Context(), again)
	noErr(t, err)
	if created {
		t.Fatal("created = true for a repeated (service, idempotency key)")
	}
	if stored.ID != first.ID || stored.Content.Body != first.Content.Body {
		t.Fatalf("stored = %s %q, want the first notification %s %q", stored.ID, stored.Content.Body, first.ID, first.Content.Body)
	}
	_, err = s.GetNotification(t.Context(), again.ID)
	wantCode(t, err, notify.ENOTFOUND)
}

// testFingerprintRoundTrips: the request fingerprint is stored with the notification and handed
// back by GetNotification and by a deduplicated create, so the caller can tell a retry from a
// reused key.
func testFingerprintRoundTrips(t *testing.T, s notify.Store) {
	n := newNotification("billing", "key-fp")
	n.Fingerprint = "3f1c0e5d9a7b2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
	mustCreateNotification(t, s, n)
	got, err := s.GetNotification(t.Context(), n.ID)
	noErr(t, err)
	if got.Fingerprint != n.Fingerprint {
		t.Fatalf("Fingerprint = %q, want %q", got.Fingerprint, n.Fingerprint)
	}
	again := newNotification("billing", "key-fp")
	again.Fingerprint = "another request"
	stored, created, err := s.CreateNotification(t.Context(), again)
	noErr(t, err)
	if created || stored.ID != n.ID || stored.Fingerprint != n.Fingerprint {
		t.Fatalf("repeat: created %v id %s fingerprint %q, want the first's %s %q", created, stored.ID, stored.Fingerprint, n.ID, n.Fingerprint)
	}
	plain := mustCreateNotification(t, s, newNotification("billing", ""))
	if got, err := s.GetNotification(t.Context(), plain.ID); err != nil || got.Fingerprint != "" {
		t.Fatalf("no fingerprint: got %q, %v", got.Fingerprint, err)
	}
}

func testDedupeByID(t *testing.T, s notify.Store) {
	first := mustCreateNotification(t, s, newNotification("billing", ""))

	again := newNotification("billing", "")
	again.ID = first.ID
	again.Content.Body = "a redelivered ingest message"
	again.Status = notify.StatusProcessing
	stored, created, err := s.CreateNotification(t.Context(), again)
	noErr(t, err)
	if created {
		t.Fatal("created = true for an existing id")
	}
	if stored.Content.Body != first.Content.Body || stored.Status != notify.StatusAccepted {
		t.Fatalf("stored = %q %s, want the first notification %q %s", stored.Content.Body, stored.Status,
			first.Content.Body, notify.StatusAccepted)
	}

	// Same id with a key: the id alone still dedupes.
	keyed := newNotification("billing", "some-key")
	keyed.ID = first.ID
	stored, created, err = s.CreateNotification(t.Context(), keyed)
	noErr(t, err)
	if created || stored.ID != first.ID {
		t.Fatalf("created = %v, stored %s; want false and %s", created, stored.ID, first.ID)
	}
}

func testEmptyKeyNeverDedupes(t *testing.T, s notify.Store) {
	a := mustCreateNotification(t, s, newNotification("billing", ""))
	b := mustCreateNotification(t, s, newNotification("billing", ""))
	for _, id := range []string{a.ID, b.ID} {
		if _, err := s.GetNotification(t.Context(), id); err != nil {
			t.Fatalf("GetNotification(%s): %v", id, err)
		}
	}
}

func testKeyScopedToService(t *testing.T, s notify.Store) {
	a := mustCreateNotification(t, s, newNotification("billing", "shared-key"))
	b := mustCreateNotification(t, s, newNotification("shipping", "shared-key"))
	for _, want := range []*notify.Notification{a, b} {
		got, err := s.GetNotification(t.Context(), want.ID)
		noErr(t, err)
		if got.Service != want.Service {
			t.Fatalf("GetNotification(%s).Service = %q, want %q", want.ID, got.Service, want.Service)
		}
	}
}

func testGetNotFound(t *testing.T, s notify.Store) {
	_, err := s.GetNotification(t.Context(), "n_does_not_exist")
	wantCode(t, err, notify.ENOTFOUND)
}

func wantStatus(t *testing.T, s notify.Store, id string, want notify.NotificationStatus) {
	t.Helper()
	n, err := s.GetNotification(t.Context(), id)
	noErr(t, err)
	if n.Status != want {
		t.Fatalf("Status = %s, want %s", n.Status, want)
	}
}

func testSetStatusUnconditional(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetNotificationStatus(t.Context(), n.ID, notify.StatusProcessing))
	wantStatus(t, s, n.ID, notify.StatusProcessing)
	// Any status when from is empty, even out of a final one.
	noErr(t, s.SetNotificationStatus(t.Context(), n.ID, notify.StatusCanceled))
	noErr(t, s.SetNotificationStatus(t.Context(), n.ID, notify.StatusScheduled))
	wantStatus(t, s, n.ID, notify.StatusScheduled)
}

func testSetStatusFromSet(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	noErr(t, s.SetNotificationStatus(t.Context(), n.ID, notify.StatusProcessing,
		notify.StatusScheduled, notify.StatusAccepted))
	wantStatus(t, s, n.ID, notify.StatusProcessing)

	err := s.SetNotificationStatus(t.Context(), n.ID, notify.StatusCanceled, notify.StatusAccepted, notify.StatusScheduled)
	wantCode(t, err, notify.ECONFLICT)
	wantStatus(t, s, n.ID, notify.StatusProcessing)
}

func testSetStatusNotFound(t *testing.T, s notify.Store) {
	wantCode(t, s.SetNotificationStatus(t.Context(), "n_missing", notify.StatusSent), notify.ENOTFOUND)
	wantCode(t, s.SetNotificationStatus(t.Context(), "n_missing", notify.StatusSent, notify.StatusProcessing), notify.ENOTFOUND)
}

func testSetChunksTotal(t *testing.T, s notify.Store) {
	n := mustCreateNotification(t, s, newNotification("billing", ""))
	for range 2 {
		noErr(t, s.SetChunksTotal(t.Context(), n.ID, 3))
		if st := getStats(t, s, n.ID); st.ChunksTotal != 3 || st.ChunksPrepared != 0 {
			t.Fatalf("Stats = %+v, want ChunksTotal 3, ChunksPrepared 0", st)
		}
	}
}
