package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

// exportQueue records what is sent to the export queue, and fails when told to.
type exportQueue struct {
	notify.Producer
	mu   sync.Mutex
	ids  []string
	fail bool
}

func (q *exportQueue) Send(ctx context.Context, queue string, msgs ...notify.OutMessage) error {
	if queue != notify.QueueExport {
		return q.Producer.Send(ctx, queue, msgs...)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return notify.Errorf(notify.EUNAVAILABLE, "queue down")
	}
	for _, m := range msgs {
		var em notify.ExportMessage
		_ = json.Unmarshal(m.Body, &em)
		q.ids = append(q.ids, em.Export)
	}
	return nil
}

func withExports(q *exportQueue) func(o *Options) {
	return func(o *Options) {
		withAudit(o)
		q.Producer = o.Queue
		o.Queue = q
		o.Exports = o.Store.(notify.ExportStore)
	}
}

// TestExportRoutes: an admin's export is created PENDING and queued once; a service not listed
// as admin is 403; a job is cancelled (twice the same 200); a queue failure leaves no job that
// looks queued.
func TestExportRoutes(t *testing.T) {
	t.Parallel()
	q := &exportQueue{}
	e := setup(t, withExports(q))
	rec := e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "audit", "format": "jsonl", "action": "export.create"})
	wantStatus(t, rec, http.StatusAccepted)
	wantDocumented(t, "POST", "/v1/admin/exports", rec)
	job := decodeBody[notify.ExportJob](t, rec)
	if job.Status != notify.ExportPending || job.Service != "orders" || job.Format != notify.ExportJSONL || len(q.ids) != 1 || q.ids[0] != job.ID {
		t.Fatalf("job %+v, queued %v", job, q.ids)
	}
	wantError(t, e.do(t, "POST", "/v1/admin/exports", billingKey, map[string]any{"kind": "audit"}), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "GET", "/v1/admin/exports/"+job.ID, billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "audit", "channel": "email"}), http.StatusBadRequest, notify.EINVALID, "channel")
	wantError(t, e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "deliveries", "campaign_id": "c_1"}), http.StatusBadRequest, notify.EINVALID, "campaign_id")
	wantError(t, e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "audit", "bogus": 1}), http.StatusBadRequest, notify.EINVALID, "bogus")

	rec = e.do(t, "GET", "/v1/admin/exports/"+job.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/exports/{id}", rec)
	if got := decodeBody[exportView](t, rec); got.Status != notify.ExportPending || got.DownloadURL != "" {
		t.Fatalf("pending job shows %+v", got)
	}
	for range 2 {
		rec = e.do(t, "DELETE", "/v1/admin/exports/"+job.ID, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "DELETE", "/v1/admin/exports/{id}", rec)
		if got := decodeBody[notify.ExportJob](t, rec); got.Status != notify.ExportCanceled {
			t.Fatalf("cancel: %+v", got)
		}
	}
	wantError(t, e.do(t, "GET", "/v1/admin/exports/x_unknown", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")

	e.clock.Advance(time.Second)
	q.mu.Lock()
	q.fail = true
	q.mu.Unlock()
	rec = e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "audit"})
	if rec.Code < 500 {
		t.Fatalf("POST with the queue down = %d, want 5xx", rec.Code)
	}
	got := auditEntries(t, e, "?action=export.create")
	if len(got.Entries) < 2 {
		t.Fatalf("audit %+v", got)
	}
	failed := got.Entries[0]
	if failed.Result == notify.AuditResultOK {
		t.Fatalf("the failed create is audited as ok: %+v", failed)
	}
	if j, err := e.store.GetExport(t.Context(), failed.TargetID); err != nil || j.Status != notify.ExportCanceled {
		t.Fatalf("the unqueued job: %+v %v, want CANCELED", j, err)
	}
}

// TestExportDownloadRefusesForgedLinks: without a valid signature, the file route is 403 for any
// export, known or not, and says nothing of which exist.
func TestExportDownloadRefusesForgedLinks(t *testing.T) {
	t.Parallel()
	e := setup(t, withExports(&exportQueue{}), func(o *Options) { o.ExportFiles = noFiles{} })
	for _, path := range []string{"/exports/x_unknown?expires=9999999999&sig=abc", "/exports/x_unknown", "/exports/x_unknown?expires=soon&sig=abc"} {
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), notify.EFORBIDDEN) {
			t.Errorf("GET %s = %d %s, want 403", path, rec.Code, rec.Body)
		}
	}
}

type noFiles struct{}

func (noFiles) Open(string) (*os.File, error) { return nil, notify.Errorf(notify.ENOTFOUND, "none") }

// TestExportKindsAndFilters: the notifications and suppressions kinds are accepted with their
// own filters; a filter another kind takes, an unknown status or channel, and unmasked are
// 400 naming the field.
func TestExportKindsAndFilters(t *testing.T) {
	t.Parallel()
	q := &exportQueue{}
	e := setup(t, withExports(q))
	for _, body := range []map[string]any{
		{"kind": "notifications", "status": "SENT", "channel": "email", "from": "2030-01-01T00:00:00Z", "to": "2030-02-01T00:00:00Z"},
		{"kind": "suppressions", "format": "jsonl", "channel": "sms", "reason": "bounced", "from": "2030-01-01T00:00:00Z"},
		{"kind": "notifications"},
		{"kind": "suppressions"},
	} {
		rec := e.do(t, "POST", "/v1/admin/exports", ordersKey, body)
		wantStatus(t, rec, http.StatusAccepted)
		j := decodeBody[notify.ExportJob](t, rec)
		if string(j.Kind) != body["kind"] || j.Status != notify.ExportPending || j.Filter.Channel != strOf(body["channel"]) ||
			j.Filter.Status != strOf(body["status"]) || j.Filter.Reason != strOf(body["reason"]) {
			t.Errorf("%v: job %+v", body, j)
		}
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"kind": "everything"}, "kind"},
		{map[string]any{"kind": "notifications", "status": "DISPATCHING"}, "status"},
		{map[string]any{"kind": "notifications", "status": "SENDING"}, "status"},
		{map[string]any{"kind": "notifications", "channel": "fax"}, "channel"},
		{map[string]any{"kind": "notifications", "reason": "bounced"}, "reason"},
		{map[string]any{"kind": "notifications", "notification_id": "n_1"}, "notification_id"},
		{map[string]any{"kind": "notifications", "campaign_id": "c_1"}, "campaign_id"},
		{map[string]any{"kind": "notifications", "action": "export.create"}, "action"},
		{map[string]any{"kind": "suppressions", "status": "SENT"}, "status"},
		{map[string]any{"kind": "suppressions", "channel": "inbox "}, "channel"},
		{map[string]any{"kind": "suppressions", "channel": "fax"}, "channel"},
		{map[string]any{"kind": "suppressions", "notification_id": "n_1"}, "notification_id"},
		{map[string]any{"kind": "suppressions", "unmasked": true}, "unmasked"},
		{map[string]any{"kind": "notifications", "unmasked": true}, "unmasked"},
		{map[string]any{"kind": "suppressions", "from": "2030-02-01T00:00:00Z", "to": "2030-01-01T00:00:00Z"}, "to"},
		{map[string]any{"kind": "suppressions", "to": "9999-12-31T23:59:59Z"}, "to"},
		{map[string]any{"kind": "suppressions", "from": "1969-12-31T00:00:00Z"}, "from"},
		{map[string]any{"kind": "audit", "reason": "x"}, "reason"},
		{map[string]any{"kind": "deliveries", "notification_id": "n_1", "action": "export.create"}, "action"},
	} {
		wantError(t, e.do(t, "POST", "/v1/admin/exports", ordersKey, c.body), http.StatusBadRequest, notify.EINVALID, c.field)
	}
	if len(q.ids) != 4 {
		t.Fatalf("queued %v, want the 4 accepted jobs only", q.ids)
	}
}

func strOf(v any) string {
	s, _ := v.(string)
	return s
}

// TestExportList: GET /v1/admin/exports lists every job newest first, paged by a cursor that
// serves this list only; a DONE job carries its download link; admins only.
func TestExportList(t *testing.T) {
	t.Parallel()
	q := &exportQueue{}
	e := setup(t, withExports(q), func(o *Options) { o.ExportFiles = noFiles{} })
	var ids []string
	for range 3 {
		rec := e.do(t, "POST", "/v1/admin/exports", ordersKey, map[string]any{"kind": "suppressions"})
		wantStatus(t, rec, http.StatusAccepted)
		ids = append([]string{decodeBody[notify.ExportJob](t, rec).ID}, ids...)
		e.clock.Advance(time.Second)
	}
	j, claimed, err := e.store.ClaimExport(t.Context(), ids[0], e.clock.Now(), e.clock.Now().Add(time.Minute))
	if err != nil || !claimed {
		t.Fatal(claimed, err)
	}
	if err := e.store.FinishExport(t.Context(), j.ID, j.Attempts, notify.ExportResult{Status: notify.ExportDone, Rows: 2, Object: "exports/" + j.ID + ".csv"}, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	var got []exportView
	cursor := ""
	for range 5 {
		rec := e.do(t, "GET", "/v1/admin/exports?limit=2"+cursor, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "GET", "/v1/admin/exports", rec)
		page := decodeBody[exportList](t, rec)
		got = append(got, page.Exports...)
		if page.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + page.NextCursor
	}
	if len(got) != 3 || got[0].ID != ids[0] || got[1].ID != ids[1] || got[2].ID != ids[2] {
		t.Fatalf("listed %+v, want %v", got, ids)
	}
	if got[0].Status != notify.ExportDone || !strings.Contains(got[0].DownloadURL, "/exports/"+ids[0]+"?") || got[1].DownloadURL != "" {
		t.Fatalf("listed %+v %+v: want a link on the DONE job only", got[0], got[1])
	}
	wantError(t, e.do(t, "GET", "/v1/admin/exports", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "GET", "/v1/admin/exports?limit=101", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "limit")
	wantError(t, e.do(t, "GET", "/v1/admin/exports?cursor=bogus", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")
}

// TestExportsForConsoleOperators: an operator signed in to the console (a JWT in AWS) lists,
// asks for, shows and cancels exports through /console/api/exports like an admin service; a
// notifications export, which lists the asking service's notifications, is refused to an
// operator, who has no service, naming kind; the create is audited under the operator.
func TestExportsForConsoleOperators(t *testing.T) {
	t.Parallel()
	q := &exportQueue{}
	e := setup(t, withExports(q), func(o *Options) {
		o.Authenticate = func(r *http.Request) (Principal, error) {
			if r.Header.Get("Authorization") == "Bearer operator-jwt" {
				return Principal{User: "alice@example.com", Operator: true}, nil
			}
			return Principal{}, nil
		}
	})
	const jwt = "operator-jwt"
	rec := e.do(t, "POST", "/console/api/exports", jwt, map[string]any{"kind": "suppressions", "channel": "email"})
	wantStatus(t, rec, http.StatusAccepted)
	j := decodeBody[notify.ExportJob](t, rec)
	wantError(t, e.do(t, "POST", "/console/api/exports", jwt, map[string]any{"kind": "notifications"}), http.StatusBadRequest, notify.EINVALID, "kind")
	list := decodeBody[exportList](t, e.do(t, "GET", "/console/api/exports", jwt, nil))
	if len(list.Exports) != 1 || list.Exports[0].ID != j.ID {
		t.Fatalf("the operator's list %+v", list)
	}
	wantStatus(t, e.do(t, "GET", "/console/api/exports/"+j.ID, jwt, nil), http.StatusOK)
	wantStatus(t, e.do(t, "DELETE", "/console/api/exports/"+j.ID, jwt, nil), http.StatusOK)
	wantError(t, e.do(t, "GET", "/v1/admin/exports", jwt, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	got := auditEntries(t, e, "?action="+string(notify.AuditExportCreate))
	// Both entries may share a millisecond, so their order is not asserted.
	i := slices.IndexFunc(got.Entries, func(a notify.AuditEntry) bool { return a.TargetID == j.ID })
	if len(got.Entries) != 2 || i < 0 || got.Entries[i].Actor != "alice@example.com" || got.Entries[i].Result != notify.AuditResultOK {
		t.Fatalf("audit %+v, want the operator's create", got.Entries)
	}
}
