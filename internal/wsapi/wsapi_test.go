package wsapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"herald/internal/notify"
)

// Post translates the management API's answers to codes as every provider adapter does.
func TestPostTranslatesStatus(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   string
	}{
		{http.StatusUnauthorized, notify.EAUTH},
		{http.StatusForbidden, notify.EAUTH},
		{http.StatusTooManyRequests, notify.ETHROTTLED},
		{http.StatusBadRequest, notify.EREJECTED},
		{http.StatusInternalServerError, notify.EUNAVAILABLE},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
		}))
		c := NewClient(srv.URL, "us-east-1", credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""))
		err := c.Post(context.Background(), "conn-1=", []byte(`{}`))
		srv.Close()
		if !notify.IsCode(err, tt.want) {
			t.Errorf("status %d: %v (code %q), want %s", tt.status, err, notify.ErrorCode(err), tt.want)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer srv.Close()
	c := NewClient(srv.URL, "us-east-1", credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""))
	if err := c.Post(context.Background(), "conn-1=", []byte(`{}`)); !errors.Is(err, ErrGone) {
		t.Errorf("status 410: %v, want ErrGone", err)
	}
}
