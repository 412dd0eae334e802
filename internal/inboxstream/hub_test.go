package inboxstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

func newHub(t *testing.T, buffer int) (*Hub, string) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	box, _ := seal.FromBase64("aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=")
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Inbox: store, Users: store, SendBuffer: buffer})
	mux := http.NewServeMux()
	mux.Handle("GET /v1/users/{user}/inbox/stream", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return h, "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/users/"
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func waitConnected(t *testing.T, h *Hub, user string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); h.Connected(user) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d streams, want %d", user, h.Connected(user), n)
		}
	}
}

// A client that does not read is dropped once its buffer is full; publishing never waits on it,
// and the other clients go on.
func TestSlowClientIsDropped(t *testing.T) {
	h, base := newHub(t, 4)
	slow := dial(t, base+"alice/inbox/stream")
	fast := dial(t, base+"bob/inbox/stream")
	waitConnected(t, h, "alice", 1)
	waitConnected(t, h, "bob", 1)

	big := strings.Repeat("x", 16<<10) // frames the socket buffers cannot all absorb
	start := time.Now()
	for i := range 200 {
		it := notify.InboxItem{ID: "n_" + strings.Repeat("0", 3) + string(rune('a'+i%26)), Body: big, CreatedAt: time.Now()}
		h.Publish(context.Background(), "alice", notify.ItemEvent(it))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("publishing to a client that does not read took %v", d)
	}
	waitConnected(t, h, "alice", 0)
	// Reading what the slow client was sent ends in the close: 1008, resume with last_event_id.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = slow.Read(ctx)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "last_event_id") {
		t.Fatalf("slow client ended with %v, want close 1008 naming last_event_id", err)
	}

	h.Publish(context.Background(), "bob", notify.UnreadEvent(time.Now(), 2))
	if _, b, err := fast.Read(ctx); err != nil || !strings.Contains(string(b), `"unread":2`) {
		t.Fatalf("bob read %s %v", b, err)
	}
}

// Close ends every stream with 1001 (going away), so clients reconnect and resume.
func TestCloseSaysGoingAway(t *testing.T) {
	h, base := newHub(t, 0)
	c := dial(t, base+"alice/inbox/stream")
	waitConnected(t, h, "alice", 1)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, err := c.Read(ctx)
		done <- err
	}()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if code := websocket.CloseStatus(<-done); code != websocket.StatusGoingAway {
		t.Fatalf("close status %v, want 1001", code)
	}
}
