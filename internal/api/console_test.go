package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/sqlite"
)

func TestConsolePageLoadsWithoutKeyAndItsDataNeedsOne(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	rec := e.do(t, "GET", "/console", "", nil)
	wantStatus(t, rec, http.StatusOK)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(rec.Body.String(), "/console/app.js") {
		t.Fatalf("GET /console = %s %q", ct, rec.Body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for file, ct := range consoleAssets {
		rec := e.do(t, "GET", "/console/"+file, "", nil)
		wantStatus(t, rec, http.StatusOK)
		if got := rec.Header().Get("Content-Type"); got != ct || rec.Body.Len() == 0 {
			t.Errorf("GET /console/%s = %q, %d bytes", file, got, rec.Body.Len())
		}
	}
	wantError(t, e.do(t, "GET", "/console/secrets.txt", "", nil), http.StatusNotFound, notify.ENOTFOUND, "")

	// Every data route the console calls answers 401 without a key and 403 with a non-admin one.
	for _, path := range []string{"queues", "queues/ingest-orders/dead-letters", "audit", "notifications/n_x", "campaigns/c_x"} {
		rec := e.do(t, "GET", "/console/api/"+path, "", nil)
		wantError(t, rec, http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("GET /console/api/%s: 401 without WWW-Authenticate", path)
		}
		wantError(t, e.do(t, "GET", "/console/api/"+path, billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	}
	wantError(t, e.do(t, "POST", "/console/api/queues/ingest-orders/redrive", "", nil), http.StatusUnauthorized, notify.EUNAUTHORIZED, "")

	direct := e.do(t, "GET", "/v1/admin/queues", ordersKey, nil)
	viaConsole := e.do(t, "GET", "/console/api/queues", ordersKey, nil)
	wantStatus(t, viaConsole, http.StatusOK)
	if viaConsole.Body.String() != direct.Body.String() {
		t.Fatalf("console queues = %s, /v1/admin/queues = %s", viaConsole.Body, direct.Body)
	}
	// Only operator routes are behind the prefix: it is not a way into the service routes.
	wantError(t, e.do(t, "GET", "/console/api/users/u1/devices", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	for _, p := range []string{"/console/api/%2e%2e/notifications/n_x", "/console/api/queues%2F..%2F..%2Fnotifications%2Fn_x", "/console/api/queues/%2e"} {
		if rec := e.do(t, "GET", p, ordersKey, nil); rec.Code != http.StatusNotFound && rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s = %d %s, want 404 or 400", p, rec.Code, rec.Body)
		}
	}
}

func TestConsoleIsServedWithTheOperatorRoutesOnly(t *testing.T) {
	t.Parallel()
	for rs, want := range map[RouteSet]int{AllRoutes: http.StatusOK, AdminRoutes: http.StatusOK, ServiceRoutes: http.StatusNotFound} {
		e := setup(t, withAudit, func(o *Options) { o.Routes = rs })
		if rec := e.do(t, "GET", "/console", "", nil); rec.Code != want {
			t.Errorf("route set %d: GET /console = %d, want %d", rs, rec.Code, want)
		}
	}
}

func TestAdminReadsAnyServicesNotification(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit) // orders is the admin
	billing := notify.SendRequest{Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "x"},
		Recipients: []notify.Recipient{{UserID: "u1"}}}
	n := billing.Notification(notify.NewID("n_", e.clock.Now()), "billing", e.clock.Now())
	if _, _, err := e.store.CreateNotification(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do(t, "GET", "/v1/notifications/"+n.ID, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	for _, path := range []string{"/v1/admin/notifications/" + n.ID, "/console/api/notifications/" + n.ID} {
		rec := e.do(t, "GET", path, ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "GET", "/v1/admin/notifications/{id}", rec)
		if v := decodeBody[notificationView](t, rec); v.ID != n.ID || v.Service != "billing" {
			t.Fatalf("GET %s = %+v", path, v)
		}
	}
	wantError(t, e.do(t, "GET", "/v1/admin/notifications/"+n.ID, billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
}

func TestAdminControlsAnyServicesCampaign(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit)
	body := campaignBody()
	body["send_at"] = e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	acc := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", billingKey, body))
	wantError(t, e.do(t, "GET", "/v1/campaigns/"+acc.ID, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	rec := e.do(t, "GET", "/console/api/campaigns/"+acc.ID, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/campaigns/{id}", rec)
	wantError(t, e.do(t, "POST", "/v1/admin/campaigns/"+acc.ID+"/cancel", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	e.clock.Advance(time.Second)
	rec = e.do(t, "POST", "/console/api/campaigns/"+acc.ID+"/cancel", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if st := decodeBody[campaignState](t, rec); st.State != notify.CampaignCanceled {
		t.Fatalf("cancel = %+v", st)
	}
	got := auditEntries(t, e, "?action="+string(notify.AuditCampaignCancel))
	if len(got.Entries) != 2 || got.Entries[0].Actor != "orders" || got.Entries[0].Result != notify.AuditResultOK || got.Entries[1].Actor != "billing" {
		t.Fatalf("audit = %+v, want orders' cancel after billing's refused one", got.Entries)
	}
}

func TestConsoleOperatorSignIn(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit, func(o *Options) {
		o.Authenticate = func(r *http.Request) (Principal, error) {
			if r.Header.Get("Authorization") == "Bearer operator-jwt" {
				return Principal{User: "alice@example.com", Operator: true}, nil
			}
			return Principal{}, nil
		}
	})
	const jwt = "operator-jwt"
	wantStatus(t, e.do(t, "GET", "/console/api/queues", jwt, nil), http.StatusOK)
	// The same sign-in elsewhere is refused: the operator routes directly, the service routes.
	wantError(t, e.do(t, "GET", "/v1/admin/queues", jwt, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "GET", "/v1/notifications/n_x", jwt, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantStatus(t, e.do(t, "POST", "/console/api/queues/ingest-orders/redrive", jwt, nil), http.StatusOK)
	got := auditEntries(t, e, "?action="+string(notify.AuditQueueRedrive))
	if len(got.Entries) != 1 || got.Entries[0].Actor != "alice@example.com" || got.Entries[0].ActorKind != notify.ActorUser {
		t.Fatalf("audit = %+v, want the redrive attributed to the operator", got.Entries)
	}
}

func TestAdminListsAndControlsReservedSends(t *testing.T) {
	t.Parallel()
	var sched *sqlite.Scheduler
	e := setup(t, withCampaigns(), withAudit, withScheduler(t, &sched), func(o *Options) { o.AdminServices = []string{"billing"} })
	at := e.clock.Now().Add(time.Hour).Truncate(time.Second)
	seedScheduled(t, e, sched, "n_reserved1", at) // orders'
	body := campaignBody()
	body["send_at"] = at.Add(time.Hour).Format(time.RFC3339)
	acc := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", ordersKey, body))

	wantError(t, e.do(t, "GET", "/v1/admin/reserved", ordersKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	var got []reservedView
	for cursor, pages := "", 0; ; pages++ {
		if pages > 10 {
			t.Fatal("the reserved listing does not end")
		}
		rec := e.do(t, "GET", "/console/api/reserved?limit=1&cursor="+url.QueryEscape(cursor), billingKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "GET", "/v1/admin/reserved", rec)
		p := decodeBody[reservedPage](t, rec)
		got = append(got, p.Reserved...)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	want := []reservedView{{Kind: "notification", ID: "n_reserved1", Service: "orders", SendAt: at.UTC()},
		{Kind: "campaign", ID: acc.ID, Service: "orders", SendAt: at.Add(time.Hour).UTC()}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reserved = %+v, want %+v", got, want)
	}
	wantError(t, e.do(t, "GET", "/v1/admin/reserved?cursor=bogus", billingKey, nil), http.StatusBadRequest, notify.EINVALID, "cursor")

	// billing, an admin, moves and cancels orders' reserved sends; orders' own routes see them.
	later := at.Add(3 * time.Hour)
	wantStatus(t, e.do(t, "PATCH", "/console/api/notifications/n_reserved1", billingKey, map[string]any{"send_at": later}), http.StatusOK)
	wantStatus(t, e.do(t, "PATCH", "/console/api/campaigns/"+acc.ID, billingKey, map[string]any{"send_at": later}), http.StatusOK)
	wantError(t, e.do(t, "DELETE", "/v1/admin/notifications/n_reserved1", ordersKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantStatus(t, e.do(t, "DELETE", "/console/api/notifications/n_reserved1", billingKey, nil), http.StatusOK)
	n, err := e.store.GetNotification(t.Context(), "n_reserved1")
	if err != nil || n.Status != notify.StatusCanceled || !n.SendAt.Equal(later) {
		t.Fatalf("notification after the operator's reschedule and cancel: %+v %v", n, err)
	}
	c := decodeBody[campaignView](t, e.do(t, "GET", "/v1/campaigns/"+acc.ID, ordersKey, nil))
	if c.SendAt == nil || !c.SendAt.Equal(later) {
		t.Fatalf("campaign send_at = %v, want %v", c.SendAt, later)
	}
}

func TestRedriveAndDeleteOneDeadLetter(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	dlq := notify.DLQName(notify.IngestQueue("orders"))
	if err := e.queue.Send(t.Context(), dlq, notify.OutMessage{Body: []byte(`{"one":1}`)}, notify.OutMessage{Body: []byte(`{"two":2}`)},
		notify.OutMessage{Body: []byte(`{"three":3}`)}); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.queue.Peek(t.Context(), dlq, 10)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("peek = %v %v", msgs, err)
	}
	one, two := msgs[0].ID, msgs[1].ID
	base := "/console/api/queues/ingest-orders/dead-letters/"
	wantError(t, e.do(t, "POST", base+one+"/redrive", "", nil), http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
	wantError(t, e.do(t, "POST", base+one+"/redrive", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/admin/queues/nope/dead-letters/"+one+"/redrive", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "queue")
	e.clock.Advance(time.Second) // entries of the same instant have no set order
	rec := e.do(t, "POST", base+one+"/redrive", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "POST", "/v1/admin/queues/{queue}/dead-letters/{message}/redrive", rec)
	e.clock.Advance(time.Second)
	rec = e.do(t, "DELETE", base+two, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "DELETE", "/v1/admin/queues/{queue}/dead-letters/{message}", rec)
	e.clock.Advance(time.Second)
	wantError(t, e.do(t, "DELETE", base+two, ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")

	if got := e.receiveAll(t, notify.IngestQueue("orders")); len(got) != 1 || string(got[0].Body) != `{"one":1}` {
		t.Fatalf("the source queue holds %d messages, want the one redriven", len(got))
	}
	if left, _ := e.queue.Peek(t.Context(), dlq, 10); len(left) != 1 || string(left[0].Body) != `{"three":3}` {
		t.Fatalf("the DLQ holds %d messages, want only the third", len(left))
	}
	got := auditEntries(t, e, "")
	var actions []string
	for _, a := range got.Entries {
		actions = append(actions, string(a.Action)+" "+a.Params["message_id"]+" "+a.Result)
	}
	want := []string{"dead_letter.delete " + two + " not_found", "dead_letter.delete " + two + " ok", "dead_letter.redrive " + one + " ok"}
	if len(actions) != 5 || strings.Join(actions[:3], "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit = %q, want the delete (twice) after the redrive", actions)
	}
}

func TestQueuesShowTheOldestMessageAge(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	if err := e.queue.Send(t.Context(), notify.IngestQueue("orders"), notify.OutMessage{Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	rec := e.do(t, "GET", "/v1/admin/queues", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/queues", rec)
	got := decodeBody[struct {
		Queues []queueView `json:"queues"`
	}](t, rec)
	if len(got.Queues) != 1 || got.Queues[0].Stats.OldestAgeSeconds == nil {
		t.Fatalf("queues = %s, want the oldest message's age", rec.Body)
	}
}

func TestAdminListsNotifications(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit) // orders is the admin
	mkTo := func(user, service, key string, cat notify.Category, age time.Duration) string {
		sr := notify.SendRequest{Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "x"},
			Recipients: []notify.Recipient{{UserID: user}}, Category: cat, IdempotencyKey: key}
		n := sr.Notification(notify.NewID("n_", e.clock.Now().Add(-age)), service, e.clock.Now().Add(-age))
		if _, _, err := e.store.CreateNotification(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	mk := func(service, key string, cat notify.Category, age time.Duration) string {
		return mkTo("u1", service, key, cat, age)
	}
	old := mk("billing", "", notify.CategoryTransactional, 2*time.Hour)
	promo := mk("billing", "promo-1", notify.CategoryMarketing, time.Hour)
	mine := mk("orders", "", notify.CategoryTransactional, 0)
	bob := mkTo("bob", "orders", "", notify.CategoryTransactional, 30*time.Minute)

	list := func(query string) []string {
		t.Helper()
		var ids []string
		for cursor, pages := "", 0; ; pages++ {
			if pages > 10 {
				t.Fatal("the listing does not end")
			}
			q := query + "&limit=1"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			rec := e.do(t, "GET", "/console/api/notifications?"+q, ordersKey, nil)
			wantStatus(t, rec, http.StatusOK)
			wantDocumented(t, "GET", "/v1/admin/notifications", rec)
			p := decodeBody[notificationList](t, rec)
			for _, n := range p.Notifications {
				ids = append(ids, n.ID)
			}
			if cursor = p.NextCursor; cursor == "" {
				return ids
			}
		}
	}
	for query, want := range map[string][]string{
		"":                        {mine, bob, promo, old},
		"service=billing":         {promo, old},
		"user=u1":                 {mine, promo, old},
		"user=bob":                {bob},
		"user=u1&service=billing": {promo, old},
		"category=marketing":      {promo},
		"service=billing&idempotency_key=promo-1": {promo},
		"status=SENT": nil,
		"from=" + url.QueryEscape(e.clock.Now().Add(-90*time.Minute).Format(time.RFC3339Nano)): {mine, bob, promo},
	} {
		if got := list(query); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("?%s listed %v, want %v", query, got, want)
		}
	}
	wantError(t, e.do(t, "GET", "/v1/admin/notifications", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "GET", "/v1/admin/notifications", "", nil), http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
	wantError(t, e.do(t, "GET", "/v1/admin/notifications?status=DISPATCHING", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "status")
	wantError(t, e.do(t, "GET", "/v1/admin/notifications?category=spam", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "category")
	wantError(t, e.do(t, "GET", "/v1/admin/notifications?from=yesterday", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "from")
	wantError(t, e.do(t, "GET", "/v1/admin/notifications?user=a%20b", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "user")
	// A cursor serves only the filter it was made for.
	p := decodeBody[notificationList](t, e.do(t, "GET", "/v1/admin/notifications?limit=1", ordersKey, nil))
	wantError(t, e.do(t, "GET", "/v1/admin/notifications?limit=1&service=billing&cursor="+url.QueryEscape(p.NextCursor), ordersKey, nil),
		http.StatusBadRequest, notify.EINVALID, "cursor")
}

func TestAdminListsCampaigns(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit) // orders is the admin
	body := campaignBody()
	body["send_at"] = e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	first := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", billingKey, body))
	e.clock.Advance(time.Second)
	second := decodeBody[campaignState](t, e.do(t, "POST", "/v1/campaigns", ordersKey, body))
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "POST", "/v1/campaigns/"+second.ID+"/cancel", ordersKey, nil), http.StatusOK)

	type list struct {
		Campaigns []campaignSummary `json:"campaigns"`
	}
	rec := e.do(t, "GET", "/console/api/campaigns", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/admin/campaigns", rec)
	got := decodeBody[list](t, rec).Campaigns
	if len(got) != 2 || got[0].ID != second.ID || got[0].State != notify.CampaignCanceled || got[1].ID != first.ID ||
		got[1].Service != "billing" || got[1].SendAt == nil {
		t.Fatalf("campaigns = %+v, want the canceled one of orders, then billing's scheduled one", got)
	}
	got = decodeBody[list](t, e.do(t, "GET", "/v1/admin/campaigns?state=SCHEDULED&state=RUNNING", ordersKey, nil)).Campaigns
	if len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("scheduled or running = %+v, want billing's", got)
	}
	type page struct {
		Campaigns  []campaignSummary `json:"campaigns"`
		NextCursor string            `json:"next_cursor"`
	}
	p1 := decodeBody[page](t, e.do(t, "GET", "/v1/admin/campaigns?limit=1", ordersKey, nil))
	if len(p1.Campaigns) != 1 || p1.Campaigns[0].ID != second.ID || p1.NextCursor == "" {
		t.Fatalf("limit 1 = %+v, want the newest and a cursor", p1)
	}
	p2 := decodeBody[page](t, e.do(t, "GET", "/v1/admin/campaigns?limit=1&cursor="+url.QueryEscape(p1.NextCursor), ordersKey, nil))
	if len(p2.Campaigns) != 1 || p2.Campaigns[0].ID != first.ID || p2.NextCursor != "" {
		t.Fatalf("second page = %+v, want billing's and no cursor", p2)
	}
	wantError(t, e.do(t, "GET", "/v1/admin/campaigns?limit=1&state=CANCELED&cursor="+url.QueryEscape(p1.NextCursor), ordersKey, nil),
		http.StatusBadRequest, notify.EINVALID, "cursor")
	wantError(t, e.do(t, "GET", "/v1/admin/campaigns?state=DONE", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "state")
	wantError(t, e.do(t, "GET", "/v1/admin/campaigns", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
}

// TestEveryOperatorRouteRefusesOtherServices: each /v1/admin/ route answers a service that is not
// an admin 403, whatever the route (each handler checks first; a refused mutating call is still
// audited).
func TestEveryOperatorRouteRefusesOtherServices(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withAudit) // orders is the admin, billing is not
	n := 0
	for _, rt := range routes {
		if !strings.HasPrefix(rt.Path, adminPrefix) {
			continue
		}
		path := rt.Path
		for _, p := range pathParams(rt.Path) {
			path = strings.Replace(path, "{"+p+"}", "x1", 1)
		}
		var body any
		if rt.Method == "POST" || rt.Method == "PATCH" {
			body = map[string]any{}
		}
		rec := e.do(t, rt.Method, path, billingKey, body)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s %s as billing: %d %s, want 403", rt.Method, path, rec.Code, rec.Body.String())
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d operator routes found", n)
	}
}

// TestConsoleAssetsGzipAndETag: the console's files go gzipped to a client that takes it, carry
// a strong ETag, and a revalidation with it is a 304 without a body.
func TestConsoleAssetsGzipAndETag(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, path := range []string{"/console", "/console/app.js", "/console/style.css"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Accept-Encoding", "br, gzip;q=0.8")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("ETag") == "" {
			t.Fatalf("%s: %d %v", path, rec.Code, rec.Header())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatalf("%s: not gzip: %v", path, err)
		}
		plain, _ := io.ReadAll(zr)
		raw := httptest.NewRecorder()
		e.h.ServeHTTP(raw, httptest.NewRequest("GET", path, nil))
		if raw.Header().Get("Content-Encoding") != "" || !bytes.Equal(plain, raw.Body.Bytes()) || len(plain) == 0 {
			t.Fatalf("%s: the gzipped body is not the plain one", path)
		}
		again := httptest.NewRequest("GET", path, nil)
		again.Header.Set("If-None-Match", rec.Header().Get("ETag"))
		nm := httptest.NewRecorder()
		e.h.ServeHTTP(nm, again)
		if nm.Code != http.StatusNotModified || nm.Body.Len() != 0 {
			t.Fatalf("%s revalidated: %d with %d bytes, want 304 and none", path, nm.Code, nm.Body.Len())
		}
		if acceptsGzip("gzip;q=0") || !acceptsGzip("deflate, gzip") {
			t.Fatal("acceptsGzip misreads q")
		}
	}
}

// noRecipientIndex is a store that keeps no recipient index, as a DynamoDB store of a deployment
// without stack.recipient_index.
type noRecipientIndex struct{ *sqlite.Store }

func (s noRecipientIndex) ListNotifications(ctx context.Context, f notify.NotificationFilter, cursor string, limit int) ([]notify.NotificationSummary, string, error) {
	if f.User != "" {
		return nil, "", fmt.Errorf("ddb: list notifications by user: %w", notify.ErrNoRecipientIndex)
	}
	return s.Store.ListNotifications(ctx, f, cursor, limit)
}

// Where the store keeps no recipient index, a listing by user is a 501 that says so; the other
// filters still answer.
func TestAdminListsNotificationsWithoutRecipientIndex(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit, func(o *Options) { o.Store = noRecipientIndex{o.Store.(*sqlite.Store)} })
	rec := e.do(t, "GET", "/v1/admin/notifications?user=u1", ordersKey, nil)
	wantStatus(t, rec, http.StatusNotImplemented)
	wantDocumented(t, "GET", "/v1/admin/notifications", rec)
	if !strings.Contains(rec.Body.String(), "stack.recipient_index") {
		t.Errorf("501 body %s does not say how to turn the index on", rec.Body)
	}
	wantStatus(t, e.do(t, "GET", "/v1/admin/notifications?service=orders", ordersKey, nil), http.StatusOK)
}

// An operator finds the user an address belongs to: an email whatever its case, a phone number
// as people write it, a push token; an unknown address is a 404 that does not echo it.
func TestAdminFindsARecipientByAddress(t *testing.T) {
	t.Parallel()
	e := setup(t, withAudit)
	wantStatus(t, e.do(t, "PUT", "/v1/users/ann/contacts", ordersKey, map[string]any{"email": "Ann@Example.com", "phone": "+821012345678"}), http.StatusOK)
	wantStatus(t, e.do(t, "PUT", "/v1/users/ben/devices/tok-ben-0001", ordersKey, map[string]any{"platform": "fcm"}), http.StatusOK)
	for address, want := range map[string]recipientFound{
		"ann@example.com":   {UserID: "ann", Channel: notify.ChannelEmail},
		" ANN@EXAMPLE.COM ": {UserID: "ann", Channel: notify.ChannelEmail},
		"+82 10-1234-5678":  {UserID: "ann", Channel: notify.ChannelSMS},
		"tok-ben-0001":      {UserID: "ben", Channel: notify.ChannelPush},
	} {
		rec := e.do(t, "GET", "/v1/admin/recipients?address="+url.QueryEscape(address), ordersKey, nil)
		wantStatus(t, rec, http.StatusOK)
		wantDocumented(t, "GET", "/v1/admin/recipients", rec)
		if got := decodeBody[recipientFound](t, rec); got != want {
			t.Errorf("%q: %+v, want %+v", address, got, want)
		}
	}
	rec := e.do(t, "GET", "/v1/admin/recipients?address="+url.QueryEscape("nobody@example.com"), ordersKey, nil)
	wantError(t, rec, http.StatusNotFound, notify.ENOTFOUND, "")
	if strings.Contains(rec.Body.String(), "nobody") {
		t.Errorf("the 404 echoes the address: %s", rec.Body)
	}
	wantError(t, e.do(t, "GET", "/v1/admin/recipients", ordersKey, nil), http.StatusBadRequest, notify.EINVALID, "address")
	wantError(t, e.do(t, "GET", "/v1/admin/recipients?address=ann@example.com", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
}
