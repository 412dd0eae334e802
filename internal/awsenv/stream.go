package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/golang-jwt/jwt/v4"

	"herald/internal/ddb"
	"herald/internal/notify"
	"herald/internal/wsapi"
)

// Environment of the live inbox stream (the WebSocket API). With EnvConnectionsTable and
// EnvWebSocketEndpoint set, a function publishes inbox events to connected users; the stream
// function also needs the JWT settings the HTTP API's inbox routes use.
const (
	EnvConnectionsTable  = "HERALD_CONNECTIONS_TABLE"
	EnvWebSocketEndpoint = "HERALD_WEBSOCKET_ENDPOINT" // https://{api-id}.execute-api.{region}.amazonaws.com/{stage}
	EnvJWTIssuer         = "HERALD_JWT_ISSUER"
	EnvJWTAudience       = "HERALD_JWT_AUDIENCE" // comma-separated client ids
)

// inboxEvents is the publisher of the stream's environment, or nil when it has none.
func (e *Env) inboxEvents() (*wsapi.Publisher, *ddb.Connections) {
	table, endpoint := os.Getenv(EnvConnectionsTable), os.Getenv(EnvWebSocketEndpoint)
	if table == "" || endpoint == "" {
		return nil, nil
	}
	conns := ddb.NewConnections(e.DB, table)
	return &wsapi.Publisher{Conns: conns, Client: wsapi.NewClient(endpoint, e.AWS.Region, e.AWS.Credentials),
		Users: e.Store, Log: e.Log}, conns
}

// JWTVerifier checks an end user's token as the HTTP API's JWT authorizer does: signed by a key
// of the issuer's JWKS (found through OpenID discovery), iss the issuer, aud or client_id one
// of the audience, unexpired, with a sub — the user it may stream.
type JWTVerifier struct {
	Issuer   string
	Audience []string
	HTTP     *http.Client // nil: 10 s timeout

	mu   sync.Mutex
	jwks *keyfunc.JWKS
}

func (v *JWTVerifier) keys(ctx context.Context) (*keyfunc.JWKS, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.jwks != nil {
		return v.jwks, nil
	}
	client := v.HTTP
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(v.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, notify.Wrap(notify.EUNAVAILABLE, err, "openid discovery")
	}
	defer resp.Body.Close()
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil || doc.JWKSURI == "" {
		return nil, notify.Errorf(notify.EUNAVAILABLE, "openid discovery of %s: status %d, no jwks_uri", v.Issuer, resp.StatusCode)
	}
	jwks, err := keyfunc.Get(doc.JWKSURI, keyfunc.Options{
		Client: client, RefreshUnknownKID: true, RefreshRateLimit: 5 * time.Minute, RefreshTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, notify.Wrap(notify.EUNAVAILABLE, err, "jwks of %s", v.Issuer)
	}
	v.jwks = jwks
	return jwks, nil
}

// Verify returns the token's sub; EUNAUTHORIZED if the token is not good, EUNAVAILABLE if the
// issuer's keys cannot be fetched.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (string, error) {
	if v.Issuer == "" {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "no JWT issuer is configured")
	}
	jwks, err := v.keys(ctx)
	if err != nil {
		return "", err
	}
	var claims jwt.MapClaims
	if _, err := jwt.ParseWithClaims(token, &claims, jwks.Keyfunc); err != nil {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "token: %v", err)
	}
	if !claims.VerifyIssuer(v.Issuer, true) {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "token: wrong issuer")
	}
	cid, _ := claims["client_id"].(string)
	okAud := slices.Contains(v.Audience, cid) && cid != ""
	for _, a := range v.Audience {
		okAud = okAud || claims.VerifyAudience(a, true)
	}
	if !okAud {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "token: wrong audience")
	}
	if _, ok := claims["exp"]; !ok {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "token: no exp")
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "token: no sub")
	}
	return sub, nil
}

// StreamHandler is the stream function: the WebSocket API's $connect (the JWT from the
// access_token query parameter or the Authorization header, verified; the connection recorded
// for its sub), $disconnect (the connection forgotten) and $default (a resume message answered
// through the management API, notify.Resume).
func StreamHandler(verify func(ctx context.Context, token string) (string, error), inbox notify.InboxStore, conns *ddb.Connections,
	pub *wsapi.Publisher, clock notify.Clock, log *slog.Logger) func(context.Context, events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
	ok := events.APIGatewayProxyResponse{StatusCode: http.StatusOK}
	return func(ctx context.Context, req events.APIGatewayWebsocketProxyRequest) (events.APIGatewayProxyResponse, error) {
		id := req.RequestContext.ConnectionID
		if id == "" {
			return events.APIGatewayProxyResponse{}, errors.New("stream: not a WebSocket API event (no connection id)")
		}
		now := clock.Now()
		switch req.RequestContext.RouteKey {
		case "$connect":
			token := req.QueryStringParameters["access_token"]
			if token == "" {
				for k, v := range req.Headers {
					if strings.EqualFold(k, "Authorization") {
						token, _ = strings.CutPrefix(v, "Bearer ")
					}
				}
			}
			if token == "" {
				log.WarnContext(ctx, "stream: connect refused", "connection_id", id, "error", "no token")
				return events.APIGatewayProxyResponse{StatusCode: http.StatusUnauthorized}, nil
			}
			user, err := verify(ctx, token)
			if notify.IsCode(err, notify.EUNAUTHORIZED) {
				log.WarnContext(ctx, "stream: connect refused", "connection_id", id, "error", err)
				return events.APIGatewayProxyResponse{StatusCode: http.StatusUnauthorized}, nil
			}
			if err != nil {
				return events.APIGatewayProxyResponse{}, fmt.Errorf("stream: verify token: %w", err)
			}
			if err := conns.Put(ctx, ddb.Connection{ID: id, User: user}, now); err != nil {
				return events.APIGatewayProxyResponse{}, err
			}
			log.InfoContext(ctx, "stream: connected", "connection_id", id)
			return ok, nil
		case "$disconnect":
			log.InfoContext(ctx, "stream: disconnected", "connection_id", id)
			return ok, conns.Delete(ctx, id)
		default:
			user, live, err := conns.User(ctx, id, now)
			if err != nil {
				return events.APIGatewayProxyResponse{}, err
			}
			if !live {
				return ok, nil // closed meanwhile, or older than any connection lives
			}
			since, bad := notify.ParseResume([]byte(req.Body))
			if bad != nil {
				pub.Send(ctx, id, *bad)
				return ok, nil
			}
			evs, err := notify.Resume(ctx, inbox, user, since, now)
			if err != nil {
				return events.APIGatewayProxyResponse{}, err
			}
			pub.Send(ctx, id, evs...)
			return ok, nil
		}
	}
}

// StartStream is the stream function's main, returning like StartSQS.
func StartStream() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	pub, conns := e.inboxEvents()
	if pub == nil {
		return fmt.Errorf("config: the stream function needs %s and %s", EnvConnectionsTable, EnvWebSocketEndpoint)
	}
	v := &JWTVerifier{Issuer: os.Getenv(EnvJWTIssuer)}
	for _, a := range strings.Split(os.Getenv(EnvJWTAudience), ",") {
		if a = strings.TrimSpace(a); a != "" {
			v.Audience = append(v.Audience, a)
		}
	}
	lambda.Start(StreamHandler(v.Verify, e.Store, conns, pub, notify.SystemClock{}, e.Log))
	return nil
}
