package pipeline_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sandbox"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	base, maxD := time.Second, time.Minute
	cases := []struct {
		name   string
		err    error
		count  int
		action pipeline.Action
		delay  time.Duration
	}{
		{"ok", nil, 1, pipeline.Done, 0},
		{"malformed body is dead-lettered at once", notify.Errorf(notify.EINVALID, "bad"), 1, pipeline.DeadLetter, 0},
		{"throttled backs off", notify.Errorf(notify.ETHROTTLED, "slow down"), 3, pipeline.Retry, 4 * time.Second},
		{"Retry-After wins", &notify.Error{Code: notify.EUNAVAILABLE, RetryAfter: 30 * time.Second}, 1, pipeline.Retry, 30 * time.Second},
		{"capped", notify.Errorf(notify.EUNAVAILABLE, "down"), 20, pipeline.Retry, time.Minute},
		{"unclassified errors are retried, never dropped", errors.New("boom"), 1, pipeline.Retry, time.Second},
	}
	for _, c := range cases {
		a, d := pipeline.Settle(c.err, c.count, base, maxD)
		if a != c.action || d != c.delay {
			t.Errorf("%s: Settle = (%v, %v), want (%v, %v)", c.name, a, d, c.action, c.delay)
		}
	}
}

// openStore opens a SQLite database in a temporary directory (closed when tb ends) and the
// Store on it, for the tests that build a pipeline on real adapters.
func openStore(tb testing.TB) (*sqlite.DB, *sqlite.Store) {
	tb.Helper()
	db, err := sqlite.Open(filepath.Join(tb.TempDir(), "h.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	box, _ := seal.New(make([]byte, 32))
	st, err := sqlite.NewStore(db, box)
	if err != nil {
		tb.Fatal(err)
	}
	return db, st
}

// setup builds a pipeline on real SQLite adapters, with no senders (bounce and cleanup need none).
func setup(t *testing.T) (*pipeline.Pipeline, *sqlite.Store) {
	t.Helper()
	db, st := openStore(t)
	q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: "cleanup", MaxReceiveCount: 5}}, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	p := pipeline.New(pipeline.Deps{Store: st, Queue: q, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{})
	return p, st
}

func TestBounceSuppressesPermanentBouncesAndComplaints(t *testing.T) {
	t.Parallel()
	p, st := setup(t)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	msgs := []notify.Message{
		{ID: "1", Body: sandbox.SESEvent("Bounce", "Permanent", []string{"gone@example.com", "Also.Gone@Example.com"}, "m1", at)},
		{ID: "2", Body: sandbox.SESEvent("Bounce", "Transient", []string{"full@example.com"}, "m2", at)},
		{ID: "3", Body: sandbox.SESEvent("Complaint", "", []string{"angry@example.com"}, "m3", at)},
		{ID: "4", Body: sandbox.SESEvent("Delivery", "", []string{"fine@example.com"}, "m4", at)},
		{ID: "5", Body: []byte(`{"Type":"Notification","Message":"not json"}`)},
		// Duplicates and out-of-order arrival are harmless: a later delivery never lifts a bounce.
		{ID: "6", Body: sandbox.SESEvent("Bounce", "Permanent", []string{"gone@example.com"}, "m1", at)},
		// SES names recipients as the header had them: display names and angle brackets are parsed
		// away, and one recipient that is no address does not stop the others being suppressed.
		{ID: "7", Body: sandbox.SESEvent("Bounce", "Permanent", []string{`"Carol Q" <Carol@Example.com>`, "not an address", "<dave@example.com>"}, "m7", at)},
		{ID: "8", Body: sandbox.SESEvent("Complaint", "", []string{"Erin <erin@example.com>"}, "m8", at)},
	}
	failures := p.Bounce()(context.Background(), msgs)
	if len(failures) != 1 || failures[0].MessageID != "5" || !notify.IsCode(failures[0].Err, notify.EINVALID) {
		t.Fatalf("failures = %+v, want only the malformed message 5 as EINVALID", failures)
	}
	key := func(a string) string { return notify.AddressKey(notify.ChannelEmail, a) }
	sup, err := st.Suppressed(context.Background(), []string{
		key("gone@example.com"), key("also.gone@example.com"), key("full@example.com"), key("angry@example.com"), key("fine@example.com"),
		key("carol@example.com"), key("dave@example.com"), key("erin@example.com"),
	})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{"gone@example.com": "bounce", "also.gone@example.com": "bounce", "angry@example.com": "complaint",
		"carol@example.com": "bounce", "dave@example.com": "bounce", "erin@example.com": "complaint"} {
		if s, ok := sup[key(addr)]; !ok || s.Reason != want {
			t.Errorf("%s: suppression %+v, want reason %q", addr, s, want)
		}
	}
	for _, addr := range []string{"full@example.com", "fine@example.com"} {
		if _, ok := sup[key(addr)]; ok {
			t.Errorf("%s suppressed; transient bounces and deliveries must not suppress", addr)
		}
	}
}

func TestFeedbackAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw, want string
		ok        bool
	}{
		{"carol@example.com", "carol@example.com", true},
		{`"Carol Q" <carol@example.com>`, "carol@example.com", true},
		{"Carol Q <carol@example.com>", "carol@example.com", true},
		{"<carol@example.com>", "carol@example.com", true},
		{"Carol@Example.COM", "carol@example.com", true},
		{`"Q, Carol" <Carol.Q+news@Example.com>`, "carol.q+news@example.com", true},
		{"  carol@example.com  ", "carol@example.com", true},
		{"=?UTF-8?B?7ZmN6ri464+Z?= <hong@example.com>", "hong@example.com", true},
		{"", "", false},
		{"not an address", "", false},
		{"carol@", "", false},
		{"<carol@example.com", "", false},
		{"a@example.com, b@example.com", "", false},
	} {
		got, ok := pipeline.FeedbackAddress(c.raw)
		if got != c.want || ok != c.ok {
			t.Errorf("FeedbackAddress(%q) = %q, %v; want %q, %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

func TestCleanupKeepsReRegisteredTokens(t *testing.T) {
	t.Parallel()
	p, st := setup(t)
	ctx := context.Background()
	sent := time.Now().Add(-time.Minute)
	_ = st.PutDevice(ctx, notify.Device{UserID: "u", Platform: notify.PlatformFCM, App: "default", Token: "tok-dead-000001", UpdatedAt: sent.Add(-time.Hour)})
	_ = st.PutDevice(ctx, notify.Device{UserID: "u", Platform: notify.PlatformFCM, App: "default", Token: "tok-fresh-00001", UpdatedAt: sent.Add(time.Second)})
	body := []byte(`{"dead_tokens":[{"token":"tok-dead-000001","seen_before":"` + sent.Format(time.RFC3339Nano) +
		`"},{"token":"tok-fresh-00001","seen_before":"` + sent.Format(time.RFC3339Nano) + `"}]}`)
	if f := p.Cleanup()(ctx, []notify.Message{{ID: "1", Body: body}}); len(f) != 0 {
		t.Fatalf("cleanup failed: %+v", f)
	}
	devs, _ := st.ListDevices(ctx, []string{"u"})
	if len(devs["u"]) != 1 || devs["u"][0].Token != "tok-fresh-00001" {
		t.Fatalf("devices = %+v, want only the token registered after the send", devs["u"])
	}
}

// TestCleanupRefusesWhatIsNotACleanup: a body the send stage never writes — null, {}, another
// service's envelope, an unknown key, an entry without its token or address — is refused
// (permanent, so dead-lettered with its reason), never acknowledged as zero work.
func TestCleanupRefusesWhatIsNotACleanup(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	for _, body := range []string{
		`null`, `{}`, `[]`, `"x"`,
		`{"Records":[{"eventSource":"aws:s3"}]}`,
		`{"Type":"Notification","Message":"{}"}`,
		`{"dead_tokens":[{"token":""}]}`,
		`{"suppress":[{"channel":"email"}]}`,
		`{"suppress":[{"channel":"fax","address":"x"}]}`,
		`{"dead_tokens":[{"token":"t1"}],"extra":1}`,
		`{"dead_tokens":[{"token":"t1"}]}{"dead_tokens":[]}`,
	} {
		f := p.Cleanup()(t.Context(), []notify.Message{{ID: "1", Body: []byte(body)}})
		if len(f) != 1 || notify.IsRetryable(f[0].Err) {
			t.Errorf("cleanup of %s: %+v, want one permanent failure", body, f)
		}
	}
}
