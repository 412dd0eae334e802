package fcm

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"herald/internal/notify"
	"herald/internal/sandbox"
)

const project = "herald-test"

// setup starts a sandbox and a Sender for app "default" on its plain-HTTP listener.
func setup(t *testing.T) (*Sender, *sandbox.Server) {
	t.Helper()
	sb := startSandbox(t)
	s, err := New(context.Background(), Config{Apps: map[string]App{"default": {ProjectID: project, Endpoint: sb.URL() + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, sb
}

func startSandbox(t testing.TB) *sandbox.Server {
	t.Helper()
	sb, err := sandbox.Start(sandbox.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func msg(id, token string, c notify.Content) notify.OutboundMessage {
	return notify.OutboundMessage{DeliveryID: id, NotificationID: "n_1", Channel: notify.ChannelPush, Address: token,
		App: "default", Content: c, CollapseID: "n_1", Priority: notify.PriorityHigh, TTL: time.Hour}
}

func send(t *testing.T, s *Sender, msgs ...notify.OutboundMessage) []notify.SendResult {
	t.Helper()
	res, err := s.Send(context.Background(), msgs)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(res), len(msgs))
	}
	for i := range res {
		if res[i].DeliveryID != msgs[i].DeliveryID {
			t.Fatalf("result %d is for %q, want %q (order lost)", i, res[i].DeliveryID, msgs[i].DeliveryID)
		}
	}
	return res
}

func wantCode(t *testing.T, r notify.SendResult, code string) {
	t.Helper()
	if got := notify.ErrorCode(r.Err); got != code {
		t.Errorf("%s: code %q, want %q (err: %v)", r.DeliveryID, got, code, r.Err)
	}
	if code == "" && r.ProviderMessageID == "" {
		t.Errorf("%s: accepted without a provider message id", r.DeliveryID)
	}
}

func TestSendMixedBatch(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	a := notify.Content{Title: "Order shipped", Body: "On its way", Data: map[string]string{"order": "42"}, Link: "myapp://orders/42"}
	b := notify.Content{Title: "주문 발송", Body: "배송 중", Data: map[string]string{"order": "42"}}
	msgs := []notify.OutboundMessage{
		msg("d0", "tok-a-0000000000", a),
		msg("d1", "tok-b-0000000000", b),
		msg("d2", "tok-unregistered-0000000000", a),
		msg("d3", "tok-invalid-0000000000", b),
		msg("d4", "tok-a-1111111111", a),
		msg("d5", "", a),
		{DeliveryID: "d6", Address: "tok-c-000000000", App: "nope", Content: a},
	}
	res := send(t, s, msgs...)
	for i, code := range []string{"", "", notify.EDEADADDRESS, notify.EREJECTED, "", notify.EREJECTED, notify.EREJECTED} {
		wantCode(t, res[i], code)
	}
	for _, i := range []int{2, 3} {
		if strings.Contains(res[i].Err.Error(), msgs[i].Address) {
			t.Errorf("error text contains the raw token: %v", res[i].Err)
		}
	}

	got := sb.Recorder.List("fcm", "")
	if len(got) != 3 {
		t.Fatalf("recorded %d deliveries, want 3: %+v", len(got), got)
	}
	byToken := map[string]sandbox.Delivery{}
	for _, d := range got {
		byToken[d.Address] = d
	}
	d := byToken["tok-a-0000000000"]
	if d.App != project || d.CollapseID != "n_1" || d.Title != "Order shipped" || d.Body != "On its way" ||
		d.Data["order"] != "42" || d.Data["link"] != "myapp://orders/42" {
		t.Errorf("recorded %+v", d)
	}
	if d := byToken["tok-b-0000000000"]; d.Title != "주문 발송" || d.Data["link"] != "" {
		t.Errorf("recorded %+v", d)
	}
	if want := "projects/" + project + "/messages/" + d.MessageID; res[0].ProviderMessageID != want {
		t.Errorf("provider message id %q, want %q", res[0].ProviderMessageID, want)
	}
}

func TestSendThrottledThenAccepted(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	m := msg("d0", "tok-throttle2-000000", notify.Content{Body: "b"})
	for attempt := 1; attempt <= 2; attempt++ {
		r := send(t, s, m)[0]
		wantCode(t, r, notify.ETHROTTLED)
		if ra := notify.RetryAfter(r.Err); ra != time.Second {
			t.Errorf("attempt %d: RetryAfter = %v, want 1s", attempt, ra)
		}
	}
	wantCode(t, send(t, s, m)[0], "")
	if n := len(sb.Recorder.List("fcm", m.Address)); n != 1 {
		t.Errorf("recorded %d, want 1", n)
	}
}

// The SDK retries a 503 itself; the sandbox answers Retry-After: 0, so one failure is absorbed.
func TestSendUnavailableRetriedBySDK(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	wantCode(t, send(t, s, msg("d0", "tok-unavailable1-0000", notify.Content{Body: "b"}))[0], "")
}

func TestSendTooMany(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	_, err := s.Send(context.Background(), make([]notify.OutboundMessage, MaxBatch+1))
	if !notify.IsCode(err, notify.ETOOLARGE) {
		t.Fatalf("err = %v, want %s", err, notify.ETOOLARGE)
	}
}

func TestSendCanceled(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.Send(ctx, []notify.OutboundMessage{msg("d0", "tok-a-0000000000", notify.Content{Body: "b"})})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, res[0], notify.EUNAVAILABLE)
	if n := sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d after cancel", n)
	}
}

// The sender's HTTP/2 path: Config.HTTPClient speaking h2 to the sandbox's TLS listener.
func TestSendOverHTTP2(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	tr := &http2.Transport{TLSClientConfig: sb.TLSConfig()}
	t.Cleanup(tr.CloseIdleConnections)
	var proto string
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		if err == nil {
			proto = resp.Proto
		}
		return resp, err
	})}
	s, err := New(context.Background(), Config{HTTPClient: hc,
		Apps: map[string]App{"default": {ProjectID: project, Endpoint: sb.TLSURL() + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	wantCode(t, send(t, s, msg("d0", "tok-a-0000000000", notify.Content{Body: "b"}))[0], "")
	if proto != "HTTP/2.0" {
		t.Errorf("protocol %q, want HTTP/2.0", proto)
	}
}

// The real credential path: a service account whose token_uri is the sandbox's OAuth stand-in.
func TestSendWithServiceAccount(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": project, "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "herald@" + project + ".iam.gserviceaccount.com", "client_id": "1",
		"token_uri": sb.URL() + "/token",
	})
	s, err := New(context.Background(), Config{Apps: map[string]App{
		"default": {ProjectID: project, Endpoint: sb.URL() + "/v1", CredentialsJSON: creds}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	wantCode(t, send(t, s, msg("d0", "tok-a-0000000000", notify.Content{Body: "b"}))[0], "")
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), Config{MaxConcurrency: -1, Apps: map[string]App{
		"a": {}, "b": {ProjectID: "p", Endpoint: "ftp://x"}}})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{`"a": project id`, `"b": endpoint`, "max concurrency"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := New(context.Background(), Config{Apps: map[string]App{"d": {ProjectID: "p", CredentialsJSON: []byte("{")}}}); err == nil {
		t.Error("New accepted unparseable credentials")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAppLogValueHidesCredentials(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("cfg", "app", App{ProjectID: "p", CredentialsJSON: []byte(`{"private_key":"SECRET"}`)})
	if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), "app.credentials=true") {
		t.Errorf("logged %s", b.String())
	}
}

// A payload the SDK refuses before sending fails its own group only, as a permanent rejection.
func TestSendInvalidPayloadRejectsItsGroupOnly(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	bad := notify.Content{Body: "b", ImageURL: "not a url"}
	good := notify.Content{Body: "b"}
	res := send(t, s, msg("d0", "tok-a-0000000000", bad), msg("d1", "tok-b-0000000000", good), msg("d2", "tok-c-0000000000", bad))
	wantCode(t, res[0], notify.EREJECTED)
	wantCode(t, res[1], "")
	wantCode(t, res[2], notify.EREJECTED)
	if n := sb.Recorder.Len(); n != 1 {
		t.Errorf("recorded %d, want 1", n)
	}
}

// A failure after the request was made is not the SDK refusing the payload: a 200 whose body is
// not FCM's answer may follow a delivery, so it is not a permanent rejection.
func TestSendUnreadableAnswerIsNotARefusal(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "<html>not json</html>")
	}))
	t.Cleanup(srv.Close)
	s, err := New(context.Background(), Config{HTTPClient: srv.Client(),
		Apps: map[string]App{"default": {ProjectID: project, Endpoint: srv.URL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := send(t, s, msg("d0", "tok-a-0000000000", notify.Content{Body: "b"}),
		msg("d1", "tok-b-0000000000", notify.Content{Body: "b", ImageURL: "not a url"}))
	wantCode(t, res[0], notify.EINTERNAL)
	wantCode(t, res[1], notify.EREJECTED)
	if n := requests.Load(); n != 1 {
		t.Errorf("%d requests, want 1 (none for the refused payload)", n)
	}
}

// Each request of the sender's own client has its own deadline, headers and body alike: a
// request the server leaves hanging is given up after requestTimeout, and the SDK's retry
// sends it again well before the caller's deadline.
func TestSendRequestTimeout(t *testing.T) {
	defer func(d time.Duration) { requestTimeout = d }(requestTimeout)
	requestTimeout = 100 * time.Millisecond
	for _, stall := range []string{"headers", "body"} {
		t.Run(stall, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client close the connection
				if stall == "body" {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"name":`)
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done(): // the client gave up on it
				case <-time.After(3 * time.Second):
					t.Errorf("request %s still open after 3 s", r.URL.Path)
				}
			}))
			t.Cleanup(srv.Close)
			s, err := New(context.Background(), Config{Apps: map[string]App{"default": {ProjectID: project, Endpoint: srv.URL + "/v1"}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			res, err := s.Send(ctx, []notify.OutboundMessage{msg("d0", "tok-a-0000000000", notify.Content{Body: "b"})})
			if err != nil {
				t.Fatal(err)
			}
			wantCode(t, res[0], notify.EUNAVAILABLE)
			if n := requests.Load(); n < 2 {
				t.Errorf("%d requests before the caller's deadline, want the first given up and retried", n)
			}
		})
	}
}

// In a chunk of many sends, the request that hangs is given up and retried on its own: the
// deadline ends that request, not its worker's later ones nor another worker's, and every
// other token is sent with one request.
func TestSendRequestTimeoutInAChunk(t *testing.T) {
	defer func(d time.Duration) { requestTimeout = d }(requestTimeout)
	requestTimeout = 200 * time.Millisecond
	var mu sync.Mutex
	requests := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Message struct{ Token string } `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tok := body.Message.Token
		mu.Lock()
		requests[tok]++
		first := requests[tok] == 1
		mu.Unlock()
		if tok == "tok-stall-0000000" && first {
			select {
			case <-r.Context().Done(): // the client gave up on it
			case <-time.After(3 * time.Second):
				t.Errorf("the stalled request still open after 3 s")
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"name":"projects/%s/messages/%s"}`, project, tok)
	}))
	t.Cleanup(srv.Close)
	s, err := New(context.Background(), Config{Apps: map[string]App{"default": {ProjectID: project, Endpoint: srv.URL + "/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	msgs := make([]notify.OutboundMessage, 3*sdkWorkers)
	for i := range msgs {
		tok := fmt.Sprintf("tok-%04d-0000000", i)
		if i == 1 {
			tok = "tok-stall-0000000"
		}
		msgs[i] = msg(fmt.Sprintf("d%d", i), tok, notify.Content{Body: "b"})
	}
	for _, r := range send(t, s, msgs...) {
		wantCode(t, r, "")
	}
	mu.Lock()
	defer mu.Unlock()
	for tok, n := range requests {
		want := 1
		if tok == "tok-stall-0000000" {
			want = 2
		}
		if n != want {
			t.Errorf("%s: %d requests, want %d", tok, n, want)
		}
	}
	if len(requests) != len(msgs) {
		t.Errorf("%d tokens requested, want %d", len(requests), len(msgs))
	}
}
