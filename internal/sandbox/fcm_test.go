package sandbox_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"herald/internal/sandbox"
)

func startFCMSandbox(t *testing.T) *sandbox.Server {
	t.Helper()
	sb, err := sandbox.Start(sandbox.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// fcmPost sends body to messages:send of project p and returns status, headers and body.
func fcmPost(t *testing.T, sb *sandbox.Server, p, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(sb.URL()+"/v1/projects/"+p+"/messages:send", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// fcmErrorCode returns the status and the FcmError errorCode of an FCM error body.
func fcmErrorCode(t *testing.T, b []byte) (status, errorCode string) {
	t.Helper()
	var e struct {
		Error struct {
			Status  string
			Details []struct {
				Type      string `json:"@type"`
				ErrorCode string `json:"errorCode"`
			}
		}
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an FCM error body: %s", b)
	}
	for _, d := range e.Error.Details {
		if d.Type == "type.googleapis.com/google.firebase.fcm.v1.FcmError" {
			return e.Error.Status, d.ErrorCode
		}
	}
	return e.Error.Status, ""
}

func TestFCMFakeAcceptsAndRecords(t *testing.T) {
	t.Parallel()
	sb := startFCMSandbox(t)
	status, _, body := fcmPost(t, sb, "proj-1", `{"message":{"token":"tok-1",
		"notification":{"title":"T","body":"B"},"data":{"k":"v"},
		"android":{"collapse_key":"c1","priority":"high","ttl":"3600s"},
		"apns":{"headers":{"apns-priority":"10","apns-collapse-id":"c1"},"payload":{"aps":{"sound":"default"}}},
		"webpush":{"fcm_options":{"link":"https://example.com"}}}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var r struct{ Name string }
	_ = json.Unmarshal(body, &r)
	got := sb.Recorder.List("fcm", "tok-1")
	if len(got) != 1 {
		t.Fatalf("recorded %+v", got)
	}
	d := got[0]
	if d.App != "proj-1" || d.CollapseID != "c1" || d.Title != "T" || d.Body != "B" || d.Data["k"] != "v" {
		t.Errorf("recorded %+v", d)
	}
	if r.Name != "projects/proj-1/messages/"+d.MessageID {
		t.Errorf("name %q, recorded message id %q", r.Name, d.MessageID)
	}

	// validate_only checks but does not deliver.
	if status, _, body := fcmPost(t, sb, "proj-1", `{"validate_only":true,"message":{"token":"tok-2"}}`); status != 200 {
		t.Fatalf("validate_only: %d %s", status, body)
	}
	if n := len(sb.Recorder.List("fcm", "tok-2")); n != 0 {
		t.Errorf("validate_only recorded %d", n)
	}
}

func TestFCMFakeFailureRules(t *testing.T) {
	t.Parallel()
	sb := startFCMSandbox(t)
	tests := []struct {
		token      string
		status     int
		grpc, code string
		retryAfter string
	}{
		{"x-unregistered-1", 404, "NOT_FOUND", "UNREGISTERED", ""},
		{"x-invalid-1", 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", ""},
		{"x-throttle1", 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "1"},
		{"x-throttle1", 200, "", "", ""},
		{"x-unavailable2", 503, "UNAVAILABLE", "UNAVAILABLE", "0"},
		{"x-unavailable2", 503, "UNAVAILABLE", "UNAVAILABLE", "0"},
		{"x-unavailable2", 200, "", "", ""},
	}
	for i, tt := range tests { // in order: attempts count
		status, h, body := fcmPost(t, sb, "p", `{"message":{"token":"`+tt.token+`"}}`)
		if status != tt.status {
			t.Fatalf("%d %s: status %d, want %d (%s)", i, tt.token, status, tt.status, body)
		}
		if tt.status == 200 {
			continue
		}
		if g, c := fcmErrorCode(t, body); g != tt.grpc || c != tt.code {
			t.Errorf("%d %s: %s/%s, want %s/%s", i, tt.token, g, c, tt.grpc, tt.code)
		}
		if got := h.Get("Retry-After"); got != tt.retryAfter {
			t.Errorf("%d %s: Retry-After %q, want %q", i, tt.token, got, tt.retryAfter)
		}
	}
}

func TestFCMFakeRejectsMalformed(t *testing.T) {
	t.Parallel()
	sb := startFCMSandbox(t)
	for _, body := range []string{
		`not json`,
		`{}`,
		`{"message":{}}`,
		`{"message":{"token":"a","topic":"b"}}`,
		`{"message":{"token":"a","data":{"from":"x"}}}`,
		`{"message":{"token":"a","data":{"n":1}}}`,
		`{"message":{"token":"a","android":{"priority":"urgent"}}}`,
		`{"message":{"token":"a","android":{"ttl":"1h"}}}`,
		`{"message":{"token":"a","apns":{"headers":{"apns-priority":"7"}}}}`,
		`{"message":{"token":"a","apns":{"payload":"x"}}}`,
		`{"message":{"token":"a","webpush":{"fcm_options":{"link":"http://insecure"}}}}`,
	} {
		status, _, b := fcmPost(t, sb, "p", body)
		if status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, status)
			continue
		}
		if g, c := fcmErrorCode(t, b); g != "INVALID_ARGUMENT" || c != "INVALID_ARGUMENT" {
			t.Errorf("%s: %s/%s", body, g, c)
		}
	}
	if n := sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d malformed messages", n)
	}
}

func TestFCMFakeTokenEndpoint(t *testing.T) {
	t.Parallel()
	sb := startFCMSandbox(t)
	resp, err := http.PostForm(sb.URL()+"/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {"x.y.z"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 ||
		tok.AccessToken == "" || tok.TokenType != "Bearer" || tok.ExpiresIn <= 0 {
		t.Fatalf("status %d, token %+v, err %v", resp.StatusCode, tok, err)
	}
}
