package local

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"herald/internal/notify"
)

// stream is a live inbox WebSocket client, as a user's app holds one.
type stream struct {
	t    *testing.T
	conn *websocket.Conn
}

// openStream connects to user's live inbox with the demo key in the access_token parameter (as a
// browser must) and query's extra parameters.
func (e *env) openStream(user, query string) *stream {
	e.t.Helper()
	u := "ws" + strings.TrimPrefix(e.rt.URL, "http") + "/v1/users/" + user + "/inbox/stream?access_token=dev-demo-key" + query
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		e.t.Fatalf("dial %s: %v (%+v)", user, err, resp)
	}
	e.t.Cleanup(func() { conn.CloseNow() })
	return &stream{t: e.t, conn: conn}
}

// resume sends the resume message (lastID "": none).
func (s *stream) resume(lastID string) {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"action": "resume", "last_event_id": lastID})
	if err := s.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		s.t.Fatalf("send resume: %v", err)
	}
}

// next is the next event, failing after 5 s.
func (s *stream) next() notify.InboxEvent {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	typ, b, err := s.conn.Read(ctx)
	if err != nil {
		s.t.Fatalf("read event: %v", err)
	}
	var ev notify.InboxEvent
	if typ != websocket.MessageText || json.Unmarshal(b, &ev) != nil || (ev.ID == "") != (ev.Type == notify.InboxEventError) {
		s.t.Fatalf("frame %v %q is not an inbox event", typ, b)
	}
	return ev
}

// nextOf skips events until one of type typ.
func (s *stream) nextOf(typ string) notify.InboxEvent {
	s.t.Helper()
	for {
		if ev := s.next(); ev.Type == typ {
			return ev
		}
	}
}

func wantUnread(t *testing.T, ev notify.InboxEvent, n int) {
	t.Helper()
	if ev.Type != notify.InboxEventUnread || ev.Unread == nil || *ev.Unread != n {
		t.Fatalf("event %+v, want inbox.unread %d", ev, n)
	}
}

func TestInboxStreamLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.openStream("alice", "")
	s.resume("")
	wantUnread(t, s.next(), 0) // the answer to a resume from nothing: the count

	start := time.Now()
	id := e.send(notify.SendRequest{Channels: []notify.Channel{notify.ChannelInbox},
		Content: notify.Content{Title: "Your order shipped", Body: "It arrives Friday."}, Recipients: []notify.Recipient{{UserID: "alice"}}})
	ev := s.next()
	t.Logf("inbox item reached the stream %v after the send was accepted", time.Since(start))
	if ev.Type != notify.InboxEventItem || ev.Item == nil || ev.Item.ID != id || ev.Item.Title != "Your order shipped" || ev.Item.ReadAt != nil {
		t.Fatalf("event %+v, want inbox.item %s", ev, id)
	}
	if !strings.HasSuffix(ev.ID, "-"+id) {
		t.Fatalf("event id %q does not name item %s", ev.ID, id)
	}

	e.mustDo("POST", "/v1/users/alice/inbox/"+id+"/read", nil, http.StatusNoContent)
	if rd := s.next(); rd.Type != notify.InboxEventRead || rd.ItemID != id {
		t.Fatalf("event %+v, want inbox.read of %s", rd, id)
	}
	wantUnread(t, s.next(), 0)

	// Another user's stream hears nothing of alice's inbox.
	b := e.openStream("bob", "")
	b.resume("")
	wantUnread(t, b.next(), 0)
	id2 := e.send(notify.SendRequest{Channels: []notify.Channel{notify.ChannelInbox},
		Content: notify.Content{Title: "Second", Body: "b"}, Recipients: []notify.Recipient{{UserID: "alice"}}})
	if ev := s.next(); ev.Item == nil || ev.Item.ID != id2 {
		t.Fatalf("event %+v, want inbox.item %s", ev, id2)
	}
	e.mustDo("DELETE", "/v1/users/alice/inbox/"+id2, nil, http.StatusNoContent)
	if ev := s.next(); ev.Type != notify.InboxEventDeleted || ev.ItemID != id2 {
		t.Fatalf("event %+v, want inbox.deleted of %s", ev, id2)
	}
	wantUnread(t, s.next(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, frame, err := b.conn.Read(ctx); err == nil {
		t.Fatalf("bob's stream got %s", frame)
	}
}

func TestInboxStreamResumes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.openStream("alice", "")
	s.resume("")
	s.next()
	first := e.send(notify.SendRequest{Channels: []notify.Channel{notify.ChannelInbox},
		Content: notify.Content{Title: "Seen", Body: "b"}, Recipients: []notify.Recipient{{UserID: "alice"}}})
	last := s.nextOf(notify.InboxEventItem)
	if last.Item.ID != first {
		t.Fatalf("event %+v, want %s", last, first)
	}
	s.conn.Close(websocket.StatusNormalClosure, "")

	// While away: two items arrive.
	var missed []string
	for _, title := range []string{"Missed 1", "Missed 2"} {
		id := e.send(notify.SendRequest{Channels: []notify.Channel{notify.ChannelInbox},
			Content: notify.Content{Title: title, Body: "b"}, Recipients: []notify.Recipient{{UserID: "alice"}}})
		e.waitFinal(id)
		missed = append(missed, id)
	}

	// Both ways to resume: the message (portable), and the query parameter of this runtime.
	r := e.openStream("alice", "")
	r.resume(last.ID)
	q := e.openStream("alice", "&last_event_id="+last.ID)
	for _, st := range []*stream{r, q} {
		for _, id := range missed { // oldest first, the one seen not again
			if ev := st.next(); ev.Type != notify.InboxEventItem || ev.Item == nil || ev.Item.ID != id {
				t.Fatalf("replayed %+v, want inbox.item %s", ev, id)
			}
		}
		wantUnread(t, st.next(), 3)
	}
	// A resume message that is not one is answered with an error event, and the stream goes on.
	r.resume("yesterday")
	if ev := r.next(); ev.Type != notify.InboxEventError || !strings.Contains(ev.Error, "last_event_id") {
		t.Fatalf("bad resume answered %+v, want an error naming last_event_id", ev)
	}
	r.resume("")
	wantUnread(t, r.next(), 3)

	// A malformed last_event_id is refused before the upgrade, naming the parameter.
	var body struct {
		Error struct {
			Field string `json:"field"`
		} `json:"error"`
	}
	if code := e.do("GET", "/v1/users/alice/inbox/stream?last_event_id=yesterday", nil, &body); code != http.StatusBadRequest || body.Error.Field != "last_event_id" {
		t.Fatalf("bad last_event_id = %d %+v, want 400 naming last_event_id", code, body)
	}
}

func TestInboxStreamAuth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	u := "ws" + strings.TrimPrefix(e.rt.URL, "http") + "/v1/users/alice/inbox/stream"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, q := range []string{"", "?access_token=wrong"} {
		_, resp, err := websocket.Dial(ctx, u+q, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("dial %q: %v %+v, want 401", q, err, resp)
		}
	}
	// The key in the Authorization header works as on every route.
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer dev-demo-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	conn.CloseNow()
}

func TestInboxStreamBroadcast(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.registerDevice("alice", "fcm-ws-alice-phone", "fcm", "default")
	alice := e.openStream("alice", "")
	alice.resume("")
	alice.next()
	bob := e.openStream("bob", "") // no device of the app: not targeted
	bob.resume("")
	bob.next()

	id := e.campaignToApp("default", "Spring sale", notify.ChannelInbox)
	ev := alice.next()
	if ev.Type != notify.InboxEventBroadcast || ev.Item == nil || ev.Item.ID != id || ev.Item.Title != "Spring sale" {
		t.Fatalf("event %+v, want inbox.broadcast %s", ev, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, frame, err := bob.conn.Read(ctx); err == nil {
		t.Fatalf("bob (no device of the app) got %s", frame)
	}
	// Reading it counts down as for any item.
	e.mustDo("POST", "/v1/users/alice/inbox/"+id+"/read", nil, http.StatusNoContent)
	alice.nextOf(notify.InboxEventRead)
	wantUnread(t, alice.next(), 0)
}
