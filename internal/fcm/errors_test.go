package fcm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"

	"herald/internal/notify"
)

// fcmBody is an FCM v1 error body; errorCode "" leaves out the FcmError details entry.
func fcmBody(code int, status, errorCode, message string) string {
	e := map[string]any{"code": code, "status": status, "message": message}
	if errorCode != "" {
		e["details"] = []map[string]string{{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode}}
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// TestClassify feeds real SDK errors, produced by answering the SDK with each canned FCM
// response, and plain errors through classify. 503s are answered as 500 + UNAVAILABLE so the
// SDK's own retries (with second-long backoff) stay out of the test.
func TestClassify(t *testing.T) {
	t.Parallel()
	type reply struct {
		status int
		header map[string]string
		body   string
	}
	const secret = "tok-0123456789-abcdef-secret"
	replies := map[string]reply{
		"unregistered":  {404, nil, fcmBody(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")},
		"mismatch":      {403, nil, fcmBody(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", "SenderId mismatch")},
		"invalid":       {400, nil, fcmBody(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "not a valid FCM registration token")},
		"quota":         {429, map[string]string{"Retry-After": "7"}, fcmBody(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "quota")},
		"bare429":       {429, nil, fcmBody(429, "RESOURCE_EXHAUSTED", "", "quota")},
		"unavailable":   {500, map[string]string{"Retry-After": "3"}, fcmBody(503, "UNAVAILABLE", "UNAVAILABLE", "down")},
		"internal":      {500, nil, fcmBody(500, "INTERNAL", "INTERNAL", "oops")},
		"thirdparty":    {401, nil, fcmBody(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", "APNs auth failed")},
		"unauth":        {401, nil, fcmBody(401, "UNAUTHENTICATED", "", "Request had invalid authentication credentials.")},
		"denied":        {403, nil, fcmBody(403, "PERMISSION_DENIED", "", "Permission denied")},
		"bare400":       {400, nil, fcmBody(400, "INVALID_ARGUMENT", "", "bad")},
		"notfound":      {404, nil, fcmBody(404, "NOT_FOUND", "", "project not found")},
		"teapot":        {418, nil, "I'm a teapot"},
		"echo" + secret: {500, nil, "upstream failed for echo" + secret},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Message struct{ Token string } `json:"message"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		rp := replies[req.Message.Token]
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		_, _ = fmt.Fprint(w, rp.body)
	}))
	t.Cleanup(srv.Close)
	client := newRawClient(t, srv.URL+"/v1", srv.Client())
	sdkErr := func(token string) error {
		_, err := client.Send(context.Background(), &messaging.Message{Token: token})
		if err == nil {
			t.Fatalf("token %q: no error from the SDK", token)
		}
		return err
	}

	tests := []struct {
		name       string
		err        error
		token      string
		code       string
		retryAfter time.Duration
	}{
		{"unregistered", sdkErr("unregistered"), "unregistered", notify.EDEADADDRESS, 0},
		{"sender id mismatch", sdkErr("mismatch"), "mismatch", notify.EDEADADDRESS, 0},
		{"invalid argument", sdkErr("invalid"), "invalid", notify.EREJECTED, 0},
		{"quota exceeded", sdkErr("quota"), "quota", notify.ETHROTTLED, 7 * time.Second},
		{"429 without details", sdkErr("bare429"), "bare429", notify.ETHROTTLED, 0},
		{"unavailable", sdkErr("unavailable"), "unavailable", notify.EUNAVAILABLE, 3 * time.Second},
		{"internal", sdkErr("internal"), "internal", notify.EUNAVAILABLE, 0},
		{"third-party auth", sdkErr("thirdparty"), "thirdparty", notify.EAUTH, 0},
		{"unauthenticated", sdkErr("unauth"), "unauth", notify.EAUTH, 0},
		{"permission denied", sdkErr("denied"), "denied", notify.EAUTH, 0},
		{"400 without details", sdkErr("bare400"), "bare400", notify.EREJECTED, 0},
		{"404 without details", sdkErr("notfound"), "notfound", notify.EINTERNAL, 0},
		{"unknown status", sdkErr("teapot"), "teapot", notify.EINTERNAL, 0},
		{"body echoing the token", sdkErr("echo" + secret), "echo" + secret, notify.EUNAVAILABLE, 0},
		{"deadline", context.DeadlineExceeded, "t", notify.EUNAVAILABLE, 0},
		{"canceled", fmt.Errorf("acquire: %w", context.Canceled), "t", notify.EUNAVAILABLE, 0},
		{"network", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, "t", notify.EUNAVAILABLE, 0},
		{"sdk validation", fmt.Errorf("%w: %w", errRefused, errors.New(`invalid image URL: "::"`)), "t", notify.EREJECTED, 0},
		{"anything else", errors.New("boom"), "t", notify.EINTERNAL, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := classify(tt.err, tt.token)
			if got := notify.ErrorCode(err); got != tt.code {
				t.Errorf("code = %q, want %q (err: %v)", got, tt.code, tt.err)
			}
			if got := notify.RetryAfter(err); got != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", got, tt.retryAfter)
			}
			if len(tt.token) > 12 && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error text contains the raw token: %v", err)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("the SDK error is not kept as the cause")
			}
		})
	}
	if classify(nil, "t") != nil {
		t.Error("classify(nil) != nil")
	}
}

// newRawClient is the SDK client as REFERENCE.md sets it up for a fake: endpoint, no auth.
func newRawClient(t testing.TB, endpoint string, hc *http.Client) *messaging.Client {
	t.Helper()
	opts := []option.ClientOption{option.WithEndpoint(endpoint), option.WithoutAuthentication()}
	if hc != nil {
		opts = append(opts, option.WithHTTPClient(hc))
	}
	app, err := firebase.NewApp(context.Background(), &firebase.Config{ProjectID: "herald-test"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := app.Messaging(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
