package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// lastMessage is a notify.Producer that keeps the last message sent.
type lastMessage struct {
	mu  sync.Mutex
	msg *notify.OutMessage
}

func (q *lastMessage) Send(_ context.Context, _ string, msgs ...notify.OutMessage) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msg = &msgs[len(msgs)-1]
	return nil
}

func (q *lastMessage) take() *notify.OutMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.msg
	q.msg = nil
	return m
}

// strictSendRequest decodes b as ingest does: one SendRequest, no unknown fields.
func strictSendRequest(b []byte) (notify.SendRequest, error) {
	var req notify.SendRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	return req, err
}

// FuzzSendRequest posts arbitrary bodies to POST /v1/notifications (the request decoder and
// notify.SendRequest.Validate). The invariants: no panic and no 5xx; a rejected body is a 400
// or 413 with {"error": {"code", "message"}}; an accepted one is queued as a SendRequest that
// decodes strictly, is accepted by Validate again, and encodes to the same bytes (so ingest sees
// what the API checked); and Validate's own errors are *notify.Error with a code.
func FuzzSendRequest(f *testing.F) {
	db, err := sqlite.Open(filepath.Join(f.TempDir(), "herald.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	box, _ := seal.New(bytes.Repeat([]byte{7}, 32))
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		f.Fatal(err)
	}
	q := &lastMessage{}
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h := New(Options{Store: store, Queue: q, Clock: clock, Keys: map[string]string{ordersKey: "orders"},
		MaxBodyBytes: 64 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	example, err := os.ReadFile("../../events/ingest/send-request.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example), "", "null", "[]", "{", `{}`, `{"channels":["push"]} {}`, "\xff",
		`{"channels":["push","inbox"],"content":{"title":"Hi","body":"x"},"recipients":[{"user_id":"alice"}]}`,
		`{"idempotency_key":"k1","channels":["email"],"content":{"title":"Hi","body":"<b>x</b>"},"recipients":[{"email":"a@example.com"}]}`,
		`{"channels":["sms"],"content":{"body":"x"},"recipients":[{"phone":"+821012345678"}],"send_at":"2026-12-02T09:00:00+09:00"}`,
		`{"channels":["sms"],"content":{"body":"x"},"recipients":[{"phone":"12"}],"send_at":"tomorrow"}`,
		`{"channels":["push"],"content":{"body":"x"},"recipients":[{"fcm_token":"t","user_id":"u"}],"ttl_seconds":-1}`,
		`{"channels":"push","content":{"body":"x"},"recipients":[{"user_id":"u"}]}`,
		`{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"u"}],"unknown":true}`,
		`{"channels":["push"],"content":{"body":"x","data":{"k":"v"}},"recipients":[{"user_id":"u","locale":"ko-KR"}],"category":"marketing"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/notifications", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+ordersKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		queued := q.take()
		switch w.Code {
		case http.StatusAccepted:
			if queued == nil {
				t.Fatalf("%q: 202 and nothing queued", body)
			}
			req, err := strictSendRequest(queued.Body)
			if err != nil {
				t.Fatalf("%q: queued %s, which does not decode: %v", body, queued.Body, err)
			}
			if err := req.Validate(clock.Now()); err != nil {
				t.Fatalf("%q: accepted, but its queued form %s is not: %v", body, queued.Body, err)
			}
			again, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if req2, err := strictSendRequest(again); err != nil || !bytes.Equal(again, mustMarshal(t, req2)) {
				t.Fatalf("%q: the queued request does not round-trip: %s", body, again)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if queued != nil {
				t.Fatalf("%q: %d and queued %s", body, w.Code, queued.Body)
			}
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" ||
				(w.Code == http.StatusBadRequest) != (e.Error.Code == notify.EINVALID) {
				t.Fatalf("%q: %d %s, want an error body with a code and a message", body, w.Code, w.Body)
			}
		default:
			t.Fatalf("%q: %d %s, want 202, 400 or 413", body, w.Code, w.Body)
		}

		// Validate on its own: an error is a *notify.Error with a code (and for a field, its
		// path), and what it accepts survives a JSON round trip and is accepted again.
		req, err := strictSendRequest(body)
		if err != nil {
			return
		}
		if err := req.Validate(clock.Now()); err != nil {
			var e *notify.Error
			if !errors.As(err, &e) || e.Code == "" || (e.Code == notify.EINVALID && e.Field == "" && e.Message == "") {
				t.Fatalf("%q: Validate returned %#v, want a *notify.Error with a code and a field or message", body, err)
			}
			return
		}
		b := mustMarshal(t, req)
		req2, err := strictSendRequest(b)
		if err != nil {
			t.Fatalf("%q: accepted request encodes to %s, which does not decode: %v", body, b, err)
		}
		if err := req2.Validate(clock.Now()); err != nil {
			t.Fatalf("%q: accepted, but after a JSON round trip (%s) rejected: %v", body, b, err)
		}
		if !bytes.Equal(b, mustMarshal(t, req2)) {
			t.Fatalf("%q: the JSON round trip changed the request: %s", body, b)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
