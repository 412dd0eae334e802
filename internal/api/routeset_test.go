package api

import (
	"net/http"
	"testing"

	"herald/internal/notify"
)

// In AWS the api function serves the service routes and the admin function the operator routes:
// each answers 404 for the other's, whoever calls — an admin service included.
func TestRouteSetsSplitOperatorRoutes(t *testing.T) {
	t.Parallel()
	admin := func(o *Options) {
		o.Admin = o.Queue.(notify.Queue)
		o.Queues = []string{notify.IngestQueue("orders")}
		o.AdminServices = []string{"orders"}
	}
	send := map[string]any{"idempotency_key": "route-set-1", "channels": []string{"inbox"},
		"content": map[string]string{"body": "hi"}, "recipients": []map[string]string{{"user_id": "u1"}}}

	api := setup(t, admin, func(o *Options) { o.Routes = ServiceRoutes })
	wantError(t, api.do(t, "GET", "/v1/admin/queues", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	wantError(t, api.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	wantStatus(t, api.do(t, "POST", "/v1/notifications", ordersKey, send), http.StatusAccepted)
	wantStatus(t, api.do(t, "GET", "/healthz", "", nil), http.StatusOK)

	adm := setup(t, admin, func(o *Options) { o.Routes = AdminRoutes })
	wantStatus(t, adm.do(t, "GET", "/v1/admin/queues", ordersKey, nil), http.StatusOK)
	wantStatus(t, adm.do(t, "POST", "/v1/admin/queues/ingest-orders/redrive", ordersKey, nil), http.StatusOK)
	wantError(t, adm.do(t, "GET", "/v1/admin/queues", billingKey, nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, adm.do(t, "POST", "/v1/notifications", ordersKey, send), http.StatusNotFound, notify.ENOTFOUND, "")
	wantError(t, adm.do(t, "GET", "/v1/users/u1/inbox", ordersKey, nil), http.StatusNotFound, notify.ENOTFOUND, "")
	wantStatus(t, adm.do(t, "GET", "/healthz", "", nil), http.StatusOK)

	all := setup(t, admin)
	wantStatus(t, all.do(t, "GET", "/v1/admin/queues", ordersKey, nil), http.StatusOK)
	wantStatus(t, all.do(t, "POST", "/v1/notifications", ordersKey, send), http.StatusAccepted)
}

// A caller the gateway verified but Herald does not know is refused (403) without a bearer
// challenge: new credentials would not help. Missing credentials still get 401 with one.
func TestRefusedCallerGetsNoBearerChallenge(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) {
		o.Authenticate = func(r *http.Request) (Principal, error) {
			if r.Header.Get("Authorization") == "Bearer stranger" {
				return Principal{}, notify.Errorf(notify.EFORBIDDEN, "this IAM principal is not in any service's iam_principals")
			}
			return Principal{}, nil
		}
	})
	rec := e.do(t, "POST", "/v1/notifications", "stranger", map[string]any{})
	wantError(t, rec, http.StatusForbidden, notify.EFORBIDDEN, "")
	if h := rec.Header().Get("WWW-Authenticate"); h != "" {
		t.Errorf("403 carries WWW-Authenticate %q", h)
	}
	rec = e.do(t, "POST", "/v1/notifications", "", map[string]any{})
	wantError(t, rec, http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
	if rec.Header().Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
}
