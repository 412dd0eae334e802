package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/sqlite"
)

// TestProducerMessagesKilledResumeAtRestart is the producer's path, as a service sending straight
// to its SQS ingest queue takes it: send requests put on the `demo` service's ingest queue with
// no attributes — a few with an idempotency key, most without (their notification is named by
// the message's id) — then `herald dev` started on them and killed with SIGKILL while it takes
// them in and sends, and started again. Every token is reached, every push of a request carries
// one collapse id (its notification's: an ingest message received again after the kill is the
// same notification, not a second one — naming a notification anew on each receive fails here in
// most runs), the keyed requests end SENT, and nothing is dead-lettered.
func TestProducerMessagesKilledResumeAtRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the herald binary; skipped with -short")
	}
	const (
		large, perLarge = 8, 250 // through the stage queues
		single          = 1500   // each a single push, the express path: ingest holds these in flight at the kill
	)
	// demo may read the queues' dead letters (/v1/admin/…).
	h := newSendKillHerald(t, strings.Replace(sendKillConfig, "api_keys: [dev-demo-key]", "api_keys: [dev-demo-key]\n    admin: true", 1))

	// The producer: requests written to the ingest queue before herald runs, as SQS would hold them.
	type request struct {
		key    string
		tokens []string
	}
	var reqs []request
	for i := range large + single {
		r := request{}
		n := 1
		if i < large {
			n = perLarge
		}
		if i%10 == 0 {
			r.key = fmt.Sprintf("producer-kill-%02d", i)
		}
		for j := range n {
			r.tokens = append(r.tokens, fmt.Sprintf("producer-kill-%02d-%04d", i, j))
		}
		reqs = append(reqs, r)
	}
	db, err := sqlite.Open(filepath.Join(h.data, "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	ingest := notify.IngestQueue("demo")
	q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: ingest, VisibilityTimeout: 10 * time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []notify.OutMessage
	for _, r := range reqs {
		recipients := make([]map[string]string, len(r.tokens))
		for j, tok := range r.tokens {
			recipients[j] = map[string]string{"fcm_token": tok}
		}
		body, _ := json.Marshal(map[string]any{"idempotency_key": r.key, "category": "transactional", "channels": []string{"push"},
			"content": map[string]string{"title": "Producer", "body": "straight to the queue"}, "recipients": recipients})
		msgs = append(msgs, notify.OutMessage{Body: body})
	}
	if err := q.Send(context.Background(), ingest, msgs...); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	total := large*perLarge + single
	h.start(t)
	atKill := h.killAfter(t, single/5)
	if atKill >= total {
		t.Skipf("all %d pushes were out before the kill landed: nothing was in flight", atKill)
	}

	restarted := time.Now()
	h.start(t)
	recordFile := filepath.Join(h.data, "sandbox-deliveries.jsonl")
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		seen := map[string]bool{}
		for _, r := range readKillRecord(t, recordFile) {
			seen[r.Address] = true
		}
		if len(seen) == total {
			break
		}
		if time.Since(restarted) > 2*time.Minute {
			t.Fatalf("%d of %d tokens reached two minutes after the restart (killed at %d pushes)\n%s", len(seen), total, atKill, h.logs.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range reqs {
		if r.key == "" {
			continue
		}
		h.awaitSent(t, client, notify.NotificationIDFor("demo", r.key, time.Time{}), restarted)
	}
	took := time.Since(restarted)
	if !strings.Contains(h.logs.String(), "released the work in flight when the last run stopped") {
		t.Errorf("the restart released nothing: the kill found no work in flight\n%s", h.logs.tail())
	}

	collapse := map[string]string{} // token → the collapse id its pushes carried
	pushes := map[string]int{}
	for _, rec := range readKillRecord(t, recordFile) {
		pushes[rec.Address]++
		if c, ok := collapse[rec.Address]; ok && c != rec.CollapseID {
			t.Errorf("token %s pushed under two collapse ids, %s and %s: one request became two notifications", maskForLog(rec.Address), c, rec.CollapseID)
		}
		collapse[rec.Address] = rec.CollapseID
	}
	ids := map[string]bool{}
	for i, r := range reqs {
		id := collapse[r.tokens[0]]
		if r.key != "" && id != notify.NotificationIDFor("demo", r.key, time.Time{}) {
			t.Errorf("request %d (key %s) pushed as %s, not its key's notification", i, r.key, id)
		}
		for _, tok := range r.tokens {
			if collapse[tok] != id {
				t.Fatalf("request %d pushed under %s and %s: one request became two notifications", i, id, collapse[tok])
			}
		}
		if ids[id] {
			t.Errorf("requests share notification %s", id)
		}
		ids[id] = true
	}
	twice := 0
	for _, n := range pushes {
		if n > 1 {
			twice++
		}
	}
	var queues struct {
		Queues []struct {
			Name        string `json:"name"`
			DeadLetters int    `json:"dead_letters"`
		} `json:"queues"`
	}
	if code := killAPI(client, http.MethodGet, h.base+"/v1/admin/queues", nil, &queues); code != http.StatusOK || len(queues.Queues) == 0 {
		t.Fatalf("GET /v1/admin/queues: %d %+v", code, queues)
	}
	for _, qv := range queues.Queues {
		if qv.DeadLetters > 0 {
			t.Errorf("%d messages dead-lettered from %s", qv.DeadLetters, qv.Name)
		}
	}
	t.Logf("%d requests (%d tokens) from the producer, killed at %d pushes; every token reached and the keyed requests SENT %v after the restart; %d tokens pushed twice",
		len(reqs), total, atKill, took.Round(time.Millisecond), twice)
	// Only what was in flight at the kill goes again: the realtime lane's send workers (8) × 500,
	// and the express sends being made.
	if twice > 8*500+single {
		t.Errorf("%d tokens pushed twice: more than was in flight at the kill", twice)
	}
}
