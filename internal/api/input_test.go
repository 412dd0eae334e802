package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// rawResponse sends raw bytes on a new connection to addr and reads one response.
func rawResponse(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", raw[:min(len(raw), 60)], err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// wantJSONError checks a response read off the wire is the API's JSON error shape.
func wantJSONError(t *testing.T, resp *http.Response, body []byte, status int, code string) errorDetail {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %q", ct, body)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("error = %+v, want code %q with a message", e.Error, code)
	}
	return e.Error
}

// TestServerLevelErrorsAreJSON covers what net/http answers before any handler runs: through
// JSONErrors those answers take the API's error shape too.
func TestServerLevelErrorsAreJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(e.h, ServerLimits{})
	go func() { _ = srv.Serve(JSONErrors(ln)) }()
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	resp, body := rawResponse(t, addr, "GET /v1/users/%zz/inbox HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ordersKey+"\r\n\r\n")
	wantJSONError(t, resp, body, 400, notify.EINVALID)

	resp, body = rawResponse(t, addr, "GET /v1/users/../notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ordersKey+"\r\n\r\n")
	wantJSONError(t, resp, body, 400, notify.EINVALID)

	// Dot segments written as escapes are refused like literal ones.
	for _, p := range []string{"/v1/users/%2e%2e/notifications", "/v1/users/u1/%2E/inbox", "/v1/users/u1/inbox/%2e"} {
		resp, body = rawResponse(t, addr, "GET "+p+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ordersKey+"\r\n\r\n")
		if d := wantJSONError(t, resp, body, 400, notify.EINVALID); d.Field != "path" {
			t.Errorf("%s: field %q, want path", p, d.Field)
		}
	}
	// A malformed escape in the query is a 400 naming the parameter, not a filter dropped.
	resp, body = rawResponse(t, addr, "GET /v1/admin/audit?action=%zz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+ordersKey+"\r\n\r\n")
	if d := wantJSONError(t, resp, body, 400, notify.EINVALID); d.Field != "action" {
		t.Errorf("a malformed query escape: field %q, want action", d.Field)
	}

	resp, body = rawResponse(t, addr, "GET /healthz HTTP/1.1\r\n\r\n") // no Host
	if d := wantJSONError(t, resp, body, 400, notify.EINVALID); !strings.Contains(d.Message, "Host") {
		t.Fatalf("message %q does not say what was wrong", d.Message)
	}

	huge := strings.Repeat("a", DefaultMaxHeaderBytes+8192)
	resp, body = rawResponse(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+huge+"\r\n\r\n")
	wantJSONError(t, resp, body, 431, notify.ETOOLARGE)

	// Headers over the handler's limit but under the server's: answered by the handler.
	resp, body = rawResponse(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", MaxHeaderBytes)+"\r\n\r\n")
	wantJSONError(t, resp, body, 431, notify.ETOOLARGE)

	// An ordinary response passes through untouched.
	resp, body = rawResponse(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("healthz = %d %q", resp.StatusCode, body)
	}
}

func TestJSONServerErrorLeavesResponsesAlone(t *testing.T) {
	for _, b := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nfine",
		"HTTP/1.1 400 Bad Request\r\nDate: Mon, 01 Jan 2026 00:00:00 GMT\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nhandler's own",
		`{"body": "HTTP/1.1 400 Bad Request"}`,
	} {
		if _, ok := jsonServerError([]byte(b)); ok {
			t.Errorf("rewrote %q", b)
		}
	}
}

func TestRouterErrorsAreJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		method, target string
		status         int
		code, field    string
	}{
		{"GET", "/v1/users/../notifications", 400, notify.EINVALID, "path"},
		{"POST", "/v1/users/u1/../../notifications", 400, notify.EINVALID, "path"},
		{"GET", "/v1//users/u1/inbox", 400, notify.EINVALID, "path"},
		{"GET", "/v1/users/u1/./inbox", 400, notify.EINVALID, "path"},
		{"GET", "/v1/nothing", 404, notify.ENOTFOUND, ""},
		{"PUT", "/v1/notifications", 405, "method_not_allowed", ""},
	} {
		req := httptest.NewRequest(c.method, "http://herald.test/", nil)
		req.URL = &url.URL{Path: c.target}
		req.RequestURI = c.target
		req.Header.Set("Authorization", "Bearer "+ordersKey)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		wantError(t, rec, c.status, c.code, c.field)
	}
	// A bad escape that reaches the handler (behind a proxy that passes it on) is JSON too.
	req := httptest.NewRequest("GET", "http://herald.test/", nil)
	req.URL = &url.URL{Path: "/v1/users/?/inbox", RawPath: "/v1/users/%zz/inbox"}
	req.Header.Set("Authorization", "Bearer "+ordersKey)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	wantStatus(t, rec, 400)
	decodeBody[errorBody](t, rec)

	req = httptest.NewRequest("GET", "/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("b", MaxHeaderBytes))
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	wantError(t, rec, 431, notify.ETOOLARGE, "")
}

func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		name, body, field, msg string
	}{
		{"invalid UTF-8", "{\"channels\":[\"push\"],\"content\":{\"title\":\"caf\xe9\",\"body\":\"x\"},\"recipients\":[{\"user_id\":\"u1\"}]}", "content.title", "byte offset 44"},
		{"duplicate key", `{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"u1"}],"channels":["sms"]}`, "channels", "twice"},
		{"duplicate nested key", `{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"u1"},{"user_id":"u2","user_id":"u3"}]}`, "recipients[1].user_id", "twice"},
		{"duplicate data key", `{"channels":["push"],"content":{"body":"x","data":{"a":"1","a":"2"}},"recipients":[{"user_id":"u1"}]}`, "content.data.a", "twice"},
		{"send_at a number", `{"send_at": 12345}`, "send_at", "RFC 3339"},
		{"send_at a bad string", `{"channels":["push"],"send_at":"tomorrow"}`, "send_at", "RFC 3339"},
		{"user_id a number", `{"recipients":[{"user_id": 1}]}`, "recipients[0].user_id", "string"},
		{"second recipient wrong", `{"recipients":[{"user_id":"a"},{"user_id":"b"},{"email": false}]}`, "recipients[2].email", "string"},
		{"data value a number", `{"content":{"data":{"k": 5}}}`, "content.data.k", "string"},
		{"unknown nested field", `{"recipients":[{"user_id":"a"},{"userid":"b"}]}`, "recipients[1].userid", "unknown field"},
		{"channels an object", `{"channels":{"push":true}}`, "channels", "array"},
		{"key in another case", `{"channels":["push"],"Channels":["sms"],"content":{"body":"x"},"recipients":[{"user_id":"u1"}]}`, "Channels", "case-sensitive"},
		{"nested key in another case", `{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"u1"},{"User_ID":"u2"}]}`, "recipients[1].User_ID", "case-sensitive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, []byte(c.body)), 400, notify.EINVALID, c.field)
			if !strings.Contains(got.Message, c.msg) {
				t.Fatalf("message %q does not mention %q", got.Message, c.msg)
			}
		})
	}
	// Every route decodes the same way.
	wantError(t, e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, `{"email":"a@example.com","email":"b@example.com"}`), 400, notify.EINVALID, "email")
	wantError(t, e.do(t, "PUT", "/v1/users/u1/preferences", ordersKey, "{\"opt_out\":{\"sms\":[\"\xff\"]}}"), 400, notify.EINVALID, "opt_out.sms[0]")
	wantError(t, e.do(t, "PUT", "/v1/users/u1/preferences", ordersKey, `{"opt_out":{"sms":["*", 3]}}`), 400, notify.EINVALID, "opt_out.sms[1]")
}

func TestDuplicateKeyScan(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":1,"b":{"c":[1,{"d":1,"d":2}]}}`:   "b.c[1].d",
		`[{"a":1},{"a":1,"a":2}]`:               "[1].a",
		`{"a":{},"b":[],"a":1}`:                 "a",
		`{"a":{"x":1},"b":{"x":1}}`:             "",
		`{"a":[[],[{}],{"z":1}],"z":1}`:         "",
		`{"a":1,"b"`:                            "", // a syntax error is decoding's to report
		`{"a":1 "a":2}`:                         "", // so is a missing comma
		`{"a":1,,"a":2}`:                        "",
		`[1,]`:                                  "",
		"{\"a\":1,\"\\u0061\":2}":               "a", // the same key, escaped
		`{"a":"}{\"[","b":["]",{"a":1}],"a":0}`: "a", // braces and quotes inside strings
		" { \"x\" : [ true , null , -1.5e3 ] ,\n\t\"x\" : false } ": "x",
		`{"d":{"k1":1,"k2":2,"k1":3}}`:                              "d.k1",
		`[[{"a":1}],[{"b":1},{"b":2,"c":[{"b":1,"b":2}]}]]`:         "[1][1].c[0].b",
		`{}`: "", `[]`: "", `"a"`: "", `{"a":[]}`: "",
	} {
		got, ok := duplicateKey([]byte(raw))
		if got != want || ok != (want != "") {
			t.Errorf("duplicateKey(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
}

func TestTextIsFreeOfControlCharacters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	send := func(mutate func(m map[string]any)) *httptest.ResponseRecorder {
		m := pushRequest()
		m["channels"] = []string{"push", "email"}
		mutate(m)
		return e.do(t, "POST", "/v1/notifications", ordersKey, m)
	}
	for _, c := range []struct {
		name   string
		mutate func(m map[string]any)
		field  string
	}{
		{"CRLF in title", func(m map[string]any) {
			m["content"] = map[string]any{"title": "Hi\r\nBcc: x@example.com", "body": "b"}
		}, "content.title"},
		{"LF in title", func(m map[string]any) { m["content"] = map[string]any{"title": "Hi\nthere", "body": "b"} }, "content.title"},
		{"NUL in title", func(m map[string]any) { m["content"] = map[string]any{"title": "Hi\x00", "body": "b"} }, "content.title"},
		{"DEL in title", func(m map[string]any) { m["content"] = map[string]any{"title": "Hi\x7f", "body": "b"} }, "content.title"},
		{"C1 in title", func(m map[string]any) { m["content"] = map[string]any{"title": "Hi\u0085", "body": "b"} }, "content.title"},
		{"RLO in channel title", func(m map[string]any) {
			m["channel_content"] = map[string]any{"email": map[string]any{"title": "invoice\u202Efdp.exe"}}
		}, "channel_content.email.title"},
		{"isolate in localized title", func(m map[string]any) {
			m["localized"] = map[string]any{"ko": map[string]any{"title": "\u2067x\u2069", "body": "b"}}
		}, "localized.ko.title"},
		{"CR in body", func(m map[string]any) { m["content"] = map[string]any{"title": "t", "body": "a\rb"} }, "content.body"},
		{"control in data key", func(m map[string]any) {
			m["content"] = map[string]any{"title": "t", "body": "b", "data": map[string]any{"k\x01": "v"}}
		}, "content.data"},
		{"control in data value", func(m map[string]any) {
			m["content"] = map[string]any{"title": "t", "body": "b", "data": map[string]any{"k": "v\x1b[31m"}}
		}, "content.data.k"},
		{"control in collapse_id", func(m map[string]any) { m["collapse_id"] = "c\r\nX: y" }, "collapse_id"},
		{"control in link", func(m map[string]any) {
			m["content"] = map[string]any{"title": "t", "body": "b", "link": "https://example.com/\r\nx"}
		}, "content.link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, send(c.mutate), 400, notify.EINVALID, c.field)
		})
	}
	// Line breaks and tabs in a body are fine.
	rec := send(func(m map[string]any) { m["content"] = map[string]any{"title": "t", "body": "line 1\nline 2\tend"} })
	wantStatus(t, rec, 202)
}

func TestSendAtMustBeReal(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	for _, at := range []string{"0001-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"} {
		m := pushRequest()
		m["send_at"] = at
		wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, m), 400, notify.EINVALID, "send_at")
		c := campaignBody()
		c["send_at"] = at
		wantError(t, e.do(t, "POST", "/v1/campaigns", ordersKey, c), 400, notify.EINVALID, "send_at")
	}
	// A time shortly past still means "now", as before.
	m := pushRequest()
	m["send_at"] = e.clock.Now().Add(-time.Hour).Format(time.RFC3339)
	rec := e.do(t, "POST", "/v1/notifications", ordersKey, m)
	wantStatus(t, rec, 202)
	if got := decodeBody[acceptedResponse](t, rec); got.Status != notify.StatusAccepted {
		t.Fatalf("status = %s, want ACCEPTED", got.Status)
	}
}

func TestEmailLengthLimits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	local65 := strings.Repeat("a", 65) + "@example.com"
	long255 := "a@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 57) + ".com"
	if len(long255) != 255 {
		t.Fatalf("len = %d", len(long255))
	}
	for _, addr := range []string{local65, long255} {
		wantError(t, e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, map[string]any{"email": addr}), 400, notify.EINVALID, "email")
		m := pushRequest()
		m["channels"] = []string{"email"}
		m["recipients"] = []map[string]any{{"email": addr}}
		wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, m), 400, notify.EINVALID, "recipients[0].email")
	}
	ok := strings.Repeat("a", 64) + "@example.com"
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, map[string]any{"email": ok}), 200)
}

func withApps(o *Options) {
	o.Apps = map[notify.Platform][]string{notify.PlatformFCM: {"default", "shop"}, notify.PlatformAPNs: {"default"}}
}

func TestUnknownProviderAppsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns(), withApps)
	wantError(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "fcm", "app": "nope"}), 400, notify.EINVALID, "app")
	wantError(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "apns", "app": "shop"}), 400, notify.EINVALID, "app")
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "fcm", "app": "shop"}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-2", ordersKey, map[string]any{"platform": "apns"}), 200)

	m := pushRequest()
	m["channels"] = []string{"push"}
	m["recipients"] = []map[string]any{{"fcm_token": "t1", "app": "shop"}, {"apns_token": "t2", "app": "shop"}}
	wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, m), 400, notify.EINVALID, "recipients[1].app")
	m["recipients"] = []map[string]any{{"user_id": "u1", "app": "shop"}}
	wantError(t, e.do(t, "POST", "/v1/notifications", ordersKey, m), 400, notify.EINVALID, "recipients[0].app")

	c := campaignBody()
	c["audience"] = map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "shop"}, {"kind": "app_devices", "app": "gone"}}}
	wantError(t, e.do(t, "POST", "/v1/campaigns", ordersKey, c), 400, notify.EINVALID, "audience.sources[1].app")

	// Without configured apps (a handler built without Options.Apps) nothing is checked.
	open := setup(t)
	wantStatus(t, open.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "fcm", "app": "anything"}), 200)
}

func TestCampaignInputLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, withCampaigns())
	with := func(k string, v any) map[string]any {
		b := campaignBody()
		b[k] = v
		return b
	}
	// MaxAudienceSources+1 distinct sources: one per locale.
	var many []map[string]any
	for _, l := range []string{"ko", "en", "ja", "zh", "fr", "de", "es", "it", "pt", "ru", "ar", "hi", "th", "vi", "id", "ms", "tr", "pl", "nl", "sv", "da"}[:notify.MaxAudienceSources+1] {
		many = append(many, map[string]any{"kind": "app_devices", "app": "default", "locale": l})
	}
	for _, c := range []struct {
		name  string
		body  any
		field string
	}{
		{"too many sources", with("audience", map[string]any{"sources": many}), fmt.Sprintf("audience.sources[%d]", notify.MaxAudienceSources)},
		{"duplicate source", with("audience", map[string]any{"sources": []map[string]any{
			{"kind": "app_devices", "app": "default"}, {"kind": "app_devices", "app": "default", "platform": "fcm"}, {"kind": "app_devices", "app": "default"},
		}}), "audience.sources[2]"},
		{"quiet hours start = end", with("quiet_hours", map[string]any{"enabled": true, "start": "09:00", "end": "09:00"}), "quiet_hours.end"},
		{"control in title", with("content", map[string]any{"title": "Sale\r\n", "body": "b"}), "content.title"},
		{"control in body", with("content", map[string]any{"title": "Sale", "body": "b\x00"}), "content.body"},
		{"control in idempotency key", with("idempotency_key", "k\r\n1"), "idempotency_key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := e.do(t, "POST", "/v1/campaigns", ordersKey, c.body)
			wantError(t, rec, 400, notify.EINVALID, c.field)
		})
	}
	wantStatus(t, e.do(t, "POST", "/v1/campaigns", ordersKey, with("audience", map[string]any{"sources": many[:notify.MaxAudienceSources]})), 202)
}

func TestCursorsAreOpaqueAndVerified(t *testing.T) {
	t.Parallel()
	e := setup(t)
	seedInbox(t, e, "u1", 5)
	seedInbox(t, e, "u2", 5)
	page := decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox?limit=2", ordersKey, nil))
	if page.NextCursor == "" {
		t.Fatal("no next_cursor")
	}
	next := decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox?limit=2&cursor="+url.QueryEscape(page.NextCursor), ordersKey, nil))
	if len(next.Items) != 2 || next.Items[0].ID != "n_02" {
		t.Fatalf("second page = %+v", next.Items)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(page.NextCursor)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-1] ^= 1
	for name, c := range map[string]string{
		"garbage":        "garbage",
		"not base64":     "%%%",
		"base64 garbage": base64.RawURLEncoding.EncodeToString([]byte("garbage that decodes")),
		"tampered":       base64.RawURLEncoding.EncodeToString(flipped),
		"truncated":      page.NextCursor[:len(page.NextCursor)-3],
		"empty payload":  base64.RawURLEncoding.EncodeToString(raw[:1+cursorMACLen]),
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.do(t, "GET", "/v1/users/u1/inbox?cursor="+url.QueryEscape(c), ordersKey, nil), 400, notify.EINVALID, "cursor")
		})
	}
	// A cursor of one user's inbox is not one of another's.
	wantError(t, e.do(t, "GET", "/v1/users/u2/inbox?cursor="+url.QueryEscape(page.NextCursor), ordersKey, nil), 400, notify.EINVALID, "cursor")

	// Deliveries page the same way.
	seedNotification(t, e, "n_cur")
	d := decodeBody[notificationView](t, e.do(t, "GET", "/v1/notifications/n_cur?limit=1", ordersKey, nil))
	if d.NextCursor == "" {
		t.Fatal("no deliveries next_cursor")
	}
	wantStatus(t, e.do(t, "GET", "/v1/notifications/n_cur?limit=1&cursor="+url.QueryEscape(d.NextCursor), ordersKey, nil), 200)
	wantError(t, e.do(t, "GET", "/v1/notifications/n_cur?cursor=garbage", ordersKey, nil), 400, notify.EINVALID, "cursor")
	wantError(t, e.do(t, "GET", "/v1/notifications/n_cur?cursor="+url.QueryEscape(page.NextCursor), ordersKey, nil), 400, notify.EINVALID, "cursor")
	// Another instance with the same key reads this one's cursors; one with another key does not.
	same := setup(t)
	same.store, same.h = e.store, New(Options{Store: e.store, Queue: e.queue, Clock: e.clock, Keys: map[string]string{ordersKey: "orders"}})
	wantStatus(t, same.do(t, "GET", "/v1/users/u1/inbox?cursor="+url.QueryEscape(page.NextCursor), ordersKey, nil), 200)
	other := New(Options{Store: e.store, Queue: e.queue, Clock: e.clock, Keys: map[string]string{ordersKey: "orders"}, CursorKey: []byte("another key")})
	req := httptest.NewRequest("GET", "/v1/users/u1/inbox?cursor="+url.QueryEscape(page.NextCursor), nil)
	req.Header.Set("Authorization", "Bearer "+ordersKey)
	rec := httptest.NewRecorder()
	other.ServeHTTP(rec, req)
	wantError(t, rec, 400, notify.EINVALID, "cursor")
}

func TestListDevicesAndGetContacts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	empty := decodeBody[devicesView](t, e.do(t, "GET", "/v1/users/u1/devices", ordersKey, nil))
	if empty.UserID != "u1" || empty.Devices == nil || len(empty.Devices) != 0 {
		t.Fatalf("no devices = %+v", empty)
	}
	wantError(t, e.do(t, "GET", "/v1/users/u1/contacts", ordersKey, nil), 404, notify.ENOTFOUND, "")

	tokA, tokB := "fcm:APA91bFirstTokenOfUserOne_abcdef", "0123456789abcdef0123456789abcdef"
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/"+tokA, ordersKey, map[string]any{"platform": "fcm", "locale": "ko"}), 200)
	e.clock.Advance(time.Second)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/"+tokB, ordersKey, map[string]any{"platform": "apns", "environment": "sandbox"}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u2/devices/other-user-token-123", ordersKey, map[string]any{"platform": "fcm"}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, map[string]any{"email": "jane.doe@example.com", "phone": "+821012345678"}), 200)

	rec := e.do(t, "GET", "/v1/users/u1/devices", ordersKey, nil)
	wantStatus(t, rec, 200)
	wantDocumented(t, "GET", "/v1/users/{user}/devices", rec)
	got := decodeBody[devicesView](t, rec)
	if len(got.Devices) != 2 || got.Devices[0].Token != notify.MaskToken(tokA) || got.Devices[1].Token != notify.MaskToken(tokB) ||
		got.Devices[0].Locale != "ko" || got.Devices[1].Environment != "sandbox" {
		t.Fatalf("devices = %+v", got.Devices)
	}
	rec = e.do(t, "GET", "/v1/users/u1/contacts", ordersKey, nil)
	wantStatus(t, rec, 200)
	wantDocumented(t, "GET", "/v1/users/{user}/contacts", rec)
	c := decodeBody[notify.Contact](t, rec)
	if c.Email != "j***@example.com" || c.Phone != notify.MaskPhone("+821012345678") {
		t.Fatalf("contact = %+v", c)
	}
	for _, raw := range []string{tokA, tokB, "jane.doe", "12345678"} {
		if strings.Contains(rec.Body.String(), raw) {
			t.Fatalf("response shows %q unmasked: %s", raw, rec.Body)
		}
	}
	stored, err := e.store.GetContacts(ctx, []string{"u1"})
	if err != nil || stored["u1"].Email != "jane.doe@example.com" {
		t.Fatalf("stored contact = %+v, %v (reading it must not change it)", stored, err)
	}
}

// TestSlowUploadOutlivesReadTimeout: the read timeout that cuts a trickled JSON body leaves an
// audience list upload, which may be large, the time its size needs.
func TestSlowUploadOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(e.h, ServerLimits{ReadTimeout: time.Second})
	go func() { _ = srv.Serve(JSONErrors(ln)) }()
	t.Cleanup(func() { srv.Close() })
	pr, pw := io.Pipe()
	go func() {
		for i := range 3 {
			time.Sleep(700 * time.Millisecond)
			fmt.Fprintf(pw, "user-%d\n", i)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/audience-lists/slow/members", pr)
	req.ContentLength = int64(len("user-0\nuser-1\nuser-2\n"))
	req.Header.Set("Authorization", "Bearer "+ordersKey)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("upload over 2 s with a 1 s read timeout: %d %s", resp.StatusCode, body)
	}
}

// The case-insensitive-key walk runs only when some key could match a field inexactly.
func TestMayBeInexact(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeOf(notify.SendRequest{})
	for _, c := range []struct {
		keys []string
		want bool
	}{
		{[]string{"idempotency_key", "recipients", "user_id", "title", "body"}, false},
		{[]string{"order_id", "coupon"}, false}, // data keys that are no field's
		{[]string{"recipients", "Title"}, true},
		{[]string{"USER_ID"}, true},
		{[]string{"tıtle"}, true}, // non-ASCII: always walked
	} {
		keys := map[string]struct{}{}
		for _, k := range c.keys {
			keys[k] = struct{}{}
		}
		if got := mayBeInexact(keys, typ); got != c.want {
			t.Errorf("mayBeInexact(%v) = %v, want %v", c.keys, got, c.want)
		}
	}
}
