package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

// Every stage's queue message decoder is fuzzed through the stage's handler, on a real SQLite
// store that holds one notification the seeds name (so mutations of real messages reach past
// the decoder). The invariant: no panic, and a message either succeeds or fails permanently
// (EINVALID and the like: dead-lettered at once). A retryable failure for a message that can
// never succeed would be tried until the queue gives up, five times the work and a late DLQ.
//
// `make fuzz` runs each target; plain `go test` runs the seeds.

// acceptAll is a sender for one provider that accepts every message.
type acceptAll struct{ prov notify.Provider }

func (a acceptAll) Provider() notify.Provider { return a.prov }
func (acceptAll) MaxBatch() int               { return 500 }
func (acceptAll) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i] = notify.SendResult{DeliveryID: m.DeliveryID, ProviderMessageID: "fuzz-" + m.DeliveryID}
	}
	return out, nil
}

// captureQueue keeps the bodies sent to each queue while keep is set, and drops them after.
type captureQueue struct {
	mu     sync.Mutex
	keep   bool
	bodies map[string][][]byte
}

func (q *captureQueue) Send(_ context.Context, queue string, msgs ...notify.OutMessage) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keep {
		for _, m := range msgs {
			q.bodies[queue] = append(q.bodies[queue], m.Body)
		}
	}
	return nil
}

// fuzzWorld is a pipeline on a SQLite store with one notification sent through ingest and
// prepare; seeds holds what each stage enqueued for it, by queue.
type fuzzWorld struct {
	p     *pipeline.Pipeline
	st    *sqlite.Store
	seeds map[string][][]byte
}

const fuzzService = "demo"

func newFuzzWorld(f testing.TB) *fuzzWorld {
	f.Helper()
	_, st := openStore(f)
	q := &captureQueue{keep: true, bodies: map[string][][]byte{}}
	var senders []notify.Sender
	for _, p := range []notify.Provider{notify.ProviderFCM, notify.ProviderAPNs, notify.ProviderSES, notify.ProviderTwilio} {
		senders = append(senders, acceptAll{p})
	}
	p := pipeline.New(pipeline.Deps{Store: st, Queue: q, Senders: senders, Events: &sink{},
		// The stage path: the express path would leave nothing on the stage queues to fuzz.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pipeline.Config{ExpressMaxRecipients: -1})
	ctx := context.Background()
	if err := st.PutDevice(ctx, notify.Device{UserID: "fz-user", Token: "fcm-fz-user-0001", App: "default",
		Platform: notify.PlatformFCM, Environment: "production", UpdatedAt: time.Now()}); err != nil {
		f.Fatal(err)
	}
	req := `{"idempotency_key":"fuzz-seed","channels":["push","email","sms","inbox"],
		"content":{"title":"Hi","body":"seed"},
		"recipients":[{"user_id":"fz-user"},{"fcm_token":"fcm-direct-0001"},{"email":"fz@example.com"},{"phone":"+15005550006"}]}`
	run := func(h pipeline.Handler, body []byte) {
		if fails := h(ctx, []notify.Message{{ID: "seed", Body: body}}); len(fails) != 0 {
			f.Fatalf("seed %s: %v", body, fails[0].Err)
		}
	}
	run(p.Ingest(fuzzService, nil), []byte(req))
	for _, b := range q.bodies["prepare-realtime"] {
		run(p.Prepare(), b)
	}
	q.keep = false
	return &fuzzWorld{p: p, st: st, seeds: q.bodies}
}

// addSeeds adds the bodies the world's stages enqueued on queue, and more.
func (w *fuzzWorld) addSeeds(f *testing.F, queue string, more ...string) {
	if queue != "" && len(w.seeds[queue]) == 0 {
		f.Fatalf("the seed notification enqueued nothing on %s", queue)
	}
	for _, b := range w.seeds[queue] {
		f.Add(b)
	}
	for _, s := range more {
		f.Add([]byte(s))
	}
}

// permanentOrNone checks a one-message batch's failures: none, or the message failing with an
// error that is not retried.
func permanentOrNone(t *testing.T, body []byte, fails []pipeline.ItemFailure) {
	t.Helper()
	if len(fails) == 0 {
		return
	}
	if len(fails) != 1 || fails[0].MessageID != "fuzz" {
		t.Fatalf("%q: failures %+v, want at most the one message", body, fails)
	}
	err := fails[0].Err
	var e *notify.Error
	if !errors.As(err, &e) || notify.IsRetryable(err) {
		t.Fatalf("%q failed with %v (code %s): a message that can never succeed must fail permanently, not be retried",
			body, err, notify.ErrorCode(err))
	}
}

func fuzzStage(f *testing.F, h pipeline.Handler) {
	f.Fuzz(func(t *testing.T, body []byte) {
		permanentOrNone(t, body, h(context.Background(), []notify.Message{{ID: "fuzz", Body: body}}))
	})
}

// Malformed bodies every stage gets as seeds.
var malformed = []string{"", "null", "[]", "{", `"x"`, "{}", `{"notification_id":null}`, "\xff\xfe", `{"a":1}{"b":2}`}

func FuzzIngestMessage(f *testing.F) {
	w := newFuzzWorld(f)
	b, err := os.ReadFile("../../events/ingest/send-request.json")
	if err != nil {
		f.Fatal(err)
	}
	w.addSeeds(f, "", append(malformed, string(b),
		`{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"a"}]}`,
		`{"channels":["push"],"content":{"body":"x"},"recipients":[{"user_id":"a"}],"send_at":"2999-01-01T00:00:00Z"}`,
		`{"channels":["email"],"content":{"body":"x"},"recipients":[{"email":"not-an-address"}]}`,
		`{"channels":["push"],"content":{"body":"x"},"recipients":[],"unknown":1}`,
		`{"fire":"n_0123456789abcdefghjkmnpqrs"}`, `{"fire":""}`, `{"fire":1}`,
	)...)
	fuzzStage(f, w.p.Ingest(fuzzService, nil))
}

func FuzzPrepareMessage(f *testing.F) {
	w := newFuzzWorld(f)
	w.addSeeds(f, "prepare-realtime", append(malformed,
		`{"notification_id":"n_unknown","chunk":0}`, `{"notification_id":"n_unknown","chunk":-1}`,
		`{"notification_id":"n_unknown","chunk":1e3}`, `{"notification_id":"n_unknown","chunk":"0"}`,
	)...)
	// A chunk whose first recipient's index overflows int must not wrap around to a real chunk:
	// 2^62 × 500 is 0 modulo 2^64.
	id := notify.NotificationIDFor(fuzzService, "fuzz-seed", time.Time{})
	f.Add([]byte(`{"notification_id":"` + id + `","chunk":4611686018427387904}`))
	f.Add([]byte(`{"notification_id":"` + id + `","chunk":9223372036854775807}`))
	f.Add([]byte(`{"notification_id":"` + id + `","chunk":99}`))
	fuzzStage(f, w.p.Prepare())
}

func FuzzSendMessage(f *testing.F) {
	w := newFuzzWorld(f)
	id := notify.NotificationIDFor(fuzzService, "fuzz-seed", time.Time{})
	w.addSeeds(f, "send-realtime", append(malformed,
		`{"notification_id":"`+id+`","provider":"pigeon","items":[{"id":"d_1","address":"a"}]}`,
		`{"notification_id":"`+id+`","provider":"fcm","batch":"b1","items":[{"id":"d_1","address":"fcm-x"}]}`,
		`{"notification_id":"`+id+`","provider":"fcm","items":[]}`,
		`{"notification_id":"`+id+`","provider":"fcm","hold_until":"2999-01-01T00:00:00Z","items":[]}`,
		`{"notification_id":"`+id+`","provider":"fcm","hold_until":"yesterday","items":[]}`,
		`{"notification_id":"n_unknown","provider":"fcm","items":[{"id":"d_1","address":"a"}]}`,
	)...)
	fuzzStage(f, w.p.Send())
}

func FuzzRecordMessage(f *testing.F) {
	w := newFuzzWorld(f)
	id := notify.NotificationIDFor(fuzzService, "fuzz-seed", time.Time{})
	w.addSeeds(f, "", append(malformed, `{"notification_id":"`+id+`"}`, `{"notification_id":"n_unknown"}`,
		`{"notification_id":""}`)...)
	fuzzStage(f, w.p.Record())
}

func FuzzCleanupMessage(f *testing.F) {
	w := newFuzzWorld(f)
	w.addSeeds(f, "", append(malformed,
		`{"dead_tokens":[{"token":"fcm-fz-user-0001","seen_before":"2999-01-01T00:00:00Z"}]}`,
		`{"suppress":[{"channel":"email","address":"Gone@Example.com","reason":"bounced"}]}`,
		`{"suppress":[{"channel":"sms","address":"+15005550006","reason":"provider_opt_out"}]}`,
		`{"dead_tokens":[{"token":"x","seen_before":"not a time"}]}`,
		`{"dead_tokens":{"token":"x"}}`,
	)...)
	fuzzStage(f, w.p.Cleanup())
}

// FuzzBounceMessage fuzzes the SES feedback parser (SNS-wrapped and raw), seeded with the
// envelopes' bodies in events/bounce.
func FuzzBounceMessage(f *testing.F) {
	w := newFuzzWorld(f)
	files, _ := filepath.Glob("../../events/bounce/*.json")
	if len(files) == 0 {
		f.Fatal("no events/bounce files")
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var ev struct{ Records []struct{ Body string } }
		if err := json.Unmarshal(b, &ev); err != nil {
			f.Fatal(err)
		}
		for _, r := range ev.Records {
			f.Add([]byte(r.Body))
			var env struct{ Message string }
			if json.Unmarshal([]byte(r.Body), &env) == nil && env.Message != "" {
				f.Add([]byte(env.Message)) // raw message delivery: the SES event itself
			}
		}
	}
	w.addSeeds(f, "", append(malformed,
		`{"Type":"SubscriptionConfirmation","TopicArn":"arn:aws:sns:us-east-1:0:t","Message":"confirm"}`,
		`{"Type":"Notification","Message":"{\"notificationType\":\"Bounce\"}"}`,
		`{"Type":"Notification","Message":"{\"eventType\":\"Complaint\",\"complaint\":{\"complainedRecipients\":[{\"emailAddress\":\"\"}]}}"}`,
		`{"Type":"Notification","Message":"not json"}`,
		`{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bouncedRecipients":[{"emailAddress":"x@y"}]}}`,
	)...)
	fuzzStage(f, w.p.Bounce())
}

// campaignFirer is a CampaignFirer for which every id starting with c_ is a campaign.
type campaignFirer struct{ fired int }

func (c *campaignFirer) FireCampaign(_ context.Context, _ string, fm notify.FireMessage) (bool, error) {
	if !strings.HasPrefix(fm.Fire, "c_") {
		return false, nil
	}
	c.fired++
	return true, nil
}

// FuzzCampaignFire fuzzes the ingest queue as the AWS runtime reads it, where a reserved
// campaign's fire arrives beside send requests: a fire for a campaign (with the send_at it was
// armed for) goes to the campaigns and nowhere else, one without it is refused, everything else
// goes to ingest.
func FuzzCampaignFire(f *testing.F) {
	w := newFuzzWorld(f)
	w.addSeeds(f, "", append(malformed,
		`{"fire":"c_spring_sale"}`, `{"fire":"c_spring_sale","at":"2026-12-01T09:00:00Z"}`,
		`{"fire":"c_spring_sale","at":"tomorrow"}`, `{"fire":"n_0123456789abcdefghjkmnpqrs"}`,
		`{"fire":["c_x"]}`, `{"idempotency_key":"fire","channels":["push"],"content":{"body":"fire"},"recipients":[{"user_id":"fire"}]}`,
	)...)
	c := &campaignFirer{}
	h := w.p.IngestWithCampaigns(fuzzService, nil, c)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := c.fired
		fails := h(context.Background(), []notify.Message{{ID: "fuzz", Body: body}})
		permanentOrNone(t, body, fails)
		var fm notify.FireMessage
		isFire := bytes.Contains(body, []byte(`"fire"`)) && json.Unmarshal(body, &fm) == nil && strings.HasPrefix(fm.Fire, "c_") && fm.At != nil
		if got := c.fired - before; (got == 1) != isFire || got > 1 {
			t.Fatalf("%q: campaign fired %d times, want %d", body, got, map[bool]int{true: 1}[isFire])
		}
		if isFire && len(fails) != 0 {
			t.Fatalf("%q: a campaign's fire failed: %v", body, fails[0].Err)
		}
	})
}

// TestPrepareRejectsOverflowingChunk: a chunk number whose first recipient index overflows is
// out of range, not a second copy of the chunk it wraps around to (2^62 × 500 is 0 modulo 2^64),
// which would create that chunk's deliveries and counts again under another number.
func TestPrepareRejectsOverflowingChunk(t *testing.T) {
	t.Parallel()
	w := newFuzzWorld(t)
	ctx := context.Background()
	id := notify.NotificationIDFor(fuzzService, "fuzz-seed", time.Time{})
	before, err := w.st.GetNotification(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []string{"4611686018427387904", "9223372036854775807", "36893488147419103"} {
		body := []byte(`{"notification_id":"` + id + `","chunk":` + chunk + `}`)
		fails := w.p.Prepare()(ctx, []notify.Message{{ID: "m", Body: body}})
		if len(fails) != 1 || !notify.IsCode(fails[0].Err, notify.EINVALID) {
			t.Fatalf("chunk %s: failures %+v, want EINVALID", chunk, fails)
		}
	}
	after, err := w.st.GetNotification(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if b, a := before.Stats.Sum(), after.Stats.Sum(); a != b {
		t.Fatalf("stats moved from %+v to %+v", b, a)
	}
}
