package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"herald/internal/notify"
)

// upload sends body to POST /v1/audience-lists/{list}/members as text/plain (contentType, when
// given, replaces it; "-" sends none). A negative length sends the body chunked.
func (e *env) upload(t *testing.T, list, key, body string, contentType string, length int64) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if length < 0 {
		rd = io.MultiReader(rd) // hides the length from httptest
	}
	req := httptest.NewRequest("POST", "/v1/audience-lists/"+list+"/members", rd)
	req.ContentLength = int64(len(body))
	if length < 0 {
		req.ContentLength = -1
	}
	req.Header.Set("Authorization", "Bearer "+key)
	switch contentType {
	case "":
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	case "-":
	default:
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func listMembers(t *testing.T, e *env, stored string) []string {
	t.Helper()
	a := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: stored}}}
	page, err := e.store.Page(context.Background(), a, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page {
		out = append(out, m.UserID)
	}
	return out
}

func TestAudienceListUpload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := e.upload(t, "vip", ordersKey, "user_id,name\nalice,A\nbob,B\nbad id,C\nalice,again\n\n# end\n", "text/csv", 0)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "POST", "/v1/audience-lists/{list}/members", rec)
	got := decodeBody[audienceUpload](t, rec)
	if got.ListID != "vip" || got.Appended != 2 || got.Members != 2 || got.Duplicates != 1 || got.Lines != 7 ||
		got.RejectedTotal != 1 || len(got.Rejected) != 1 || got.Rejected[0].Line != 4 {
		t.Fatalf("upload = %+v", got)
	}

	// A second upload appends after the first.
	rec = e.upload(t, "vip", ordersKey, "carol\nalice\n", "", 0)
	wantStatus(t, rec, http.StatusOK)
	got = decodeBody[audienceUpload](t, rec)
	if got.Appended != 2 || got.Members != 4 || len(got.Rejected) != 0 || got.Rejected == nil {
		t.Fatalf("second upload = %+v, want 2 appended, 4 members, rejected []", got)
	}
	if m := listMembers(t, e, "orders/vip"); strings.Join(m, ",") != "alice,bob,carol,alice" {
		t.Fatalf("stored members %v", m)
	}

	rec = e.do(t, "GET", "/v1/audience-lists/vip", ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/audience-lists/{list}", rec)
	if v := decodeBody[audienceListView](t, rec); v.ListID != "vip" || v.Members != 4 {
		t.Fatalf("GET = %+v", v)
	}
	// Lists are per service: billing's "vip" is another, empty list.
	rec = e.do(t, "GET", "/v1/audience-lists/vip", billingKey, nil)
	wantStatus(t, rec, http.StatusOK)
	if v := decodeBody[audienceListView](t, rec); v.Members != 0 {
		t.Fatalf("billing sees orders' list: %+v", v)
	}
	if rec := e.upload(t, "vip", "", "alice\n", "", 0); rec.Code != http.StatusUnauthorized {
		t.Fatalf("without a key: %d", rec.Code)
	}
}

func TestAudienceListUploadErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) { o.MaxUploadBytes = 64 })
	cases := []struct {
		name, list, body, contentType string
		length                        int64
		status                        int
		code, field                   string
	}{
		{"nothing valid", "l", "user_id\nbad id\n\x01\n", "", 0, 400, notify.EINVALID, "body"},
		{"empty body", "l", "", "", 0, 400, notify.EINVALID, "body"},
		{"json", "l", `["alice"]`, "application/json", 0, 400, notify.EINVALID, "Content-Type"},
		{"too large", "l", strings.Repeat("a\n", 40), "", 0, 413, notify.ETOOLARGE, "Content-Length"},
		{"no length", "l", "alice\n", "", -1, 400, notify.EINVALID, "Content-Length"},
		{"slash in list", "a%2Fb", "alice\n", "", 0, 400, notify.EINVALID, "list"},
		{"space in list", "a%20b", "alice\n", "", 0, 400, notify.EINVALID, "list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.upload(t, c.list, ordersKey, c.body, c.contentType, c.length)
			d := wantError(t, rec, c.status, c.code, c.field)
			wantDocumented(t, "POST", "/v1/audience-lists/{list}/members", rec)
			if c.name == "nothing valid" && !strings.Contains(d.Message, "line 2") {
				t.Errorf("message %q does not name line 2", d.Message)
			}
		})
	}
	if m := listMembers(t, e, "orders/l"); len(m) != 0 {
		t.Fatalf("a refused upload appended %v", m)
	}
	rec := e.upload(t, "l", ordersKey, "alice\n", "-", 0) // no Content-Type: taken as text
	wantStatus(t, rec, http.StatusOK)
}

func TestAudienceListsNotAvailable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) { o.Store = storeOnly{o.Store} })
	rec := e.upload(t, "l", ordersKey, "alice\n", "", 0)
	wantError(t, rec, http.StatusNotImplemented, codeNotImplemented, "")
	wantDocumented(t, "POST", "/v1/audience-lists/{list}/members", rec)
}

// storeOnly hides every method but notify.Store's.
type storeOnly struct{ notify.Store }

func TestCampaignOnUploadedList(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	body := campaignBody()
	body["audience"] = map[string]any{"sources": []map[string]any{{"kind": "user_list", "list_id": "vip"}}}

	rec := e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	d := wantError(t, rec, http.StatusBadRequest, notify.EINVALID, "audience.sources[0].list_id")
	if !strings.Contains(d.Message, "upload it first") {
		t.Errorf("message %q", d.Message)
	}
	wantStatus(t, e.upload(t, "vip", ordersKey, "alice\nbob\n", "", 0), http.StatusOK)

	// Another service cannot reach orders' list.
	rec = e.do(t, "POST", "/v1/campaigns", billingKey, body)
	wantError(t, rec, http.StatusBadRequest, notify.EINVALID, "audience.sources[0].list_id")

	rec = e.do(t, "POST", "/v1/campaigns", ordersKey, body)
	wantStatus(t, rec, http.StatusAccepted)
	id := decodeBody[campaignState](t, rec).ID
	stored, err := e.store.GetCampaign(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if src := stored.Audience.Sources[0]; src.ListID != "orders/vip" {
		t.Fatalf("stored source %+v, want the service-scoped list orders/vip", src)
	}
	rec = e.do(t, "GET", "/v1/campaigns/"+id, ordersKey, nil)
	wantStatus(t, rec, http.StatusOK)
	wantDocumented(t, "GET", "/v1/campaigns/{id}", rec)
	if v := decodeBody[campaignView](t, rec); v.Sources[0].ListID != "vip" {
		t.Fatalf("view shows list %q, want the caller's name vip", v.Sources[0].ListID)
	}

	bad := campaignBody()
	bad["audience"] = map[string]any{"sources": []map[string]any{{"kind": "user_list", "list_id": "a/b"}}}
	wantError(t, e.do(t, "POST", "/v1/campaigns", ordersKey, bad), http.StatusBadRequest, notify.EINVALID, "audience.sources[0].list_id")
}

func TestAudienceListLargeUpload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var b strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&b, "user-%06d\n", i%15_000)
	}
	rec := e.upload(t, "big", ordersKey, b.String(), "", 0)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[audienceUpload](t, rec); got.Appended != 15_000 || got.Duplicates != 5_000 || got.Members != 15_000 {
		t.Fatalf("upload = %+v", got)
	}
}
