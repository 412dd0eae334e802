package apns

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sideshow/apns2/token"

	"herald/internal/notify"
	"herald/internal/sandbox"
)

const (
	topic  = "com.example.herald"
	keyID  = "KEY1234567"
	teamID = "TEAM123456"
)

// setup starts a sandbox that trusts a fresh key and a Sender for app "default" signing with it.
func setup(t *testing.T) (*Sender, *sandbox.Server) {
	t.Helper()
	sb := startSandbox(t)
	p8, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sb.TrustAPNsKey(keyID, teamID, pub)
	return newSender(t, sb, p8, teamID), sb
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

func newSender(t testing.TB, sb *sandbox.Server, p8 []byte, team string) *Sender {
	t.Helper()
	s, err := New(Config{Apps: map[string]App{"default": {Topic: topic, KeyID: keyID, TeamID: team, KeyP8: p8,
		Endpoint: sb.TLSURL(), RootCAs: sb.CertPool()}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func msg(id, tok string, c notify.Content) notify.OutboundMessage {
	return notify.OutboundMessage{DeliveryID: id, NotificationID: "n_1", Channel: notify.ChannelPush, Address: tok,
		App: "default", Environment: "production", Content: c, CollapseID: "n_1", Priority: notify.PriorityHigh, TTL: time.Hour}
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
		t.Errorf("%s: accepted without an apns-id", r.DeliveryID)
	}
}

func TestSendMixedBatch(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	c := notify.Content{Title: "Order shipped", Body: "On its way", Data: map[string]string{"order": "42"}, Link: "myapp://orders/42"}
	msgs := []notify.OutboundMessage{
		msg("d0", "aaaa000000000000", c),
		msg("d1", "unregistered-0000000000", c),
		msg("d2", "invalid-0000000000", c),
		msg("d3", "bbbb000000000000", c),
		msg("d4", "", c),
		{DeliveryID: "d5", Address: "cccc000000000000", App: "nope", Content: c},
	}
	msgs[3].Environment = "sandbox" // one endpoint serves both environments here
	res := send(t, s, msgs...)
	for i, code := range []string{"", notify.EDEADADDRESS, notify.EDEADADDRESS, "", notify.EREJECTED, notify.EREJECTED} {
		wantCode(t, res[i], code)
	}
	for _, i := range []int{1, 2} {
		if strings.Contains(res[i].Err.Error(), msgs[i].Address) {
			t.Errorf("error text contains the raw token: %v", res[i].Err)
		}
	}

	got := sb.Recorder.List("apns", "aaaa000000000000")
	if len(got) != 1 {
		t.Fatalf("recorded %+v", got)
	}
	d := got[0]
	if d.App != topic || d.CollapseID != "n_1" || d.Title != "Order shipped" || d.Body != "On its way" ||
		d.Data["order"] != "42" || d.Data["link"] != "myapp://orders/42" {
		t.Errorf("recorded %+v", d)
	}
	if d.MessageID != res[0].ProviderMessageID {
		t.Errorf("provider message id %q, sandbox recorded %q", res[0].ProviderMessageID, d.MessageID)
	}
	if n := sb.Recorder.Len(); n != 2 {
		t.Errorf("recorded %d deliveries, want 2", n)
	}
}

func TestSendThrottledThenAccepted(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	m := msg("d0", "throttle2-000000000", notify.Content{Body: "b"})
	wantCode(t, send(t, s, m)[0], notify.ETHROTTLED)
	wantCode(t, send(t, s, m)[0], notify.ETHROTTLED)
	wantCode(t, send(t, s, m)[0], "")
	if n := len(sb.Recorder.List("apns", m.Address)); n != 1 {
		t.Errorf("recorded %d, want 1", n)
	}
}

func TestSendUnavailableThenAccepted(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	m := msg("d0", "unavailable1-000000000", notify.Content{Body: "b"})
	wantCode(t, send(t, s, m)[0], notify.EUNAVAILABLE)
	wantCode(t, send(t, s, m)[0], "")
}

func TestSendWrongKeyIsAuthError(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	_, trusted, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sb.TrustAPNsKey(keyID, teamID, trusted)
	other, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := send(t, newSender(t, sb, other, teamID), msg("d0", "aaaa000000000000", notify.Content{Body: "b"}))[0]
	wantCode(t, r, notify.EAUTH)
	if !strings.Contains(r.Err.Error(), "InvalidProviderToken") {
		t.Errorf("err = %v, want InvalidProviderToken", r.Err)
	}
	if n := sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d with a wrong key", n)
	}
}

func TestSendWrongTeamIsAuthError(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	p8, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sb.TrustAPNsKey(keyID, teamID, pub)
	wantCode(t, send(t, newSender(t, sb, p8, "OTHERTEAM1"), msg("d0", "aaaa000000000000", notify.Content{Body: "b"}))[0], notify.EAUTH)
}

func TestSendCanceled(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.Send(ctx, []notify.OutboundMessage{msg("d0", "aaaa000000000000", notify.Content{Body: "b"})})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, res[0], notify.EUNAVAILABLE)
	if n := sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d after cancel", n)
	}
}

func TestSendTooMany(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	if _, err := s.Send(context.Background(), make([]notify.OutboundMessage, MaxBatch+1)); !notify.IsCode(err, notify.ETOOLARGE) {
		t.Fatalf("err = %v, want %s", err, notify.ETOOLARGE)
	}
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	p8, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := token.AuthKeyFromBytes(p8)
	if err != nil {
		t.Fatalf("apns2 cannot read the key: %v", err)
	}
	if !key.PublicKey.Equal(pub) {
		t.Error("returned public key does not match the private key")
	}
	if !strings.HasPrefix(string(p8), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("not a PKCS#8 PEM: %.40s", p8)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := New(Config{MaxConcurrency: -1, Apps: map[string]App{
		"a": {KeyP8: []byte("not a key")},
		"b": {Topic: "t", KeyID: "k", TeamID: "t", Endpoint: "http://plain"},
	}})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, want := range []string{`"a": topic`, `"a": key id`, `"a": key`, `"b": key`, `"b": endpoint`, "max concurrency"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestAppLogValueHidesKey(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("cfg", "app", App{Topic: "t", KeyP8: []byte("SECRET")})
	if strings.Contains(b.String(), "SECRET") || !strings.Contains(b.String(), "app.key=true") {
		t.Errorf("logged %s", b.String())
	}
}

func TestSendPayloadTooLarge(t *testing.T) {
	t.Parallel()
	s, sb := setup(t)
	r := send(t, s, msg("d0", "aaaa000000000000", notify.Content{Body: strings.Repeat("x", MaxPayload)}))[0]
	wantCode(t, r, notify.EREJECTED)
	if n := sb.Recorder.Len(); n != 0 {
		t.Errorf("recorded %d", n)
	}
}
