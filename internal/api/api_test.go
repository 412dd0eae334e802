package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

const (
	ordersKey  = "hk_orders_0123456789abcdef"
	billingKey = "hk_billing_fedcba9876543210"
)

// fakeClock is a settable notify.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type env struct {
	h     http.Handler
	store *sqlite.Store
	queue *sqlite.Queue
	clock *fakeClock
	logs  *syncBuffer
}

// setup builds the handler on a real SQLite store and queue in a fresh directory. mutate, when
// given, adjusts the options before the handler is built.
func setup(t *testing.T, mutate ...func(*Options)) *env {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	box, err := seal.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatalf("seal: %v", err)
	}
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	var cfgs []notify.QueueConfig
	for _, svc := range []string{"orders", "billing"} {
		q := notify.IngestQueue(svc)
		cfgs = append(cfgs, notify.QueueConfig{Name: q, VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 5, DLQ: notify.DLQName(q)})
	}
	queue, err := sqlite.NewQueue(db, cfgs, notify.SystemClock{})
	if err != nil {
		t.Fatalf("new queue: %v", err)
	}
	t.Cleanup(queue.Close)
	e := &env{
		store: store,
		queue: queue,
		clock: &fakeClock{t: time.Now().UTC().Truncate(time.Millisecond)},
		logs:  &syncBuffer{},
	}
	o := Options{
		Store:  store,
		Queue:  queue,
		Clock:  e.clock,
		Keys:   map[string]string{ordersKey: "orders", billingKey: "billing"},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mutate {
		m(&o)
	}
	e.h = New(o)
	return e
}

// do sends a request with the orders key (key "" sends none). body is sent as is when it is a
// string and JSON-encoded otherwise.
func (e *env) do(t *testing.T, method, path, key string, body any) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("marshal body: %v", err)
		}
		rd = bytes.NewReader(j)
	}
	req := httptest.NewRequest(method, path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// decodeBody decodes a JSON response into a value of type T.
func decodeBody[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json (body %s)", ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode response %q: %v", rec.Body, err)
	}
	return v
}

func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
}

// wantError checks status and the JSON error's code and field.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code, field string) errorDetail {
	t.Helper()
	wantStatus(t, rec, status)
	got := decodeBody[errorBody](t, rec).Error
	if got.Code != code || got.Field != field {
		t.Fatalf("error = {code %q, field %q, message %q}, want code %q field %q", got.Code, got.Field, got.Message, code, field)
	}
	if got.Message == "" {
		t.Fatalf("error has no message")
	}
	return got
}

func pushRequest() map[string]any {
	return map[string]any{
		"channels":   []string{"push", "inbox"},
		"content":    map[string]any{"title": "Shipped", "body": "Your order shipped"},
		"recipients": []map[string]any{{"user_id": "u1"}},
	}
}

// receiveAll drains queue without waiting.
func (e *env) receiveAll(t *testing.T, queue string) []notify.Message {
	t.Helper()
	var out []notify.Message
	for {
		ms, err := e.queue.Receive(context.Background(), queue, 10, time.Minute, 0)
		if err != nil {
			t.Fatalf("receive %s: %v", queue, err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
	}
}

func TestHealthAndOpenAPIArePublic(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := e.do(t, "GET", "/healthz", "", nil)
	wantStatus(t, rec, 200)
	if got := decodeBody[map[string]string](t, rec); got["status"] != "ok" {
		t.Fatalf("healthz = %v", got)
	}
	rec = e.do(t, "GET", "/openapi.json", "", nil)
	wantStatus(t, rec, 200)
	if doc := decodeBody[map[string]any](t, rec); doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	e := setup(t)
	headers := map[string]string{
		"missing":      "",
		"unknown key":  "Bearer not-a-key",
		"wrong scheme": "Basic " + ordersKey,
		"empty bearer": "Bearer ",
	}
	for _, rt := range routes {
		if rt.Public {
			continue
		}
		path := strings.NewReplacer("{user}", "u1", "{token}", "tok", "{id}", "n_1").Replace(rt.Path)
		for name, h := range headers {
			req := httptest.NewRequest(rt.Method, path, strings.NewReader(`{}`))
			if h != "" {
				req.Header.Set("Authorization", h)
			}
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			if rec.Code != 401 {
				t.Errorf("%s %s with %s: status %d, want 401", rt.Method, path, name, rec.Code)
				continue
			}
			if got := decodeBody[errorBody](t, rec).Error; got.Code != notify.EUNAUTHORIZED {
				t.Errorf("%s %s with %s: code %q", rt.Method, path, name, got.Code)
			}
			if rec.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s: no WWW-Authenticate", rt.Method, path, name)
			}
		}
	}
	// The scheme is case-insensitive (RFC 7235).
	req := httptest.NewRequest("GET", "/v1/users/u1/inbox/unread-count", nil)
	req.Header.Set("Authorization", "bearer "+ordersKey)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	wantStatus(t, rec, 200)
}

func TestSendNotificationEnqueuesOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req := pushRequest()
	rec := e.do(t, "POST", "/v1/notifications", ordersKey, req)
	wantStatus(t, rec, http.StatusAccepted)
	got := decodeBody[acceptedResponse](t, rec)
	if !strings.HasPrefix(got.ID, "n_") || got.Status != notify.StatusAccepted {
		t.Fatalf("response = %+v", got)
	}
	if loc := rec.Header().Get("Location"); loc != "/v1/notifications/"+got.ID {
		t.Fatalf("Location = %q", loc)
	}
	msgs := e.receiveAll(t, notify.IngestQueue("orders"))
	if len(msgs) != 1 {
		t.Fatalf("ingest-orders has %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Attributes[notify.AttrNotificationID] != got.ID || m.GroupID != "orders" {
		t.Fatalf("message attributes %v group %q, want id %s group orders", m.Attributes, m.GroupID, got.ID)
	}
	var sent notify.SendRequest
	if err := json.Unmarshal(m.Body, &sent); err != nil {
		t.Fatalf("message body: %v", err)
	}
	if sent.Recipients[0].UserID != "u1" || sent.Content.Body != "Your order shipped" || len(sent.Channels) != 2 {
		t.Fatalf("message body = %+v", sent)
	}
	if other := e.receiveAll(t, notify.IngestQueue("billing")); len(other) != 0 {
		t.Fatalf("ingest-billing has %d messages, want 0", len(other))
	}
}

func TestSendScheduled(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req := pushRequest()
	req["send_at"] = e.clock.Now().Add(2 * time.Hour).Format(time.RFC3339)
	rec := e.do(t, "POST", "/v1/notifications", ordersKey, req)
	wantStatus(t, rec, http.StatusAccepted)
	if got := decodeBody[acceptedResponse](t, rec); got.Status != notify.StatusScheduled {
		t.Fatalf("status = %s, want SCHEDULED", got.Status)
	}
}

func TestSendIdempotent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	req := pushRequest()
	req["idempotency_key"] = "order-42-shipped"

	first := decodeBody[acceptedResponse](t, e.do(t, "POST", "/v1/notifications", ordersKey, req))
	// Before ingest stored it, a retry gets the same id in a 200 (the key's claim is the first
	// request's) and is queued again, in case the first one's enqueue failed after its claim;
	// ingest dedupes the second message.
	rec := e.do(t, "POST", "/v1/notifications", ordersKey, req)
	wantStatus(t, rec, http.StatusOK)
	if second := decodeBody[acceptedResponse](t, rec); second.ID != first.ID {
		t.Fatalf("retry id %s, want %s", second.ID, first.ID)
	}
	if n := len(e.receiveAll(t, notify.IngestQueue("orders"))); n != 2 {
		t.Fatalf("enqueued %d before the notification was stored, want 2", n)
	}

	// Once stored, a retry answers 200 with the current status and enqueues nothing.
	var sr notify.SendRequest
	b, _ := json.Marshal(req)
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.CreateNotification(ctx, sr.Notification(first.ID, "orders", e.clock.Now())); err != nil {
		t.Fatalf("create notification: %v", err)
	}
	if err := e.store.SetNotificationStatus(ctx, first.ID, notify.StatusProcessing); err != nil {
		t.Fatalf("set status: %v", err)
	}
	rec = e.do(t, "POST", "/v1/notifications", ordersKey, req)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeBody[acceptedResponse](t, rec); got.ID != first.ID || got.Status != notify.StatusProcessing {
		t.Fatalf("stored retry = %+v, want id %s PROCESSING", got, first.ID)
	}
	if n := len(e.receiveAll(t, notify.IngestQueue("orders"))); n != 0 {
		t.Fatalf("enqueued %d after the notification was stored, want 0", n)
	}

	// The same key from another service is another notification.
	other := decodeBody[acceptedResponse](t, e.do(t, "POST", "/v1/notifications", billingKey, req))
	if other.ID == first.ID {
		t.Fatalf("billing got orders' id for the same key")
	}
}

func TestSendInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	with := func(f func(m map[string]any)) map[string]any {
		m := pushRequest()
		f(m)
		return m
	}
	manyRecipients := make([]map[string]any, notify.MaxRecipients+1)
	for i := range manyRecipients {
		manyRecipients[i] = map[string]any{"user_id": fmt.Sprint(i)}
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		field  string
		msg    string // substring of the message
	}{
		{"malformed JSON", `{"channels": ["push"] "content": {}}`, 400, notify.EINVALID, "", "offset 23"},
		{"truncated JSON", `{"channels": ["push"]`, 400, notify.EINVALID, "", "ends"},
		{"empty body", ``, 400, notify.EINVALID, "", "empty"},
		{"not an object", `[1]`, 400, notify.EINVALID, "", "object"},
		{"trailing data", `{"channels":["push"]} {}`, 400, notify.EINVALID, "", "after"},
		{"unknown field", with(func(m map[string]any) { m["colour"] = "red" }), 400, notify.EINVALID, "colour", "unknown field"},
		{"unknown nested field", with(func(m map[string]any) { m["content"] = map[string]any{"body": "x", "subtitle": "y"} }), 400, notify.EINVALID, "content.subtitle", "unknown field"},
		{"wrong type", with(func(m map[string]any) { m["ttl_seconds"] = "1h" }), 400, notify.EINVALID, "ttl_seconds", "integer"},
		{"wrong nested type", with(func(m map[string]any) { m["recipients"] = []any{map[string]any{"user_id": 5}} }), 400, notify.EINVALID, "recipients[0].user_id", "string"},
		{"bad send_at", with(func(m map[string]any) { m["send_at"] = "tomorrow" }), 400, notify.EINVALID, "send_at", "RFC 3339"},
		{"unknown channel", with(func(m map[string]any) { m["channels"] = []string{"fax"} }), 400, notify.EINVALID, "channels[0]", "fax"},
		{"missing recipients", with(func(m map[string]any) { delete(m, "recipients") }), 400, notify.EINVALID, "recipients", "recipient"},
		{"bad email", with(func(m map[string]any) {
			m["channels"] = []string{"email"}
			m["recipients"] = []map[string]any{{"email": "not-an-email"}}
		}), 400, notify.EINVALID, "recipients[0].email", "email"},
		{"too many recipients", with(func(m map[string]any) { m["recipients"] = manyRecipients }), 413, notify.ETOOLARGE, "recipients", "at most"},
		{"oversize body", with(func(m map[string]any) {
			m["content"] = map[string]any{"body": "x", "html": strings.Repeat("<p>hi</p>", 120000)}
		}), 413, notify.ETOOLARGE, "", "larger than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := e.do(t, "POST", "/v1/notifications", ordersKey, c.body)
			got := wantError(t, rec, c.status, c.code, c.field)
			if !strings.Contains(got.Message, c.msg) {
				t.Fatalf("message %q does not mention %q", got.Message, c.msg)
			}
		})
	}
	if n := len(e.receiveAll(t, notify.IngestQueue("orders"))); n != 0 {
		t.Fatalf("invalid requests enqueued %d messages", n)
	}
}

// TestBodyLimitOverHTTP checks MaxBodyBytes through a real server, on a route other than send.
func TestBodyLimitOverHTTP(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) { o.MaxBodyBytes = 100 })
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	put := func(body string) *http.Response {
		req, err := http.NewRequest("PUT", srv.URL+"/v1/users/u1/contacts", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+ordersKey)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := put(`{"email": "a@example.com"}`); resp.StatusCode != 200 {
		t.Fatalf("small body: status %d", resp.StatusCode)
	}
	resp := put(`{"email": "a@example.com", "locale": "` + strings.Repeat("a", 200) + `"}`)
	var got errorBody
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 || got.Error.Code != notify.ETOOLARGE || !strings.Contains(got.Error.Message, "100 bytes") {
		t.Fatalf("big body: status %d, error %+v", resp.StatusCode, got.Error)
	}
}

// seedNotification stores a notification of orders with three deliveries: a pending push, a
// sent email and a skipped email.
func seedNotification(t *testing.T, e *env, id string) (*notify.Notification, []notify.Delivery, string, string) {
	t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	sr := notify.SendRequest{
		Channels:   []notify.Channel{notify.ChannelPush, notify.ChannelEmail},
		Content:    notify.Content{Title: "Hi", Body: "Hello"},
		Recipients: []notify.Recipient{{UserID: "u1"}, {UserID: "u2"}},
	}
	n := sr.Notification(id, "orders", now)
	if _, _, err := e.store.CreateNotification(ctx, n); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := e.store.SetChunksTotal(ctx, n.ID, 1); err != nil {
		t.Fatalf("chunks: %v", err)
	}
	token := "fcm:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
	email := "jane.doe@example.com"
	ds := []notify.Delivery{
		{ID: notify.DeliveryID(n.ID, notify.ChannelPush, token), UserID: "u1", Channel: notify.ChannelPush, Provider: notify.ProviderFCM,
			App: "default", Address: token, AddressMasked: notify.MaskToken(token), Status: notify.DeliveryPending},
		{ID: notify.DeliveryID(n.ID, notify.ChannelEmail, email), UserID: "u1", Channel: notify.ChannelEmail, Provider: notify.ProviderSES,
			Address: email, AddressMasked: notify.MaskEmail(email), Status: notify.DeliveryPending},
		{ID: notify.DeliveryID(n.ID, notify.ChannelEmail, "u2"), UserID: "u2", Channel: notify.ChannelEmail, Provider: notify.ProviderSES,
			Status: notify.DeliverySkipped, Reason: notify.ReasonNoAddress},
	}
	if _, err := e.store.CreateDeliveries(ctx, n.ID, 0, ds); err != nil {
		t.Fatalf("create deliveries: %v", err)
	}
	claimed, _, err := e.store.ClaimDeliveries(ctx, n.ID, []string{ds[1].ID}, now, now.Add(time.Minute))
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := e.store.CompleteDeliveries(ctx, n.ID, []notify.DeliveryUpdate{{ID: ds[1].ID, Status: notify.DeliverySent, ProviderMessageID: "ses-1", At: now}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	return n, ds, token, email
}

// seedInbox stores count transactional items n_00… for user, one minute apart, n_00 oldest.
func seedInbox(t *testing.T, e *env, user string, count int) {
	t.Helper()
	now := e.clock.Now()
	var items []notify.InboxItem
	for i := range count {
		items = append(items, notify.InboxItem{UserID: user, ID: fmt.Sprintf("n_%02d", i), Service: "orders",
			Category: notify.CategoryTransactional, Title: fmt.Sprint("title ", i), Data: map[string]string{"order": fmt.Sprint(i)},
			CreatedAt: now.Add(time.Duration(i-count-5) * time.Minute)})
	}
	if err := e.store.PutInboxItems(context.Background(), items); err != nil {
		t.Fatalf("put inbox items: %v", err)
	}
}

func TestGetNotification(t *testing.T) {
	t.Parallel()
	e := setup(t)
	now := e.clock.Now()
	n, ds, token, email := seedNotification(t, e, "n_get1")

	rec := e.do(t, "GET", "/v1/notifications/"+n.ID, ordersKey, nil)
	wantStatus(t, rec, 200)
	v := decodeBody[notificationView](t, rec)
	if v.ID != n.ID || v.Service != "orders" || v.Status != notify.StatusAccepted || v.Category != notify.CategoryTransactional ||
		len(v.Channels) != 2 || v.SendAt != nil || !v.CreatedAt.Equal(now) {
		t.Fatalf("notification = %+v", v)
	}
	wantStats := map[notify.Channel]channelStats{
		notify.ChannelPush:  {Total: 1, Pending: 1},
		notify.ChannelEmail: {Total: 2, Sent: 1, Skipped: 1},
	}
	if !reflect.DeepEqual(v.Stats, wantStats) {
		t.Fatalf("stats = %+v, want %+v", v.Stats, wantStats)
	}
	if len(v.Deliveries) != 3 || v.NextCursor != "" {
		t.Fatalf("deliveries = %d next %q", len(v.Deliveries), v.NextCursor)
	}
	raw := rec.Body.String()
	if strings.Contains(raw, token) || strings.Contains(raw, email) {
		t.Fatalf("response contains a raw address: %s", raw)
	}
	byID := map[string]deliveryView{}
	for _, d := range v.Deliveries {
		byID[d.ID] = d
	}
	if d := byID[ds[1].ID]; d.Status != notify.DeliverySent || d.Address != "j***@example.com" || d.ProviderMessageID != "ses-1" || d.Attempts != 1 {
		t.Fatalf("email delivery = %+v", d)
	}
	if d := byID[ds[2].ID]; d.Status != notify.DeliverySkipped || d.Reason != notify.ReasonNoAddress {
		t.Fatalf("skipped delivery = %+v", d)
	}

	// Paging through the deliveries two at a time visits each once.
	seen := map[string]bool{}
	cursor := ""
	for range 3 {
		rec := e.do(t, "GET", "/v1/notifications/"+n.ID+"?limit=2&cursor="+url.QueryEscape(cursor), ordersKey, nil)
		wantStatus(t, rec, 200)
		page := decodeBody[notificationView](t, rec)
		for _, d := range page.Deliveries {
			seen[d.ID] = true
		}
		cursor = page.NextCursor
		if cursor == "" {
			break
		}
	}
	if len(seen) != 3 || cursor != "" {
		t.Fatalf("paging saw %d deliveries, last cursor %q", len(seen), cursor)
	}

	// Another service's notification looks missing; an unknown one may still be queued.
	wantError(t, e.do(t, "GET", "/v1/notifications/"+n.ID, billingKey, nil), 404, notify.ENOTFOUND, "")
	got := wantError(t, e.do(t, "GET", "/v1/notifications/n_unknown", ordersKey, nil), 404, notify.ENOTFOUND, "")
	if !strings.Contains(got.Message, "queued") {
		t.Fatalf("404 message %q does not say it may still be queued", got.Message)
	}
	wantError(t, e.do(t, "GET", "/v1/notifications/"+n.ID+"?limit=0", ordersKey, nil), 400, notify.EINVALID, "limit")
	wantError(t, e.do(t, "GET", "/v1/notifications/"+n.ID+"?limit=1001", ordersKey, nil), 400, notify.EINVALID, "limit")
	wantError(t, e.do(t, "GET", "/v1/notifications/"+n.ID+"?cursor=%21%21", ordersKey, nil), 400, notify.EINVALID, "cursor")
}

func TestDevices(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	token := "dXs7Yq:APA91bF-very_long_registration_token_0123456789"
	path := "/v1/users/u1/devices/" + url.PathEscape(token)

	rec := e.do(t, "PUT", path, ordersKey, map[string]any{"platform": "fcm", "locale": "ko", "time_zone": "Asia/Seoul"})
	wantStatus(t, rec, 200)
	d := decodeBody[notify.Device](t, rec)
	want := notify.Device{UserID: "u1", Platform: notify.PlatformFCM, App: "default", Token: notify.MaskToken(token),
		Environment: "production", Locale: "ko", TimeZone: "Asia/Seoul", UpdatedAt: e.clock.Now()}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("device = %+v, want %+v", d, want)
	}
	if strings.Contains(rec.Body.String(), token) {
		t.Fatalf("response contains the raw token")
	}
	stored, err := e.store.ListDevices(ctx, []string{"u1"})
	if err != nil || len(stored["u1"]) != 1 || stored["u1"][0].Token != token {
		t.Fatalf("stored devices = %+v, %v", stored, err)
	}

	for _, c := range []struct {
		name, field string
		body        any
	}{
		{"missing platform", "platform", map[string]any{"app": "x"}},
		{"wrong platform", "platform", map[string]any{"platform": "webos"}},
		{"wrong environment", "environment", map[string]any{"platform": "apns", "environment": "staging"}},
		{"bad time zone", "time_zone", map[string]any{"platform": "apns", "time_zone": "Mars/Olympus"}},
		{"Local time zone", "time_zone", map[string]any{"platform": "apns", "time_zone": "Local"}},
		{"bad locale", "locale", map[string]any{"platform": "apns", "locale": "Korean!"}},
		{"unknown field", "colour", map[string]any{"platform": "apns", "colour": "red"}},
	} {
		wantError(t, e.do(t, "PUT", path, ordersKey, c.body), 400, notify.EINVALID, c.field)
	}

	wantError(t, e.do(t, "DELETE", "/v1/users/u2/devices/"+url.PathEscape(token), ordersKey, nil), 404, notify.ENOTFOUND, "")
	wantStatus(t, e.do(t, "DELETE", path, ordersKey, nil), 204)
	wantError(t, e.do(t, "DELETE", path, ordersKey, nil), 404, notify.ENOTFOUND, "")
}

func TestContacts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	email, phone := "jane.doe@example.com", "+821012345678"
	rec := e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, map[string]any{"email": email, "phone": phone, "time_zone": "Asia/Seoul"})
	wantStatus(t, rec, 200)
	c := decodeBody[notify.Contact](t, rec)
	if c.UserID != "u1" || c.Email != "j***@example.com" || c.Phone != notify.MaskPhone(phone) || c.TimeZone != "Asia/Seoul" {
		t.Fatalf("contact = %+v", c)
	}
	if body := rec.Body.String(); strings.Contains(body, email) || strings.Contains(body, phone) {
		t.Fatalf("response contains a raw address: %s", body)
	}
	stored, err := e.store.GetContacts(context.Background(), []string{"u1"})
	if err != nil || stored["u1"].Email != email || stored["u1"].Phone != phone {
		t.Fatalf("stored contact = %+v, %v", stored, err)
	}

	for _, c := range []struct {
		name, field string
		body        any
	}{
		{"neither", "email", map[string]any{"locale": "ko"}},
		{"bad email", "email", map[string]any{"email": "jane at example"}},
		{"bad phone", "phone", map[string]any{"phone": "010-1234-5678"}},
		{"bad time zone", "time_zone", map[string]any{"phone": phone, "time_zone": "KST"}},
	} {
		wantError(t, e.do(t, "PUT", "/v1/users/u1/contacts", ordersKey, c.body), 400, notify.EINVALID, c.field)
	}
}

func TestPreferences(t *testing.T) {
	t.Parallel()
	e := setup(t)
	path := "/v1/users/u1/preferences"

	rec := e.do(t, "GET", path, ordersKey, nil)
	wantStatus(t, rec, 200)
	if p := decodeBody[preferencesView](t, rec); p.MarketingConsent || p.UpdatedAt != nil || len(p.OptOut) != 0 {
		t.Fatalf("default preferences = %+v", p)
	}

	t0 := e.clock.Now()
	rec = e.do(t, "PUT", path, ordersKey, map[string]any{
		"opt_out":           map[string][]string{"sms": {"marketing", "marketing"}, "*": {"*"}},
		"marketing_consent": true,
		"night_consent":     true,
	})
	wantStatus(t, rec, 200)
	p := decodeBody[preferencesView](t, rec)
	if !p.MarketingConsent || p.MarketingConsentAt == nil || !p.MarketingConsentAt.Equal(t0) || p.NightConsentAt == nil || !p.NightConsentAt.Equal(t0) {
		t.Fatalf("after consent: %+v", p)
	}
	wantOptOut := map[notify.Channel][]notify.Category{"sms": {"marketing"}, "*": {"*"}}
	if !reflect.DeepEqual(p.OptOut, wantOptOut) {
		t.Fatalf("opt_out = %v, want %v", p.OptOut, wantOptOut)
	}

	// Consent already given keeps its date; withdrawn consent is cleared.
	e.clock.Advance(24 * time.Hour)
	wantStatus(t, e.do(t, "PUT", path, ordersKey, map[string]any{"marketing_consent": true, "night_consent": false}), 200)
	p = decodeBody[preferencesView](t, e.do(t, "GET", path, ordersKey, nil))
	if p.MarketingConsentAt == nil || !p.MarketingConsentAt.Equal(t0) || p.NightConsent || p.NightConsentAt != nil || len(p.OptOut) != 0 {
		t.Fatalf("after second PUT: %+v", p)
	}
	if p.UpdatedAt == nil || !p.UpdatedAt.Equal(e.clock.Now()) {
		t.Fatalf("updated_at = %v, want %v", p.UpdatedAt, e.clock.Now())
	}
	stored, err := e.store.GetPreferences(context.Background(), []string{"u1"})
	if err != nil || stored["u1"].MarketingConsent == nil || !stored["u1"].MarketingConsent.Equal(t0) || stored["u1"].NightConsent != nil {
		t.Fatalf("stored = %+v, %v", stored, err)
	}

	// Consent given again after a withdrawal is dated anew.
	e.clock.Advance(time.Hour)
	p = decodeBody[preferencesView](t, e.do(t, "PUT", path, ordersKey, map[string]any{"marketing_consent": true, "night_consent": true}))
	if !p.NightConsentAt.Equal(e.clock.Now()) || !p.MarketingConsentAt.Equal(t0) {
		t.Fatalf("after re-consent: %+v", p)
	}

	wantError(t, e.do(t, "PUT", path, ordersKey, map[string]any{"opt_out": map[string][]string{"fax": {"marketing"}}}), 400, notify.EINVALID, "opt_out.fax")
	wantError(t, e.do(t, "PUT", path, ordersKey, map[string]any{"opt_out": map[string][]string{"push": {"marketing", "promo"}}}), 400, notify.EINVALID, "opt_out.push[1]")
	wantError(t, e.do(t, "PUT", path, ordersKey, `{"marketing_consent": "yes"}`), 400, notify.EINVALID, "marketing_consent")
}

func TestInbox(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	now := e.clock.Now()
	seedInbox(t, e, "u1", 25)
	expired := now.Add(-time.Second)
	items := []notify.InboxItem{
		{UserID: "u1", ID: "n_expired", Service: "orders", Category: notify.CategoryMarketing, CreatedAt: now.Add(-time.Minute), ExpiresAt: &expired},
		{UserID: "u2", ID: "n_other", Service: "orders", Category: notify.CategoryTransactional, CreatedAt: now},
	}
	if err := e.store.PutInboxItems(ctx, items); err != nil {
		t.Fatalf("put inbox items: %v", err)
	}

	// Newest first, 20 by default, then the rest.
	first := decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox", ordersKey, nil))
	if len(first.Items) != 20 || first.Items[0].ID != "n_24" || first.Items[19].ID != "n_05" || first.NextCursor == "" {
		t.Fatalf("first page: %d items from %s, next %q", len(first.Items), first.Items[0].ID, first.NextCursor)
	}
	second := decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox?limit=100&cursor="+url.QueryEscape(first.NextCursor), ordersKey, nil))
	if len(second.Items) != 5 || second.Items[0].ID != "n_04" || second.Items[4].ID != "n_00" || second.NextCursor != "" {
		t.Fatalf("second page: %+v", second)
	}
	wantError(t, e.do(t, "GET", "/v1/users/u1/inbox?limit=101", ordersKey, nil), 400, notify.EINVALID, "limit")
	wantError(t, e.do(t, "GET", "/v1/users/u1/inbox?limit=ten", ordersKey, nil), 400, notify.EINVALID, "limit")

	unread := func(user string) int {
		t.Helper()
		rec := e.do(t, "GET", "/v1/users/"+user+"/inbox/unread-count", ordersKey, nil)
		wantStatus(t, rec, 200)
		return decodeBody[map[string]int](t, rec)["unread"]
	}
	if n := unread("u1"); n != 25 {
		t.Fatalf("unread = %d, want 25", n)
	}
	wantStatus(t, e.do(t, "POST", "/v1/users/u1/inbox/n_03/read", ordersKey, nil), 204)
	wantStatus(t, e.do(t, "POST", "/v1/users/u1/inbox/n_03/read", ordersKey, nil), 204) // idempotent
	wantError(t, e.do(t, "POST", "/v1/users/u1/inbox/n_other/read", ordersKey, nil), 404, notify.ENOTFOUND, "")
	if n := unread("u1"); n != 24 {
		t.Fatalf("unread after one read = %d, want 24", n)
	}
	page := decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox?limit=25", ordersKey, nil))
	for _, it := range page.Items {
		if (it.ReadAt != nil) != (it.ID == "n_03") {
			t.Fatalf("item %s read_at %v", it.ID, it.ReadAt)
		}
	}

	rec := e.do(t, "POST", "/v1/users/u1/inbox/read-all", ordersKey, nil)
	wantStatus(t, rec, 200)
	if n := decodeBody[map[string]int](t, rec)["updated"]; n != 24 {
		t.Fatalf("read-all updated %d, want 24", n)
	}
	if n := unread("u1"); n != 0 {
		t.Fatalf("unread after read-all = %d", n)
	}
	if n := unread("u2"); n != 1 {
		t.Fatalf("u2 unread = %d, want 1 (untouched)", n)
	}

	wantStatus(t, e.do(t, "DELETE", "/v1/users/u1/inbox/n_24", ordersKey, nil), 204)
	wantError(t, e.do(t, "DELETE", "/v1/users/u1/inbox/n_24", ordersKey, nil), 404, notify.ENOTFOUND, "")
	page = decodeBody[inboxPage](t, e.do(t, "GET", "/v1/users/u1/inbox?limit=1", ordersKey, nil))
	if len(page.Items) != 1 || page.Items[0].ID != "n_23" {
		t.Fatalf("after delete the newest is %+v", page.Items)
	}

	empty := e.do(t, "GET", "/v1/users/nobody/inbox", ordersKey, nil)
	wantStatus(t, empty, 200)
	if !strings.Contains(empty.Body.String(), `"items":[]`) {
		t.Fatalf("empty inbox = %s, want items []", empty.Body)
	}
}

func TestBadPathParameters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	long := strings.Repeat("u", 129)
	for _, c := range []struct {
		method, path, field string
		body                any
	}{
		{"GET", "/v1/users/" + long + "/inbox", "user", nil},
		{"GET", "/v1/users/a%20b/inbox/unread-count", "user", nil},
		{"PUT", "/v1/users/a%09b/preferences", "user", map[string]any{}},
		{"PUT", "/v1/users/%C3%A9/contacts", "user", map[string]any{"email": "a@example.com"}},
		{"PUT", "/v1/users/" + long + "/devices/tok", "user", map[string]any{"platform": "fcm"}},
		{"DELETE", "/v1/users/a%20b/devices/tok", "user", nil},
		{"POST", "/v1/users/a%20b/inbox/read-all", "user", nil},
		{"POST", "/v1/users/u1/inbox/a%20b/read", "id", nil},
		{"PUT", "/v1/users/u1/devices/a%20b", "token", map[string]any{"platform": "fcm"}},
		{"GET", "/v1/notifications/" + long, "id", nil},
	} {
		rec := e.do(t, c.method, c.path, ordersKey, c.body)
		wantError(t, rec, 400, notify.EINVALID, c.field)
	}
}

func TestUnknownRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := e.do(t, "PATCH", "/v1/notifications", ordersKey, `{}`)
	wantError(t, rec, 405, "method_not_allowed", "")
	if allow := rec.Header().Get("Allow"); allow != "POST" {
		t.Fatalf("Allow = %q, want POST", allow)
	}
	rec = e.do(t, "POST", "/v1/users/u1/preferences", ordersKey, `{}`)
	wantError(t, rec, 405, "method_not_allowed", "")
	if allow := rec.Header().Get("Allow"); allow != "GET, HEAD, PUT" {
		t.Fatalf("Allow = %q", allow)
	}
	wantError(t, e.do(t, "GET", "/v2/things", ordersKey, nil), 404, notify.ENOTFOUND, "")
	if !strings.Contains(e.logs.String(), `"status":405`) {
		t.Fatalf("405 not in the access log:\n%s", e.logs)
	}
}

func TestExtraHandlers(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) {
		o.Extra = map[string]http.Handler{"GET /sandbox/deliveries": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `[]`)
		})}
	})
	rec := e.do(t, "GET", "/sandbox/deliveries", "", nil)
	wantStatus(t, rec, 200)
	if rec.Body.String() != "[]" {
		t.Fatalf("body = %q", rec.Body)
	}
	if !strings.Contains(e.logs.String(), `"route":"GET /sandbox/deliveries"`) {
		t.Fatalf("extra route not in the access log:\n%s", e.logs)
	}
}

// failingStore fails or panics in chosen methods.
type failingStore struct {
	notify.Store
}

func (failingStore) UnreadCount(context.Context, string, time.Time) (int, error) {
	return 0, errors.New("database is locked: /var/lib/herald/secret-path.db")
}

func (failingStore) GetPreferences(context.Context, []string) (map[string]notify.Preferences, error) {
	panic("boom in the store")
}

func TestInternalErrorsAndPanics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.h = New(Options{Store: failingStore{e.store}, Queue: e.queue, Clock: e.clock, Keys: map[string]string{ordersKey: "orders"},
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})

	got := wantError(t, e.do(t, "GET", "/v1/users/u1/inbox/unread-count", ordersKey, nil), 500, notify.EINTERNAL, "")
	if strings.Contains(got.Message, "locked") {
		t.Fatalf("500 message leaks the detail: %q", got.Message)
	}
	if !strings.Contains(e.logs.String(), "database is locked") {
		t.Fatalf("the detail is not logged:\n%s", e.logs)
	}

	wantError(t, e.do(t, "GET", "/v1/users/u1/preferences", ordersKey, nil), 500, notify.EINTERNAL, "")
	logs := e.logs.String()
	if !strings.Contains(logs, "boom in the store") || !strings.Contains(logs, `"route":"GET /v1/users/{user}/preferences"`) {
		t.Fatalf("panic not logged with its route:\n%s", logs)
	}
	// The handler keeps serving.
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), 200)
}

// TestLogFailuresOnly: behind API Gateway (whose access log has every request) the handler logs
// only what failed.
func TestLogFailuresOnly(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *Options) { o.LogFailuresOnly = true })
	wantStatus(t, e.do(t, "GET", "/healthz", "", nil), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "fcm"}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/u1/devices/tok-1", ordersKey, map[string]any{"platform": "nokia"}), 400)
	wantStatus(t, e.do(t, "GET", "/v1/users/u1/inbox", "wrong-"+ordersKey, nil), 401)
	logs := e.logs.String()
	if n := strings.Count(logs, `"msg":"http request"`); n != 2 || strings.Contains(logs, `"status":200`) {
		t.Fatalf("%d access log lines, want the 400 and the 401 only:\n%s", n, logs)
	}
}

func TestLogsCarryNoSecretsOrAddresses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	token := "f9Kd2LmQ:APA91bSecretTokenValue_0123456789abcdef"
	email := "secret.person@example.org"
	phone := "+821099887766"
	user := "user-4711"

	wantStatus(t, e.do(t, "PUT", "/v1/users/"+user+"/devices/"+url.PathEscape(token), ordersKey, map[string]any{"platform": "fcm"}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/"+user+"/devices/"+url.PathEscape(token), ordersKey, map[string]any{"platform": "nokia"}), 400)
	wantStatus(t, e.do(t, "PUT", "/v1/users/"+user+"/contacts", ordersKey, map[string]any{"email": email, "phone": phone}), 200)
	wantStatus(t, e.do(t, "PUT", "/v1/users/"+user+"/contacts", ordersKey, map[string]any{"email": email, "phone": "x" + phone}), 400)
	wantStatus(t, e.do(t, "POST", "/v1/notifications", ordersKey, map[string]any{
		"channels": []string{"push", "email", "sms"},
		"content":  map[string]any{"title": "Hi", "body": "Hello"},
		"recipients": []map[string]any{
			{"fcm_token": token}, {"email": email}, {"phone": phone}, {"user_id": user},
		},
	}), 202)
	wantStatus(t, e.do(t, "POST", "/v1/notifications", ordersKey, map[string]any{
		"channels":   []string{"email"},
		"content":    map[string]any{"title": "Hi", "body": "Hello"},
		"recipients": []map[string]any{{"email": email}, {"phone": phone}},
	}), 400)
	wantStatus(t, e.do(t, "DELETE", "/v1/users/"+user+"/devices/"+url.PathEscape(token), ordersKey, nil), 204)
	wantStatus(t, e.do(t, "GET", "/v1/users/"+user+"/inbox", "wrong-"+ordersKey, nil), 401)

	logs := e.logs.String()
	if n := strings.Count(logs, `"msg":"http request"`); n != 8 {
		t.Fatalf("%d access log lines, want 8:\n%s", n, logs)
	}
	for _, secret := range []string{token, url.PathEscape(token), email, phone, ordersKey, user} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{
		`"route":"PUT /v1/users/{user}/devices/{token}"`,
		`"route":"POST /v1/notifications"`,
		`"service":"orders"`,
		`"status":202`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
}
