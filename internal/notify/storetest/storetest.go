// Package storetest is the conformance suite for notify.Store. Every adapter (SQLite locally,
// DynamoDB in AWS) runs Run unchanged, so each guarantee written on the port in
// internal/notify/ports.go is checked the same way everywhere. Properties that only one backend
// can check (such as how contacts are encrypted) belong in that adapter's own tests.
package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/suite"
)

// t0 is the suite's "now"; tests move relative to it instead of reading the wall clock, so no
// case depends on timing.
var t0 = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// manyUsers crosses any IN-clause or batch-get chunking an adapter does (SQLite 500 per
// statement, DynamoDB BatchGetItem 100 per call).
const manyUsers = 1200

type storeCase struct {
	Name string
	Run  func(t *testing.T, s notify.Store)
}

// Run runs every case as a parallel subtest, each on a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) notify.Store) {
	t.Helper()
	var cases []storeCase
	cases = append(cases, notificationCases...)
	cases = append(cases, keyClaimCases...)
	cases = append(cases, deliveryCases...)
	cases = append(cases, expressCases...)
	cases = append(cases, batchCases...)
	cases = append(cases, recordCases...)
	cases = append(cases, historyCases...)
	cases = append(cases, ownerCases...)
	cases = append(cases, userCases...)
	cases = append(cases, inboxCases...)
	cases = append(cases, reservedCases...)
	cases = append(cases, templateCases...)
	cases = append(cases, listingCases...)
	cases = append(cases, erasureCases...)
	suite.Run(t, cases, newStore)
}

// noErr and wantCode are the assertions every suite shares.
var noErr, wantCode = suite.NoErr, suite.WantCode

// ---- helpers shared by every group ----

// sameSet compares two string lists ignoring order; duplicates count.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s = %v, want %v", what, g, w)
	}
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func sameTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	if got != nil && !got.Equal(*want) {
		t.Fatalf("%s = %v, want %v", what, *got, *want)
	}
}

func ptr[T any](v T) *T { return &v }

func newNotification(service, key string) *notify.Notification {
	return &notify.Notification{
		ID:             notify.NewID("n_", t0),
		Service:        service,
		IdempotencyKey: key,
		Category:       notify.CategoryTransactional,
		Channels:       []notify.Channel{notify.ChannelPush, notify.ChannelEmail},
		Content:        notify.Content{Title: "Hello", Body: "World from " + service},
		Recipients:     []notify.Recipient{{UserID: "u1"}},
		Status:         notify.StatusAccepted,
		CreatedAt:      t0,
		UpdatedAt:      t0,
	}
}

func mustCreateNotification(t *testing.T, s notify.Store, n *notify.Notification) *notify.Notification {
	t.Helper()
	stored, created, err := s.CreateNotification(t.Context(), n)
	noErr(t, err)
	if !created {
		t.Fatalf("CreateNotification(%s) created = false, want true", n.ID)
	}
	return stored
}

func getStats(t *testing.T, s notify.Store, id string) notify.Stats {
	t.Helper()
	n, err := s.GetNotification(t.Context(), id)
	noErr(t, err)
	return n.Stats
}

// wantChannel checks one channel's counters.
func wantChannel(t *testing.T, st notify.Stats, ch notify.Channel, want notify.ChannelStats) {
	t.Helper()
	if got := st.Channels[ch]; got != want {
		t.Fatalf("Stats.Channels[%s] = %+v, want %+v", ch, got, want)
	}
}

// addressFor is a distinct raw address per channel and index.
func addressFor(ch notify.Channel, tag string, i int) string {
	switch ch {
	case notify.ChannelEmail:
		return fmt.Sprintf("user-%s-%d@example.com", tag, i)
	case notify.ChannelSMS:
		return fmt.Sprintf("+8210%04d%04d", len(tag), i)
	case notify.ChannelInbox:
		return fmt.Sprintf("user-%s-%d", tag, i)
	default:
		return fmt.Sprintf("token-%s-%d-abcdefghijklmnop", tag, i)
	}
}

var providerOf = map[notify.Channel]notify.Provider{
	notify.ChannelPush:  notify.ProviderFCM,
	notify.ChannelEmail: notify.ProviderSES,
	notify.ChannelSMS:   notify.ProviderTwilio,
	notify.ChannelInbox: notify.ProviderInbox,
}

// makeDeliveries builds n deliveries of one channel in status st, with deterministic ids as the
// prepare stage makes them.
func makeDeliveries(nid string, ch notify.Channel, st notify.DeliveryStatus, tag string, n int) []notify.Delivery {
	ds := make([]notify.Delivery, n)
	for i := range ds {
		addr := addressFor(ch, tag, i)
		ds[i] = notify.Delivery{
			ID:             notify.DeliveryID(nid, ch, addr),
			NotificationID: nid,
			UserID:         fmt.Sprintf("user-%s-%d", tag, i),
			Channel:        ch,
			Provider:       providerOf[ch],
			App:            "default",
			Address:        addr,
			AddressMasked:  notify.MaskAddress(ch, addr),
			Status:         st,
			UpdatedAt:      t0,
		}
		if st == notify.DeliverySkipped {
			ds[i].Reason = notify.ReasonOptedOut
		}
	}
	return ds
}

func deliveryIDs(ds []notify.Delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func concat[T any](xs ...[]T) []T {
	var out []T
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// listAll pages through a notification's deliveries with the given page size.
func listAll(t *testing.T, s notify.Store, nid string, limit int) []notify.Delivery {
	t.Helper()
	var all []notify.Delivery
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatal("ListDeliveries never returned an empty next cursor")
		}
		ds, next, err := s.ListDeliveries(t.Context(), nid, cursor, limit)
		noErr(t, err)
		if len(ds) > limit {
			t.Fatalf("ListDeliveries returned %d deliveries, limit %d", len(ds), limit)
		}
		all = append(all, ds...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// byID indexes deliveries.
func byID(ds []notify.Delivery) map[string]notify.Delivery {
	m := make(map[string]notify.Delivery, len(ds))
	for _, d := range ds {
		m[d.ID] = d
	}
	return m
}

// createChunk stores ds as chunk of nid and returns the pending ids.
func createChunk(t *testing.T, s notify.Store, nid string, chunk int, ds []notify.Delivery) []string {
	t.Helper()
	pending, err := s.CreateDeliveries(t.Context(), nid, chunk, ds)
	noErr(t, err)
	return pending
}

// claim claims ids of notification nid at now with a one-minute lease.
func claim(t *testing.T, s notify.Store, nid string, ids []string, now time.Time) []notify.Delivery {
	t.Helper()
	got, _, err := s.ClaimDeliveries(t.Context(), nid, ids, now, now.Add(time.Minute))
	noErr(t, err)
	return got
}

func verdicts(ids []string, st notify.DeliveryStatus, at time.Time) []notify.DeliveryUpdate {
	us := make([]notify.DeliveryUpdate, len(ids))
	for i, id := range ids {
		us[i] = notify.DeliveryUpdate{ID: id, Status: st, At: at}
		if st == notify.DeliverySent {
			us[i].ProviderMessageID = "pm-" + id
		}
		if st == notify.DeliveryFailed {
			us[i].Reason = notify.ReasonRejected
		}
	}
	return us
}

func complete(t *testing.T, s notify.Store, nid string, us []notify.DeliveryUpdate) int {
	t.Helper()
	n, err := s.CompleteDeliveries(t.Context(), nid, us)
	noErr(t, err)
	return n
}
