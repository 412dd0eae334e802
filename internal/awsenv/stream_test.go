package awsenv_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/golang-jwt/jwt/v4"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/ddb"
	"herald/internal/notify"
	"herald/internal/wsapi"
)

// issuer is an OpenID provider: discovery, a JWKS with one RSA key, and tokens signed by it.
type issuer struct {
	url string
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": iss.url, "jwks_uri": iss.url + "/jwks.json"})
	})
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

func (i *issuer) token(t *testing.T, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(i.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mgmt is a fake management API: it records each POST to @connections and answers 410 for the
// connections in gone.
type mgmt struct {
	mu    sync.Mutex
	posts map[string][]notify.InboxEvent
	auth  []string
	gone  map[string]bool
}

func (m *mgmt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := strings.CutPrefix(r.URL.Path, "/test/@connections/")
	if r.Method != http.MethodPost || !ok {
		http.Error(w, "no such route", http.StatusNotFound)
		return
	}
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	if m.gone[id] {
		w.WriteHeader(http.StatusGone)
		return
	}
	var ev notify.InboxEvent
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &ev); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	m.posts[id] = append(m.posts[id], ev)
}

func (m *mgmt) got(id string) []notify.InboxEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]notify.InboxEvent(nil), m.posts[id]...)
}

func wsEvent(route, conn, body string, query map[string]string) events.APIGatewayWebsocketProxyRequest {
	return events.APIGatewayWebsocketProxyRequest{
		Body: body, QueryStringParameters: query,
		RequestContext: events.APIGatewayWebsocketProxyRequestContext{RouteKey: route, ConnectionID: conn},
	}
}

func TestStreamOnAWS(t *testing.T) {
	w := awsenvtest.Setup(t)
	ctx := context.Background()
	table := fmt.Sprintf("herald-test-connections-%d", time.Now().UnixNano())
	if err := ddb.CreateConnectionsTable(ctx, w.Env.DB, table); err != nil {
		t.Fatal(err)
	}
	conns := ddb.NewConnections(w.Env.DB, table)
	fake := &mgmt{posts: map[string][]notify.InboxEvent{}, gone: map[string]bool{"gone-conn=": true}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	pub := &wsapi.Publisher{Conns: conns, Users: w.Env.Store,
		Client: wsapi.NewClient(srv.URL+"/test", "us-east-1", credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""))}
	iss := newIssuer(t)
	v := &awsenv.JWTVerifier{Issuer: iss.url, Audience: []string{"app-client"}}
	h := awsenv.StreamHandler(v.Verify, w.Env.Store, conns, pub, notify.SystemClock{}, w.Env.Log)
	exp := time.Now().Add(time.Hour).Unix()

	// $connect: refused without a token and with a bad one, accepted with the user's JWT.
	for name, q := range map[string]map[string]string{
		"no token":       nil,
		"wrong audience": {"access_token": iss.token(t, jwt.MapClaims{"iss": iss.url, "aud": "other", "sub": "alice", "exp": exp})},
		"wrong issuer":   {"access_token": iss.token(t, jwt.MapClaims{"iss": "https://elsewhere", "aud": "app-client", "sub": "alice", "exp": exp})},
		"expired":        {"access_token": iss.token(t, jwt.MapClaims{"iss": iss.url, "aud": "app-client", "sub": "alice", "exp": time.Now().Add(-time.Minute).Unix()})},
		"not signed":     {"access_token": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."},
	} {
		r, err := h(ctx, wsEvent("$connect", "c-"+name, "", q))
		if err != nil || r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: $connect = %d %v, want 401", name, r.StatusCode, err)
		}
	}
	good := map[string]string{"access_token": iss.token(t, jwt.MapClaims{"iss": iss.url, "aud": "app-client", "sub": "alice", "exp": exp})}
	for _, id := range []string{"alice-1=", "alice-2=", "gone-conn="} {
		if r, err := h(ctx, wsEvent("$connect", id, "", good)); err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("$connect %s = %d %v, want 200", id, r.StatusCode, err)
		}
	}
	// A Cognito access token names its client in client_id, not aud.
	cog := map[string]string{"access_token": iss.token(t, jwt.MapClaims{"iss": iss.url, "client_id": "app-client", "sub": "bob", "exp": exp})}
	if r, err := h(ctx, wsEvent("$connect", "bob-1=", "", cog)); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("$connect with client_id = %d %v, want 200", r.StatusCode, err)
	}

	// An inbox item reaches every connection of alice, signed for execute-api; the gone one is
	// deleted from the table.
	it := notify.InboxItem{UserID: "alice", ID: "n_item1", Title: "Shipped", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if err := w.Env.Store.PutInboxItems(ctx, []notify.InboxItem{it}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for deadline := time.Now().Add(5 * time.Second); len(ids) < 3 && time.Now().Before(deadline); { // the index is eventually consistent
		ids, _ = conns.ByUser(ctx, "alice")
	}
	pub.Publish(ctx, "alice", notify.ItemEvent(it))
	for _, id := range []string{"alice-1=", "alice-2="} {
		if got := fake.got(id); len(got) != 1 || got[0].Type != notify.InboxEventItem || got[0].Item.ID != "n_item1" {
			t.Fatalf("%s got %+v, want the item", id, got)
		}
	}
	if len(fake.got("bob-1=")) != 0 {
		t.Fatalf("bob got alice's event")
	}
	if _, live, _ := conns.User(ctx, "gone-conn=", time.Now()); live {
		t.Fatal("the gone connection is still in the table")
	}
	for _, a := range fake.auth {
		if !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(a, "/us-east-1/execute-api/aws4_request") {
			t.Fatalf("post not signed for execute-api: %q", a)
		}
	}

	// $default: a resume message is answered through the management API.
	last := notify.InboxEventID(it.CreatedAt.Add(-time.Second), "x")
	if r, err := h(ctx, wsEvent("$default", "alice-1=", `{"action":"resume","last_event_id":"`+last+`"}`, nil)); err != nil || r.StatusCode != 200 {
		t.Fatalf("resume = %d %v", r.StatusCode, err)
	}
	got := fake.got("alice-1=")[1:]
	if len(got) != 2 || got[0].Item == nil || got[0].Item.ID != "n_item1" || got[1].Type != notify.InboxEventUnread || *got[1].Unread != 1 {
		t.Fatalf("resume answered %+v, want the item then unread 1", got)
	}
	h(ctx, wsEvent("$default", "alice-1=", `{"action":"subscribe"}`, nil))
	if got := fake.got("alice-1="); got[len(got)-1].Type != notify.InboxEventError {
		t.Fatalf("a bad message answered %+v, want an error event", got[len(got)-1])
	}

	// A broadcast goes to the connections of users it reaches: bob has a device of the app.
	if err := w.Env.Store.PutDevice(ctx, notify.Device{UserID: "bob", Token: "fcm-bob-ws", App: "default", Platform: notify.PlatformFCM,
		Environment: "production", UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b := notify.Broadcast{ID: "n_bcast", Service: "demo", Category: notify.CategoryTransactional, Title: "Sale", CreatedAt: time.Now().UTC(),
		Targets: []notify.BroadcastTarget{{App: "default"}}}
	pub.PublishBroadcast(ctx, b)
	if got := fake.got("bob-1="); len(got) != 1 || got[0].Type != notify.InboxEventBroadcast || got[0].Item.ID != "n_bcast" {
		t.Fatalf("bob got %+v, want the broadcast", got)
	}
	if got := fake.got("alice-2="); len(got) != 1 {
		t.Fatalf("alice (no device) got %+v, want only the item", got)
	}

	// $disconnect forgets the connection.
	if r, err := h(ctx, wsEvent("$disconnect", "alice-2=", "", nil)); err != nil || r.StatusCode != 200 {
		t.Fatalf("$disconnect = %d %v", r.StatusCode, err)
	}
	if _, live, _ := conns.User(ctx, "alice-2=", time.Now()); live {
		t.Fatal("disconnected connection still in the table")
	}
}
