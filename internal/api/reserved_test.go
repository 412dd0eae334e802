package api

import (
	"context"
	"encoding/json"
	"herald/internal/apidoc"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/sqlite"
)

// withScheduler gives the handler a real SQLite scheduler (on a database of its own).
func withScheduler(t *testing.T, sched **sqlite.Scheduler) func(*Options) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "schedules.db"))
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqlite.NewScheduler(db)
	if err != nil {
		t.Fatalf("new scheduler: %v", err)
	}
	*sched = s
	return func(o *Options) { o.Scheduler = s }
}

// seedScheduled stores a SCHEDULED notification of orders and arms its fire, as ingest does.
func seedScheduled(t *testing.T, e *env, sched notify.Scheduler, id string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	sr := notify.SendRequest{
		Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "later"},
		Recipients: []notify.Recipient{{UserID: "u1"}}, SendAt: &at,
	}
	n := sr.Notification(id, "orders", e.clock.Now())
	if n.Status != notify.StatusScheduled {
		t.Fatalf("seed status %s, want SCHEDULED", n.Status)
	}
	if _, _, err := e.store.CreateNotification(ctx, n); err != nil {
		t.Fatalf("create: %v", err)
	}
	if sched != nil {
		if err := sched.Schedule(ctx, id, notify.IngestQueue("orders"), *n.SendAt); err != nil {
			t.Fatalf("schedule: %v", err)
		}
	}
}

// fires runs the scheduler at `at` and returns the ids it put on orders' ingest queue.
func fires(t *testing.T, e *env, sched *sqlite.Scheduler, at time.Time) []string {
	t.Helper()
	if _, err := sched.Fire(context.Background(), at, e.queue); err != nil {
		t.Fatalf("fire: %v", err)
	}
	var ids []string
	for _, m := range e.receiveAll(t, notify.IngestQueue("orders")) {
		var f notify.FireMessage
		if err := json.Unmarshal(m.Body, &f); err != nil {
			t.Fatalf("fire body %s: %v", m.Body, err)
		}
		ids = append(ids, f.Fire)
	}
	return ids
}

// wantDocumented checks a response against the schema openapi.json gives its route and status.
func wantDocumented(t *testing.T, method, pattern string, rec *httptest.ResponseRecorder) {
	t.Helper()
	answers, err := apidoc.NewChecker(openAPIDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range answers.Answer(method, pattern, rec.Code, rec.Body.Bytes()) {
		t.Errorf("%s %s %d: %s", method, pattern, rec.Code, p)
	}
}

func TestRescheduleNotification(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched))
	now := e.clock.Now()
	first, later := now.Add(time.Hour), now.Add(2*time.Hour)
	seedScheduled(t, e, sched, "n_res", first)

	rec := e.do(t, "PATCH", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": later.Format(time.RFC3339Nano)})
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "PATCH", "/v1/notifications/{id}", rec)
	got := decodeBody[scheduleResponse](t, rec)
	// Kept in whole seconds, rounded up: what the schedule's at() and its fire name.
	later = later.Truncate(time.Second).Add(time.Second)
	if got.Status != notify.StatusScheduled || got.SendAt == nil || !got.SendAt.Equal(later) {
		t.Fatalf("response %+v, want SCHEDULED at %s", got, later)
	}
	n, err := e.store.GetNotification(context.Background(), "n_res")
	if err != nil {
		t.Fatal(err)
	}
	if n.SendAt == nil || !n.SendAt.Equal(later) || n.Status != notify.StatusScheduled {
		t.Fatalf("stored %s send_at %v, want SCHEDULED at %s", n.Status, n.SendAt, later)
	}
	if ids := fires(t, e, sched, first.Add(time.Minute)); len(ids) != 0 {
		t.Fatalf("fired %v at the old time", ids)
	}
	if ids := fires(t, e, sched, later); len(ids) != 1 || ids[0] != "n_res" {
		t.Fatalf("fired %v at the new time, want [n_res]", ids)
	}
}

func TestRescheduleNotificationErrors(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched))
	now := e.clock.Now()
	seedScheduled(t, e, sched, "n_res", now.Add(time.Hour))
	seedNotification(t, e, "n_sent") // ACCEPTED, with deliveries
	future := map[string]any{"send_at": now.Add(2 * time.Hour).Format(time.RFC3339)}
	cases := []struct {
		name, path, key string
		body            any
		status          int
		code, field     string
	}{
		{"past", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": now.Add(-time.Minute).Format(time.RFC3339)}, 400, notify.EINVALID, "send_at"},
		{"now", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": now.Format(time.RFC3339Nano)}, 400, notify.EINVALID, "send_at"},
		{"over a year", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": now.Add(366 * 24 * time.Hour).Format(time.RFC3339)}, 400, notify.EINVALID, "send_at"},
		{"missing", "/v1/notifications/n_res", ordersKey, map[string]any{}, 400, notify.EINVALID, "send_at"},
		{"not a time", "/v1/notifications/n_res", ordersKey, `{"send_at": "tomorrow"}`, 400, notify.EINVALID, "send_at"},
		{"unknown field", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": future["send_at"], "x": 1}, 400, notify.EINVALID, "x"},
		{"another service's", "/v1/notifications/n_res", billingKey, future, 404, notify.ENOTFOUND, ""},
		{"unknown", "/v1/notifications/n_none", ordersKey, future, 404, notify.ENOTFOUND, ""},
		{"not scheduled", "/v1/notifications/n_sent", ordersKey, future, 409, notify.ECONFLICT, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.do(t, "PATCH", c.path, c.key, c.body)
			wantError(t, rec, c.status, c.code, c.field)
			wantDocumented(t, "PATCH", "/v1/notifications/{id}", rec)
		})
	}
	n, err := e.store.GetNotification(context.Background(), "n_res")
	if err != nil {
		t.Fatal(err)
	}
	if !n.SendAt.Equal(notify.ReservedTime(now.Add(time.Hour))) {
		t.Fatalf("send_at moved to %s by a rejected request", n.SendAt)
	}
}

func TestRescheduleWithoutScheduler(t *testing.T) {
	t.Parallel()
	e := setup(t)
	seedScheduled(t, e, nil, "n_res", e.clock.Now().Add(time.Hour))
	rec := e.do(t, "PATCH", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": e.clock.Now().Add(2 * time.Hour)})
	wantError(t, rec, http.StatusNotImplemented, codeNotImplemented, "")
	wantDocumented(t, "PATCH", "/v1/notifications/{id}", rec)
	if msg := decodeBody[errorBody](t, rec).Error.Message; !strings.Contains(msg, "reserved sends are not available") {
		t.Fatalf("message %q", msg)
	}
}

func TestRescheduleAfterFireConflicts(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched))
	seedScheduled(t, e, sched, "n_res", e.clock.Now().Add(time.Hour))
	// The fire won the race: ingest moved it to ACCEPTED.
	if err := e.store.SetNotificationStatus(context.Background(), "n_res", notify.StatusAccepted, notify.StatusScheduled); err != nil {
		t.Fatal(err)
	}
	err := e.store.RescheduleNotification(context.Background(), "n_res", e.clock.Now().Add(2*time.Hour))
	if !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("store reschedule after fire: %v, want conflict", err)
	}
	if err := e.store.RescheduleNotification(context.Background(), "n_none", e.clock.Now()); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("store reschedule unknown: %v, want not_found", err)
	}
	rec := e.do(t, "PATCH", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": e.clock.Now().Add(2 * time.Hour)})
	wantError(t, rec, http.StatusConflict, notify.ECONFLICT, "")
}

func TestCancelNotification(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withScheduler(t, &sched))
	ctx := context.Background()
	at := e.clock.Now().Add(time.Hour)
	seedScheduled(t, e, sched, "n_res", at)

	rec := e.do(t, "DELETE", "/v1/notifications/n_res", billingKey, nil)
	wantError(t, rec, http.StatusNotFound, notify.ENOTFOUND, "")

	for range 2 { // cancelling twice answers the same
		rec = e.do(t, "DELETE", "/v1/notifications/n_res", ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "DELETE", "/v1/notifications/{id}", rec)
		if got := decodeBody[scheduleResponse](t, rec); got.Status != notify.StatusCanceled {
			t.Fatalf("response %+v, want CANCELED", got)
		}
	}
	n, err := e.store.GetNotification(ctx, "n_res")
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != notify.StatusCanceled {
		t.Fatalf("stored status %s, want CANCELED", n.Status)
	}
	if ids := fires(t, e, sched, at.Add(time.Minute)); len(ids) != 0 {
		t.Fatalf("fired %v after cancel", ids)
	}
	rec = e.do(t, "PATCH", "/v1/notifications/n_res", ordersKey, map[string]any{"send_at": at})
	wantError(t, rec, http.StatusConflict, notify.ECONFLICT, "")

	// ACCEPTED has not gone out yet: cancelable. PROCESSING has.
	seedNotification(t, e, "n_acc")
	wantStatus(t, e.do(t, "DELETE", "/v1/notifications/n_acc", ordersKey, nil), http.StatusOK)
	seedNotification(t, e, "n_proc")
	if err := e.store.SetNotificationStatus(ctx, "n_proc", notify.StatusProcessing); err != nil {
		t.Fatal(err)
	}
	rec = e.do(t, "DELETE", "/v1/notifications/n_proc", ordersKey, nil)
	wantError(t, rec, http.StatusConflict, notify.ECONFLICT, "")
	wantDocumented(t, "DELETE", "/v1/notifications/{id}", rec)
	// Finished (SENT, or SKIPPED, …): 409 already_finished, the code a finished campaign gets.
	for _, st := range []notify.NotificationStatus{notify.StatusSent, notify.StatusSkipped} {
		if err := e.store.SetNotificationStatus(ctx, "n_proc", st); err != nil {
			t.Fatal(err)
		}
		rec = e.do(t, "DELETE", "/v1/notifications/n_proc", ordersKey, nil)
		wantError(t, rec, http.StatusConflict, notify.EFINISHED, "")
		wantDocumented(t, "DELETE", "/v1/notifications/{id}", rec)
	}
}
