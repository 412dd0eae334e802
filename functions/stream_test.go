package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/ddb"
	"herald/internal/notify"
)

// streamSteps runs the stream function on its envelopes: $connect without a token is refused,
// a resume message from an unknown connection posts nothing, from a recorded one it is answered
// through the management API (a fake here), and $disconnect forgets the connection.
func streamSteps(t *testing.T, w *awsenvtest.World) {
	ctx := context.Background()
	table := fmt.Sprintf("herald-test-connections-%d", time.Now().UnixNano())
	if err := ddb.CreateConnectionsTable(ctx, w.Env.DB, table); err != nil {
		t.Fatal(err)
	}
	conns := ddb.NewConnections(w.Env.DB, table)
	var mu sync.Mutex
	posted := map[string][]notify.InboxEvent{}
	mgmt := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/live/@connections/")
		var ev notify.InboxEvent
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !ok || json.Unmarshal(b, &ev) != nil ||
			!strings.Contains(r.Header.Get("Authorization"), "/execute-api/aws4_request") {
			http.Error(rw, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		posted[id] = append(posted[id], ev)
		mu.Unlock()
	}))
	defer mgmt.Close()
	w.Vars[awsenv.EnvConnectionsTable] = table
	w.Vars[awsenv.EnvWebSocketEndpoint] = mgmt.URL + "/live"
	w.Vars[awsenv.EnvJWTIssuer] = "https://issuer.invalid"
	w.Vars[awsenv.EnvJWTAudience] = "app-client"
	fn := start(t, w, "stream")
	fixture := func(name string) events.APIGatewayWebsocketProxyRequest {
		var ev events.APIGatewayWebsocketProxyRequest
		if err := json.Unmarshal(awsenvtest.Fixture(t, name), &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}

	if r, _ := invoke[events.APIGatewayProxyResponse](fn, fixture("stream/connect-no-token.json")); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("$connect without a token = %d, want 401\n%s", r.StatusCode, fn.logs)
	}
	resume := fixture("stream/resume.json")
	id := resume.RequestContext.ConnectionID
	if r, _ := invoke[events.APIGatewayProxyResponse](fn, resume); r.StatusCode != http.StatusOK || len(posted[id]) != 0 {
		t.Fatalf("resume from an unknown connection = %d, posted %+v; want 200 and nothing\n%s", r.StatusCode, posted[id], fn.logs)
	}
	if err := conns.Put(ctx, ddb.Connection{ID: id, User: "erin"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	item := notify.InboxItem{UserID: "erin", ID: "n_stream_item", Title: "Hello", CreatedAt: time.Now().UTC()}
	if err := w.Env.Store.PutInboxItems(ctx, []notify.InboxItem{item}); err != nil {
		t.Fatal(err)
	}
	if r, _ := invoke[events.APIGatewayProxyResponse](fn, resume); r.StatusCode != http.StatusOK {
		t.Fatalf("resume = %d\n%s", r.StatusCode, fn.logs)
	}
	mu.Lock()
	got := posted[id]
	mu.Unlock()
	if len(got) != 2 || got[0].Item == nil || got[0].Item.ID != item.ID || got[1].Type != notify.InboxEventUnread || *got[1].Unread != 1 {
		t.Fatalf("resume posted %+v, want the item newer than last_event_id, then unread 1\n%s", got, fn.logs)
	}
	if r, _ := invoke[events.APIGatewayProxyResponse](fn, fixture("stream/disconnect.json")); r.StatusCode != http.StatusOK {
		t.Fatalf("$disconnect = %d\n%s", r.StatusCode, fn.logs)
	}
	if _, live, err := conns.User(ctx, id, time.Now()); err != nil || live {
		t.Fatalf("after $disconnect the connection is live=%v (%v)", live, err)
	}
}
