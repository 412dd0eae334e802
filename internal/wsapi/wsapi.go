// Package wsapi is the AWS side of the live inbox stream: posting to the connections of an API
// Gateway WebSocket API through its management API (@connections), and a notify.InboxEvents
// that finds a user's connections in the connections table (internal/ddb) and posts each event
// to them. A connection the management API reports gone (410) is deleted from the table.
package wsapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"herald/internal/ddb"
	"herald/internal/notify"
)

// ErrGone is a connection that no longer exists (the management API's GoneException, 410).
var ErrGone = errors.New("wsapi: connection is gone")

// Client posts to connections through a WebSocket API stage's management endpoint, signing each
// request with SigV4 for execute-api (the caller's role needs execute-api:ManageConnections on
// that stage's POST/@connections/*).
type Client struct {
	// Endpoint is the stage's management URL: https://{api-id}.execute-api.{region}.amazonaws.com/{stage}.
	Endpoint    string
	Region      string
	Credentials aws.CredentialsProvider
	HTTP        *http.Client // nil: a client with a 10 s timeout
	signer      *v4.Signer
}

// NewClient returns a client for endpoint.
func NewClient(endpoint, region string, creds aws.CredentialsProvider) *Client {
	return &Client{Endpoint: strings.TrimRight(endpoint, "/"), Region: region, Credentials: creds,
		HTTP: &http.Client{Timeout: 10 * time.Second}, signer: v4.NewSigner()}
}

// Post sends data as one text frame to connection id. ErrGone if the connection has closed.
func (c *Client) Post(ctx context.Context, id string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint+"/@connections/"+url.PathEscape(id), bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("wsapi: post: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := c.Credentials.Retrieve(ctx)
	if err != nil {
		return notify.Wrap(notify.EAUTH, err, "wsapi: credentials")
	}
	sum := sha256.Sum256(data)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", c.Region, time.Now()); err != nil {
		return fmt.Errorf("wsapi: sign: %w", err)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return notify.Wrap(notify.EUNAVAILABLE, err, "wsapi: post to connection")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode == http.StatusGone {
		return ErrGone
	}
	if resp.StatusCode < 300 {
		return nil
	}
	code := notify.CodeForStatus(resp.StatusCode)
	if code == "" {
		code = notify.EUNAVAILABLE // a redirect: not the management API answering
	}
	return notify.Errorf(code, "wsapi: post to connection: %d %s", resp.StatusCode, body)
}

// Poster is what Publisher needs of Client.
type Poster interface {
	Post(ctx context.Context, id string, data []byte) error
}

// Publisher is the AWS notify.InboxEvents: each event is posted to every connection of its
// user. Best effort: failures are logged, gone connections deleted.
type Publisher struct {
	Conns  *ddb.Connections
	Client Poster
	Users  notify.UserStore // to tell whom a broadcast reaches
	Clock  notify.Clock     // nil: system clock
	Log    *slog.Logger     // nil: slog.Default()
}

var _ notify.InboxEvents = (*Publisher)(nil)

func (p *Publisher) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

func (p *Publisher) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

// Publish implements notify.InboxEvents.
func (p *Publisher) Publish(ctx context.Context, userID string, events ...notify.InboxEvent) {
	ids, err := p.Conns.ByUser(ctx, userID)
	if err != nil {
		p.log().WarnContext(ctx, "inbox stream: connections of a user", "error", err)
		return
	}
	for _, id := range ids {
		p.Send(ctx, id, events...)
	}
}

// CloseUser implements notify.ConnectionCloser: the user's connections are forgotten (their
// items deleted), so nothing is posted to them again; API Gateway ends each within its
// two-hour limit.
func (p *Publisher) CloseUser(ctx context.Context, userID string) error {
	ids, err := p.Conns.ByUser(ctx, userID)
	if err != nil {
		return fmt.Errorf("wsapi: connections of a user: %w", err)
	}
	for _, id := range ids {
		if err := p.Conns.Delete(ctx, id); err != nil {
			return fmt.Errorf("wsapi: forget connection: %w", err)
		}
	}
	return nil
}

// Send posts events to connection id in order, stopping (and deleting the connection) if it is
// gone. It reports whether every event went.
func (p *Publisher) Send(ctx context.Context, id string, events ...notify.InboxEvent) bool {
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			p.log().ErrorContext(ctx, "inbox stream: encode event", "error", err)
			return false
		}
		err = p.Client.Post(ctx, id, b)
		if errors.Is(err, ErrGone) {
			if err := p.Conns.Delete(ctx, id); err != nil {
				p.log().WarnContext(ctx, "inbox stream: delete gone connection", "error", err)
			}
			return false
		}
		if err != nil {
			p.log().WarnContext(ctx, "inbox stream: post to connection", "error", err)
			return false
		}
	}
	return true
}

// PublishBroadcast implements notify.InboxEvents: the table is scanned once, and each
// connection of a user the broadcast reaches gets one inbox.broadcast event. Whom it reaches is
// read (devices, preferences) once per connected user, never written.
func (p *Publisher) PublishBroadcast(ctx context.Context, b notify.Broadcast) {
	now := p.now()
	reach := map[string]bool{}
	err := p.Conns.Each(ctx, now, func(page []ddb.Connection) error {
		for _, c := range page {
			ok, seen := reach[c.User]
			if !seen {
				var err error
				if ok, err = notify.BroadcastReaches(ctx, p.Users, b, c.User, now); err != nil {
					p.log().WarnContext(ctx, "inbox stream: broadcast", "broadcast_id", b.ID, "error", err)
				}
				reach[c.User] = ok
			}
			if ok {
				it := b.Item(c.User, nil)
				p.Send(ctx, c.ID, notify.InboxEvent{ID: notify.InboxEventID(b.CreatedAt, b.ID), Type: notify.InboxEventBroadcast, Item: &it})
			}
		}
		return ctx.Err()
	})
	if err != nil {
		p.log().WarnContext(ctx, "inbox stream: broadcast scan", "broadcast_id", b.ID, "error", err)
	}
}
