// Package inboxstream is the local live inbox stream: GET /v1/users/{user}/inbox/stream upgraded
// to a WebSocket, fed by an in-process hub that implements notify.InboxEvents. It speaks the
// same messages (notify.InboxEvent as JSON text frames) and resume rule (?last_event_id=) as
// the AWS WebSocket API (internal/awsenv's stream handlers), so one client works against both.
package inboxstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"herald/internal/notify"
)

// Defaults of Options' zero fields.
const (
	DefaultPingInterval = 30 * time.Second
	DefaultSendBuffer   = 64
	DefaultWriteTimeout = 10 * time.Second
)

// Options configure a Hub. Inbox and Users are required.
type Options struct {
	Inbox notify.InboxStore
	Users notify.UserStore // devices and preferences, to tell whom a broadcast reaches
	Clock notify.Clock     // nil: system clock
	Log   *slog.Logger     // nil: discard
	// PingInterval is how often an idle connection is pinged, so proxies keep it and a dead
	// peer is noticed.
	PingInterval time.Duration
	// SendBuffer is how many events may wait for one connection. A client that falls that far
	// behind is disconnected (it resumes with last_event_id): the inbox writers never wait on
	// a slow reader.
	SendBuffer int
	// WriteTimeout bounds writing one frame or ping.
	WriteTimeout time.Duration
}

// Hub tracks the open streams by user and delivers published events to them.
type Hub struct {
	o     Options
	mu    sync.Mutex
	conns map[string]map[*client]struct{}
	wg    sync.WaitGroup // the streams being served; Added under mu, so Close's Wait sees every Add
	done  bool           // Close was called: no new streams
}

type client struct {
	user string
	send chan []byte
	gone chan struct{} // closed when the hub drops the client
	once sync.Once
	code websocket.StatusCode // why, once gone is closed
	why  string
}

func (c *client) drop(code websocket.StatusCode, why string) {
	c.once.Do(func() { c.code, c.why = code, why; close(c.gone) })
}

// New returns a hub.
func New(o Options) *Hub {
	if o.Inbox == nil || o.Users == nil {
		panic("inboxstream.New: Options.Inbox and Options.Users are required")
	}
	if o.Clock == nil {
		o.Clock = notify.SystemClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.SendBuffer <= 0 {
		o.SendBuffer = DefaultSendBuffer
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	return &Hub{o: o, conns: map[string]map[*client]struct{}{}}
}

// Connected is how many streams userID has open.
func (h *Hub) Connected(userID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns[userID])
}

// Publish implements notify.InboxEvents.
func (h *Hub) Publish(_ context.Context, userID string, events ...notify.InboxEvent) {
	frames := make([][]byte, 0, len(events))
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			h.o.Log.Error("inbox stream: encode event", "error", err)
			return
		}
		frames = append(frames, b)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns[userID] {
		h.enqueue(c, frames...)
	}
}

// enqueue queues frames for c without waiting; a full buffer drops c. h.mu is held.
func (h *Hub) enqueue(c *client, frames ...[]byte) {
	for _, f := range frames {
		select {
		case c.send <- f:
		default:
			h.o.Log.Warn("inbox stream: client too slow, disconnecting")
			h.remove(c)
			c.drop(websocket.StatusPolicyViolation, "too slow: reconnect with last_event_id")
			return
		}
	}
}

// PublishBroadcast implements notify.InboxEvents: one inbox.broadcast event to each stream of
// each connected user the broadcast reaches. Whom it reaches is read, never written.
func (h *Hub) PublishBroadcast(ctx context.Context, b notify.Broadcast) {
	h.mu.Lock()
	users := make([]string, 0, len(h.conns))
	for u := range h.conns {
		users = append(users, u)
	}
	h.mu.Unlock()
	now := h.o.Clock.Now()
	for _, u := range users {
		ok, err := notify.BroadcastReaches(ctx, h.o.Users, b, u, now)
		if err != nil {
			h.o.Log.Warn("inbox stream: broadcast", "broadcast_id", b.ID, "error", err)
			continue
		}
		if ok {
			it := b.Item(u, nil)
			h.Publish(ctx, u, notify.InboxEvent{ID: notify.InboxEventID(b.CreatedAt, b.ID), Type: notify.InboxEventBroadcast, Item: &it})
		}
	}
}

// add registers c; false once the hub is closed.
func (h *Hub) add(c *client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return false
	}
	h.wg.Add(1)
	if h.conns[c.user] == nil {
		h.conns[c.user] = map[*client]struct{}{}
	}
	h.conns[c.user][c] = struct{}{}
	return true
}

// remove forgets c; h.mu is held.
// CloseUser implements notify.ConnectionCloser: every stream of userID ends now.
func (h *Hub) CloseUser(_ context.Context, userID string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.conns[userID] {
		c.drop(websocket.StatusPolicyViolation, "user erased")
		h.remove(c)
	}
	return nil
}

func (h *Hub) remove(c *client) {
	delete(h.conns[c.user], c)
	if len(h.conns[c.user]) == 0 {
		delete(h.conns, c.user)
	}
}

// ServeHTTP upgrades an authenticated request for r.PathValue("user") to a stream. The caller
// (the API) has checked the identity and that last_event_id, if any, parses.
//
// The client is registered before the replay is read, so nothing written in between is lost;
// an event may then come twice, with the same id, which clients skip.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	// The HTTP server's read and write deadlines bound requests; a stream lives longer, and
	// pings find dead peers instead.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Identity is an explicit key or token in the request, never a cookie, so a page of
		// another origin gains nothing it did not already hold: any origin may connect.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept has answered the request
	}
	c := &client{user: user, send: make(chan []byte, h.o.SendBuffer), gone: make(chan struct{})}
	if !h.add(c) {
		conn.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		h.remove(c)
		h.mu.Unlock()
	}()

	// The client's messages are resume requests (notify.ParseResume), answered in order by the
	// writer below; the reader also handles pings and the close, and ends ctx with the socket.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	resume := make(chan []byte, 1)
	go func() {
		defer cancel()
		conn.SetReadLimit(4096)
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			select {
			case resume <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	// ?last_event_id= resumes at once (the API checked it parses): a shortcut of this runtime;
	// the resume message works on both.
	if v := r.URL.Query().Get("last_event_id"); v != "" {
		since, _ := notify.ParseInboxEventID(v)
		if !h.resume(ctx, conn, user, since) {
			return
		}
	}
	ping := time.NewTicker(h.o.PingInterval)
	defer ping.Stop()
	for {
		select {
		case b := <-c.send:
			if !h.write(ctx, conn, b) {
				return
			}
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, h.o.WriteTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				conn.CloseNow()
				return
			}
		case <-c.gone:
			conn.Close(c.code, c.why)
			return
		case b := <-resume:
			since, bad := notify.ParseResume(b)
			if bad != nil {
				f, _ := json.Marshal(bad)
				if !h.write(ctx, conn, f) {
					return
				}
				continue
			}
			if !h.resume(ctx, conn, user, since) {
				return
			}
		case <-ctx.Done():
			conn.CloseNow()
			return
		}
	}
}

// resume writes the answer to a resume from since (notify.Resume) straight to the socket: a
// replay may be longer than the send buffer.
func (h *Hub) resume(ctx context.Context, conn *websocket.Conn, user string, since time.Time) bool {
	evs, err := notify.Resume(ctx, h.o.Inbox, user, since, h.o.Clock.Now())
	if err != nil {
		h.o.Log.Error("inbox stream: resume", "error", err)
		conn.Close(websocket.StatusInternalError, "inbox unavailable")
		return false
	}
	for _, e := range evs {
		b, _ := json.Marshal(e)
		if !h.write(ctx, conn, b) {
			return false
		}
	}
	return true
}

func (h *Hub) write(ctx context.Context, conn *websocket.Conn, b []byte) bool {
	wctx, cancel := context.WithTimeout(ctx, h.o.WriteTimeout)
	defer cancel()
	if err := conn.Write(wctx, websocket.MessageText, b); err != nil {
		conn.CloseNow()
		return false
	}
	return true
}

// Close disconnects every stream (going away: clients reconnect) and waits for them to end.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.done = true
	for _, cs := range h.conns {
		for c := range cs {
			c.drop(websocket.StatusGoingAway, "server shutting down: reconnect with last_event_id")
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}
