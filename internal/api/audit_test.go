package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/sqlite"
)

// withAudit records to the env's store and lets orders (not billing) operate queues and read
// the log.
func withAudit(o *Options) {
	o.Admin = o.Queue.(notify.Queue)
	o.Queues = []string{notify.IngestQueue("orders")}
	o.AdminServices = []string{"orders"}
	o.Audit = o.Store.(notify.AuditLog)
}

func auditEntries(t *testing.T, e *env, query string) auditPage {
	t.Helper()
	rec := e.do(t, "GET", "/v1/admin/audit"+query, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/audit", rec)
	return decodeBody[auditPage](t, rec)
}

func TestAuditRecordsOperatorActions(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit)
	body := campaignBody()
	body["send_at"] = e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	acc := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", ordersKey, body))
	later := e.clock.Now().Add(2 * time.Hour).Truncate(time.Second)

	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "PATCH", "/v1/campaigns/"+acc.ID, ordersKey, map[string]any{"send_at": later}), http.StatusOK)
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/cancel", ordersKey, nil), http.StatusOK)
	e.clock.Advance(time.Second)
	wantError(t, e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/resume", ordersKey, nil), http.StatusConflict, notify.EFINISHED, "")
	e.clock.Advance(time.Second)
	wantError(t, e.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", ordersKey, nil), http.StatusOK)

	got := auditEntries(t, e, "")
	want := []struct {
		actor  string
		action notify.AuditAction
		target string
		result string
	}{
		{"orders", notify.AuditQueueRedrive, "ingest-orders", notify.AuditResultOK},
		{"billing", notify.AuditQueueRedrive, "ingest-orders", notify.EFORBIDDEN},
		{"orders", notify.AuditCampaignResume, acc.ID, notify.EFINISHED},
		{"orders", notify.AuditCampaignCancel, acc.ID, notify.AuditResultOK},
		{"orders", notify.AuditCampaignReschedule, acc.ID, notify.AuditResultOK},
	}
	if len(got.Entries) != len(want) || got.NextCursor != "" {
		t.Fatalf("audit = %+v, want %d entries", got, len(want))
	}
	for i, w := range want {
		g := got.Entries[i]
		if g.Actor != w.actor || g.ActorKind != notify.ActorService || g.Action != w.action || g.TargetID != w.target || g.Result != w.result || g.ID == "" {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}
	if p := got.Entries[0].Params; p["moved"] != "0" {
		t.Errorf("redrive params %v, want moved 0", p)
	}
	if p := got.Entries[4].Params; p["send_at"] != later.UTC().Format(time.RFC3339) || p["previous_send_at"] == "" {
		t.Errorf("reschedule params %v", p)
	}
	if !got.Entries[0].At.Equal(e.clock.Now()) || got.Entries[0].TargetType != notify.AuditTargetQueue {
		t.Errorf("newest entry %+v, want at %s on a queue", got.Entries[0], e.clock.Now())
	}

	// Filters.
	if g := auditEntries(t, e, "?actor=billing"); len(g.Entries) != 1 || g.Entries[0].Result != notify.EFORBIDDEN {
		t.Errorf("actor=billing: %+v", g)
	}
	if g := auditEntries(t, e, "?action=campaign.cancel&target_type=campaign&target_id="+acc.ID); len(g.Entries) != 1 {
		t.Errorf("action=campaign.cancel: %+v", g)
	}
	from := url.QueryEscape(got.Entries[3].At.Format(time.RFC3339Nano))
	to := url.QueryEscape(got.Entries[1].At.Format(time.RFC3339Nano))
	if g := auditEntries(t, e, "?from="+from+"&to="+to); len(g.Entries) != 2 || g.Entries[0].Action != notify.AuditCampaignResume {
		t.Errorf("from/to: %+v", g)
	}

	// Paging: two at a time, every entry once; a cursor is tied to its filter.
	var ids []string
	cursor := ""
	for range 5 {
		p := auditEntries(t, e, "?limit=2&cursor="+cursor)
		for _, en := range p.Entries {
			ids = append(ids, en.ID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(ids) != 5 || ids[0] != got.Entries[0].ID || ids[4] != got.Entries[4].ID {
		t.Fatalf("paged ids %v", ids)
	}
	first := auditEntries(t, e, "?limit=2")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?actor=orders&limit=2&cursor="+first.NextCursor, ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?cursor="+first.NextCursor[:len(first.NextCursor)-2]+"xx", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
}

func TestAuditRouteRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	wantError(t, e.do(t, "GET", "/v1/admin/audit", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "GET", "/v1/admin/audit", "", nil), http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?action=campaign.delete", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "action")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?from=yesterday", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "from")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "to")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?limit=201", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "limit")
	// Dates outside 2000–2100 are a mistake, never a filter that silently matches nothing (the
	// stores' nanoseconds end in 2262).
	wantError(t, e.do(t, "GET", "/v1/admin/audit?to=9999-12-31T23:59:59Z", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "to")
	wantError(t, e.do(t, "GET", "/v1/admin/audit?from=1970-01-01T00:00:00Z", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "from")
	wantStatus(t, e.do(t, "GET", "/v1/admin/audit?from=2000-01-01T00:00:00Z&to=2100-12-31T23:59:59Z", ordersKey, nil), http.StatusOK)
	wantError(t, e.do(t, "GET", "/v1/admin/audit?target_id=a%20b", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "target_id")
	// No route changes the log.
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		wantError(t, e.do(t, m, "/v1/admin/audit", ordersKey, nil), http.StatusMethodNotAllowed, "method_not_allowed", "")
	}
	// Without a log the route says so.
	plain := setup(t, func(o *Options) { o.AdminServices = []string{"orders"} })
	wantError(t, plain.do(t, "GET", "/v1/admin/audit", ordersKey, nil), http.StatusNotImplemented, codeNotImplemented, "")
}

// failingAudit refuses every append.
type failingAudit struct{ notify.AuditLog }

func (failingAudit) AppendAudit(context.Context, notify.AuditEntry) error {
	return notify.Errorf(notify.EUNAVAILABLE, "audit store down")
}

// TestAuditFailureKeepsTheAction: the log is written after the action; when it cannot be, the
// operator's action still answers as it ran, and the entry is in the error log.
func TestAuditFailureKeepsTheAction(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit, func(o *Options) { o.Audit = failingAudit{o.Audit} })
	acc := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", ordersKey, campaignBody()))
	rec := e.do(t, "POST", "/v1/campaigns/"+acc.ID+"/cancel", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if st := decodeBody[campaignState](t, rec); st.State != notify.CampaignCanceled {
		t.Fatalf("cancel = %+v", st)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `"msg":"audit entry not written"`) || !strings.Contains(logs, `"target_id":"`+acc.ID+`"`) ||
		!strings.Contains(logs, `"action":"campaign.cancel"`) {
		t.Fatalf("logs lack the unwritten entry:\n%s", logs)
	}
}

// TestAuditOncePerRequestID: a request the front end serves twice under one request id (a
// retried invocation) is recorded once.
func TestAuditOncePerRequestID(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit, func(o *Options) {
		o.RequestID = func(r *http.Request) string { return r.Header.Get("X-Test-Request") }
	})
	acc := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", ordersKey, campaignBody()))
	for range 2 {
		req := httptest.NewRequest("POST", "/v1/campaigns/"+acc.ID+"/pause", nil)
		req.Header.Set("Authorization", "Bearer "+ordersKey)
		req.Header.Set("X-Test-Request", "req-42")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusConflict {
			t.Fatalf("pause = %d %s", rec.Code, rec.Body)
		}
		e.clock.Advance(time.Second)
	}
	got := auditEntries(t, e, "?action=campaign.pause")
	if len(got.Entries) != 1 || got.Entries[0].RequestID != "req-42" || got.Entries[0].Result != notify.AuditResultOK {
		t.Fatalf("entries %+v, want one for req-42", got.Entries)
	}
}

// TestAuditUploadAndRearm: an audience list upload and a re-arm of the schedules are recorded
// with what they did; the upload's user ids are not.
func TestAuditUploadAndRearm(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withAudit, withScheduler(t, &sched))
	wantStatus(t, e.upload(t, "vip", ordersKey, "alice\nbob\nalice\nnot an id\n", "", 0), http.StatusOK)
	e.clock.Advance(time.Second)
	rearmAll(t, e, "100")
	got := auditEntries(t, e, "")
	if len(got.Entries) != 2 {
		t.Fatalf("entries %+v", got.Entries)
	}
	rearm, upload := got.Entries[0], got.Entries[1]
	if rearm.Action != notify.AuditSchedulesRearm || rearm.TargetType != notify.AuditTargetSchedules || rearm.Result != notify.AuditResultOK ||
		rearm.Params["notifications"] != "0" || rearm.Params["more"] != "false" {
		t.Errorf("rearm entry %+v", rearm)
	}
	if upload.Action != notify.AuditAudienceListUpload || upload.TargetType != notify.AuditTargetAudienceList || upload.TargetID != "vip" ||
		upload.Params["appended"] != "2" || upload.Params["lines"] != "4" || upload.Params["rejected"] != "1" {
		t.Errorf("upload entry %+v", upload)
	}
	rec := e.do(t, "GET", "/v1/admin/audit", ordersKey, nil)
	if strings.Contains(rec.Body.String(), "alice") {
		t.Errorf("the log holds a user id of the upload: %s", rec.Body)
	}
}

// TestAuditRecordsServicesChangingSharedUserData: a user's devices, contacts, preferences, web
// push subscriptions and inbox are shared by every service of the deployment; each change one
// makes (a device registration aside) is audited under the service and the user, a token
// masked. A device registration is not.
func TestAuditRecordsServicesChangingSharedUserData(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u7/devices/fcm-token-u7-0001", ordersKey, map[string]any{"platform": "fcm"}), http.StatusOK)
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "DELETE", "/v1/users/u7/devices/fcm-token-u7-0001", billingKey, nil), http.StatusNoContent)
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u7/contacts", billingKey, map[string]any{"email": "u7@example.com"}), http.StatusOK)
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u7/preferences", billingKey, map[string]any{"opt_out": map[string]any{"sms": []string{"*"}}}), http.StatusOK)
	got := auditEntries(t, e, "")
	want := []notify.AuditAction{notify.AuditUserPreferencesPut, notify.AuditUserContactsPut, notify.AuditUserDeviceDelete}
	if len(got.Entries) != len(want) {
		t.Fatalf("%d entries %+v, want %v", len(got.Entries), got.Entries, want)
	}
	for i, w := range want {
		g := got.Entries[i]
		if g.Action != w || g.Actor != "billing" || g.TargetType != notify.AuditTargetUser || g.TargetID != "u7" || g.Result != notify.AuditResultOK {
			t.Errorf("entry %d = %+v, want %s by billing on user u7", i, g, w)
		}
	}
	if tok := got.Entries[2].Params["device"]; tok == "" || strings.Contains(tok, "fcm-token-u7-0001") {
		t.Errorf("device delete params %v, want the token masked", got.Entries[2].Params)
	}
}
