package api

import (
	"net/http"
	"testing"

	"herald/internal/notify"
)

// Behind API Gateway the identity comes from the gateway: the header carries "user:<id>" or
// "service:<name>" here, standing in for a verified JWT or SigV4 signature.
func gatewayAuth(r *http.Request) (Principal, error) {
	switch h := r.Header.Get("Authorization"); {
	case len(h) > 12 && h[:12] == "Bearer user:":
		return Principal{User: h[12:]}, nil
	case len(h) > 15 && h[:15] == "Bearer service:":
		return Principal{Service: h[15:]}, nil
	}
	return Principal{}, notify.Errorf(notify.EUNAUTHORIZED, "no gateway identity")
}

func TestEndUsersReachOnlyTheirOwnInbox(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) { o.Authenticate = gatewayAuth })
	wantStatus(t, e.do(t, "GET", "/v1/users/alice/inbox", "user:alice", nil), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/v1/users/alice/inbox/unread-count", "user:alice", nil), http.StatusOK)
	wantError(t, e.do(t, "GET", "/v1/users/bob/inbox", "user:alice", nil), http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "PUT", "/v1/users/alice/contacts", "user:alice", map[string]string{"email": "a@example.com"}),
		http.StatusForbidden, notify.EFORBIDDEN, "")
	wantError(t, e.do(t, "POST", "/v1/notifications", "user:alice", map[string]any{}), http.StatusForbidden, notify.EFORBIDDEN, "")
	// A service reaches every route; an unknown identity none.
	wantStatus(t, e.do(t, "GET", "/v1/users/bob/inbox", "service:orders", nil), http.StatusOK)
	wantError(t, e.do(t, "GET", "/v1/users/bob/inbox", "nobody", nil), http.StatusUnauthorized, notify.EUNAUTHORIZED, "")
}
