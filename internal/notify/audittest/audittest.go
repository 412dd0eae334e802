// Package audittest is the conformance suite for notify.AuditLog. Every adapter (SQLite locally,
// DynamoDB in AWS) runs Run unchanged.
package audittest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/suite"
)

// Run runs every case as a parallel subtest, each on a fresh log from newLog. The log must read
// the system clock: the cases place entries relative to time.Now, which decides expiry.
func Run(t *testing.T, newLog func(t *testing.T) notify.AuditLog) {
	t.Helper()
	suite.Run(t, cases, newLog)
}

// noErr is the assertion every suite shares.
var noErr = suite.NoErr

// entry returns a valid entry at at, with id and action.
func entry(id string, at time.Time, action notify.AuditAction, target string) notify.AuditEntry {
	return notify.AuditEntry{ID: id, At: at, Actor: "ops", ActorKind: notify.ActorService, Action: action,
		TargetType: notify.AuditTargetCampaign, TargetID: target, Params: map[string]string{"k": "v"}, Result: notify.AuditResultOK}
}

// list reads every page of f with limit per page and returns the ids in order.
func list(t *testing.T, l notify.AuditLog, f notify.AuditFilter, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatal("more than 100 pages")
		}
		es, next, err := l.ListAudit(t.Context(), f, cursor, limit)
		noErr(t, err)
		if len(es) > limit {
			t.Fatalf("page of %d entries, limit %d", len(es), limit)
		}
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		if next == "" {
			return ids
		}
		if len(es) == 0 {
			t.Fatal("an empty page with a next cursor")
		}
		cursor = next
	}
}

func wantIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ids = %v, want %v", got, want)
	}
}

var cases = []struct {
	Name string
	Run  func(t *testing.T, l notify.AuditLog)
}{
	{"AppendThenListRoundTrips", func(t *testing.T, l notify.AuditLog) {
		at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
		e := notify.AuditEntry{ID: "a_1", At: at, Actor: "user-sub-1", ActorKind: notify.ActorUser,
			Action: notify.AuditQueueRedrive, TargetType: notify.AuditTargetQueue, TargetID: "send-realtime",
			Params: map[string]string{"moved": "3"}, Result: notify.EFORBIDDEN, RequestID: "req-1"}
		noErr(t, l.AppendAudit(t.Context(), e))
		es, next, err := l.ListAudit(t.Context(), notify.AuditFilter{}, "", 10)
		noErr(t, err)
		if len(es) != 1 || next != "" {
			t.Fatalf("list = %d entries, next %q", len(es), next)
		}
		got := es[0]
		if got.ID != e.ID || !got.At.Equal(at) || got.Actor != e.Actor || got.ActorKind != e.ActorKind || got.Action != e.Action ||
			got.TargetType != e.TargetType || got.TargetID != e.TargetID || got.Params["moved"] != "3" || len(got.Params) != 1 ||
			got.Result != e.Result || got.RequestID != e.RequestID {
			t.Fatalf("read back %+v, want %+v", got, e)
		}
	}},
	{"NewestFirst", func(t *testing.T, l notify.AuditLog) {
		now := time.Now()
		// Appended out of order; two at the same instant are ordered by id, descending.
		noErr(t, l.AppendAudit(t.Context(), entry("a_b", now.Add(-2*time.Hour), notify.AuditCampaignPause, "c_1")))
		noErr(t, l.AppendAudit(t.Context(), entry("a_c", now.Add(-time.Hour), notify.AuditCampaignResume, "c_1")))
		noErr(t, l.AppendAudit(t.Context(), entry("a_a", now.Add(-3*time.Hour), notify.AuditCampaignCancel, "c_1")))
		noErr(t, l.AppendAudit(t.Context(), entry("a_d", now.Add(-2*time.Hour), notify.AuditCampaignPause, "c_1")))
		wantIDs(t, list(t, l, notify.AuditFilter{}, 10), "a_c", "a_d", "a_b", "a_a")
	}},
	{"CursorPagesAcrossMonths", func(t *testing.T, l notify.AuditLog) {
		// 25 entries spread over the last 10 months, read 4 at a time: every one once, in order.
		now := time.Now()
		var want []string
		for i := range 25 {
			id := fmt.Sprintf("a_%02d", i)
			want = append([]string{id}, want...)
			noErr(t, l.AppendAudit(t.Context(), entry(id, now.Add(-time.Duration(25-i)*12*24*time.Hour), notify.AuditCampaignPause, "c_1")))
		}
		wantIDs(t, list(t, l, notify.AuditFilter{}, 4), want...)
		wantIDs(t, list(t, l, notify.AuditFilter{}, 25), want...)
	}},
	{"Filters", func(t *testing.T, l notify.AuditLog) {
		now := time.Now()
		mk := func(id, actor string, action notify.AuditAction, tt, target string, ago time.Duration) {
			e := entry(id, now.Add(-ago), action, target)
			e.Actor, e.TargetType = actor, tt
			noErr(t, l.AppendAudit(t.Context(), e))
		}
		mk("a_1", "ops", notify.AuditCampaignCancel, notify.AuditTargetCampaign, "c_1", 5*time.Hour)
		mk("a_2", "oncall", notify.AuditCampaignCancel, notify.AuditTargetCampaign, "c_2", 4*time.Hour)
		mk("a_3", "ops", notify.AuditQueueRedrive, notify.AuditTargetQueue, "send-bulk", 3*time.Hour)
		mk("a_4", "ops", notify.AuditCampaignPause, notify.AuditTargetCampaign, "c_2", 2*time.Hour)
		mk("a_5", "oncall", notify.AuditNotificationCancel, notify.AuditTargetNotification, "c_2", time.Hour)
		wantIDs(t, list(t, l, notify.AuditFilter{Actor: "ops"}, 10), "a_4", "a_3", "a_1")
		wantIDs(t, list(t, l, notify.AuditFilter{Action: notify.AuditCampaignCancel}, 10), "a_2", "a_1")
		wantIDs(t, list(t, l, notify.AuditFilter{TargetType: notify.AuditTargetCampaign, TargetID: "c_2"}, 10), "a_4", "a_2")
		wantIDs(t, list(t, l, notify.AuditFilter{TargetID: "c_2"}, 1), "a_5", "a_4", "a_2")
		wantIDs(t, list(t, l, notify.AuditFilter{Actor: "oncall", Action: notify.AuditCampaignCancel}, 10), "a_2")
		wantIDs(t, list(t, l, notify.AuditFilter{Actor: "nobody"}, 10))
		// From is inclusive, To exclusive.
		wantIDs(t, list(t, l, notify.AuditFilter{From: now.Add(-4 * time.Hour), To: now.Add(-2 * time.Hour)}, 10), "a_3", "a_2")
		wantIDs(t, list(t, l, notify.AuditFilter{Actor: "ops", From: now.Add(-4 * time.Hour)}, 1), "a_4", "a_3")
		wantIDs(t, list(t, l, notify.AuditFilter{To: now.Add(-90 * 24 * time.Hour)}, 10))
	}},
	{"AppendIsIdempotentOnID", func(t *testing.T, l notify.AuditLog) {
		now := time.Now()
		e := entry("a_retried", now.Add(-time.Minute), notify.AuditCampaignCancel, "c_1")
		noErr(t, l.AppendAudit(t.Context(), e))
		noErr(t, l.AppendAudit(t.Context(), e))
		// A retry that stamped another time and result still does not write a second entry,
		// nor change the first.
		again := e
		again.At, again.Result = now, notify.EUNAVAILABLE
		noErr(t, l.AppendAudit(t.Context(), again))
		es, _, err := l.ListAudit(t.Context(), notify.AuditFilter{}, "", 10)
		noErr(t, err)
		if len(es) != 1 || es[0].Result != notify.AuditResultOK || !es[0].At.Equal(e.At) {
			t.Fatalf("after three appends of one id: %+v", es)
		}
	}},
	{"ExpiredEntriesAreNotListed", func(t *testing.T, l notify.AuditLog) {
		now := time.Now()
		noErr(t, l.AppendAudit(t.Context(), entry("a_old", now.Add(-notify.AuditRetention-time.Hour), notify.AuditCampaignCancel, "c_1")))
		noErr(t, l.AppendAudit(t.Context(), entry("a_kept", now.Add(-notify.AuditRetention+24*time.Hour), notify.AuditCampaignCancel, "c_1")))
		noErr(t, l.AppendAudit(t.Context(), entry("a_new", now.Add(-time.Minute), notify.AuditCampaignCancel, "c_1")))
		wantIDs(t, list(t, l, notify.AuditFilter{}, 10), "a_new", "a_kept")
		wantIDs(t, list(t, l, notify.AuditFilter{From: now.Add(-2 * notify.AuditRetention)}, 1), "a_new", "a_kept")
		wantIDs(t, list(t, l, notify.AuditFilter{TargetID: "c_1"}, 10), "a_new", "a_kept")
	}},
	{"NoPersonalDataIsStored", func(t *testing.T, l notify.AuditLog) {
		e := entry("a_pii", time.Now().Add(-time.Minute), notify.AuditNotificationCancel, "n_1")
		e.Params = map[string]string{
			"email": "alice@example.com", "phone": "+821012345678", "fcm_token": "fcm-alice-phone-0123456789",
			"reason": "alice@example.com asked, +821012345678", "send_at": "2030-01-01T00:00:00Z",
		}
		noErr(t, l.AppendAudit(t.Context(), e))
		es, _, err := l.ListAudit(t.Context(), notify.AuditFilter{}, "", 10)
		noErr(t, err)
		b, _ := json.Marshal(es)
		for _, raw := range []string{"alice@example.com", "+821012345678", "fcm-alice-phone-0123456789"} {
			if strings.Contains(string(b), raw) {
				t.Fatalf("%q stored: %s", raw, b)
			}
		}
		if len(es) != 1 || es[0].Params["send_at"] != "2030-01-01T00:00:00Z" || es[0].Params["reason"] == "" {
			t.Fatalf("sanitized params %v", es[0].Params)
		}
	}},
	{"InvalidInputIsRefused", func(t *testing.T, l notify.AuditLog) {
		e := entry("", time.Now(), notify.AuditCampaignCancel, "c_1")
		if err := l.AppendAudit(t.Context(), e); !notify.IsCode(err, notify.EINVALID) {
			t.Fatalf("append without id = %v, want invalid", err)
		}
		e = entry("a_x", time.Now(), "", "c_1")
		if err := l.AppendAudit(t.Context(), e); !notify.IsCode(err, notify.EINVALID) {
			t.Fatalf("append without action = %v, want invalid", err)
		}
		if _, _, err := l.ListAudit(t.Context(), notify.AuditFilter{}, "garbage", 10); !notify.IsCode(err, notify.EINVALID) {
			t.Fatalf("list with a bad cursor = %v, want invalid", err)
		}
	}},
}
