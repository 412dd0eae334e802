package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/guregu/dynamo/v2"

	"herald/internal/ddb"
	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/stackbox/run"
)

// sendToQueue puts body on a template queue signed as principal.
func (s *scenarios) sendToQueue(t *testing.T, principal, queue, body string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.box.SQSClient(principal).SendMessage(ctx, &awssqs.SendMessageInput{
		QueueUrl: aws.String(s.box.Queue(queue).URL), MessageBody: aws.String(body)})
	return err
}

func sendRequest(key, user string, channels ...string) map[string]any {
	return map[string]any{
		"idempotency_key": key, "channels": channels,
		"content":    map[string]any{"title": "Stack in a box", "body": "Message " + key},
		"recipients": []any{map[string]any{"user_id": user}},
	}
}

// idOf returns the id a send request has (the API answers a known idempotency key with it).
func (s *scenarios) idOf(t *testing.T, req map[string]any) string {
	t.Helper()
	code, out := s.call(t, s.service, "", "POST", "/v1/notifications", req)
	if code != 202 && code != 200 {
		t.Fatalf("POST /v1/notifications: %d %v, want 202 (or 200 for a known key)", code, out)
	}
	id, _ := out["id"].(string)
	if id == "" {
		t.Fatalf("no id in %v", out)
	}
	return id
}

func (s *scenarios) waitStatus(t *testing.T, id, want string, d time.Duration) map[string]any {
	t.Helper()
	var last map[string]any
	waitFor(t, d, "notification "+id+" "+want, func() (bool, string) {
		st, v := s.notificationStatus(t, id)
		last = v
		return st == want, st
	})
	return last
}

func (s *scenarios) device(t *testing.T, user, token string) {
	t.Helper()
	s.mustCall(t, 200, "PUT", "/v1/users/"+user+"/devices/"+token, map[string]any{"platform": "fcm"})
}

func (s *scenarios) pushes(token string) int { return len(s.box.Sandbox.Recorder.List("fcm", token)) }

// producerQueue: the orders service's producer sends a SendRequest straight to its ingest
// queue, as its role; the queue's policy (or, in templates without per-service policies, the
// producer's own account) lets it.
func (s *scenarios) producerQueue(t *testing.T) {
	token := "fcm-stackbox-carol"
	s.device(t, "carol", token)
	req := sendRequest("stackbox-producer-1", "carol", "push")
	raw, _ := json.Marshal(req)
	if err := s.sendToQueue(t, s.producer, "ingest-orders", string(raw)); err != nil {
		t.Fatalf("the producer's SendMessage: %v", err)
	}
	waitFor(t, 30*time.Second, "carol's push", func() (bool, string) { return s.pushes(token) == 1, fmt.Sprint(s.pushes(token)) })
	// The API answers the same idempotency key with the notification the queue made.
	id := s.idOf(t, req)
	s.waitStatus(t, id, "SENT", 30*time.Second)
	if n := s.pushes(token); n != 1 {
		t.Fatalf("carol got %d pushes, want 1", n)
	}

	// Batches: two requests in one queue message, two more in one POST /v1/notifications/batch.
	var reqs []map[string]any
	for i, user := range []string{"batch-1", "batch-2", "batch-3", "batch-4"} {
		s.device(t, user, "fcm-stackbox-"+user)
		reqs = append(reqs, sendRequest(fmt.Sprintf("stackbox-batch-%d", i), user, "push"))
	}
	raw, _ = json.Marshal(map[string]any{"notifications": reqs[:2]})
	if err := s.sendToQueue(t, s.producer, "ingest-orders", string(raw)); err != nil {
		t.Fatalf("the producer's SendMessage of a batch: %v", err)
	}
	out := s.mustCall(t, 202, "POST", "/v1/notifications/batch", map[string]any{"notifications": reqs[2:]})
	if ns, _ := out["notifications"].([]any); len(ns) != 2 {
		t.Fatalf("POST /v1/notifications/batch answered %v", out)
	}
	for _, r := range reqs {
		s.waitStatus(t, s.idOf(t, r), "SENT", 30*time.Second)
	}
	for _, user := range []string{"batch-1", "batch-2", "batch-3", "batch-4"} {
		if n := s.pushes("fcm-stackbox-" + user); n != 1 {
			t.Fatalf("%s got %d pushes, want 1", user, n)
		}
	}
}

func sendAt(d time.Duration) time.Time { return time.Now().Add(d).Truncate(time.Second).UTC() }

// reservedRescheduled: a send reserved two minutes out, moved a minute later with PATCH,
// goes out once, when the moved schedule fires (the scheduler's clock is played forward to
// it); the first time's fire, sent late by hand, is stale and does nothing.
func (s *scenarios) reservedRescheduled(t *testing.T) {
	token := "fcm-stackbox-dave"
	s.device(t, "dave", token)
	req := sendRequest("stackbox-reserved-1", "dave", "push")
	first := sendAt(2 * time.Minute)
	req["send_at"] = first
	out := s.mustCall(t, 202, "POST", "/v1/notifications", req)
	id, _ := out["id"].(string)
	if st, _ := out["status"].(string); st != "SCHEDULED" {
		t.Fatalf("a reserved send answered %v, want SCHEDULED", out)
	}
	later := first.Add(time.Minute)
	// The API puts the send on the ingest queue; ingest stores it, then arms its schedule. The
	// PATCH waits for that: one that lands between the two is overwritten by ingest's arming.
	group := s.box.Function("ingest").Getenv("HERALD_SCHEDULE_GROUP")
	waitFor(t, 10*time.Second, "ingest to arm "+id, func() (bool, string) {
		sc, ok := s.box.Sched.Schedule(group, id)
		return ok, fmt.Sprint(sc.ScheduleExpression)
	})
	s.mustCall(t, 200, "PATCH", "/v1/notifications/"+id, map[string]any{"send_at": later})
	sc, ok := s.box.Sched.Schedule(group, id)
	if want := "at(" + later.Format("2006-01-02T15:04:05") + ")"; !ok || sc.ScheduleExpression != want {
		t.Fatalf("the schedule of %s after PATCH: %+v, want %s", id, sc, want)
	}
	stale := fmt.Sprintf(`{"fire": %q, "at": %q}`, id, first.Format(time.RFC3339))
	if err := s.sendToQueue(t, s.schedulerRole(t), "ingest-orders", stale); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if st, _ := s.notificationStatus(t, id); st != "SCHEDULED" || s.pushes(token) != 0 {
		t.Fatalf("after the first time's fire: %s with %d pushes, want SCHEDULED and none", st, s.pushes(token))
	}
	s.box.AdvanceSchedulerClock(time.Until(later) + time.Second)
	v := s.waitStatus(t, id, "SENT", 30*time.Second)
	if n := s.pushes(token); n != 1 {
		t.Fatalf("dave got %d pushes, want 1", n)
	}
	// Fired, it went through prepare, send and record: its batch was claimed whole, and send
	// stored each delivery with its outcome (RecordBatch), which the api function lists — one
	// per device dave has (other scenarios may have registered more).
	ds, _ := v["deliveries"].([]any)
	if len(ds) == 0 {
		t.Fatalf("deliveries of %s: none listed, want dave's pushes", id)
	}
	for _, x := range ds {
		if d, _ := x.(map[string]any); d["status"] != "SENT" || d["attempts"] != float64(1) || d["user_id"] != "dave" {
			t.Fatalf("a delivery of %s: %v, want dave's, SENT at the first attempt", id, d)
		}
	}
}

// store opens the stack's tables directly, for setup only (not part of the IAM proof).
func (s *scenarios) store(t *testing.T) *ddb.Store {
	t.Helper()
	api := s.box.Function("api")
	var keyName string
	if c, ok := s.box.Config["contacts"].(map[string]any); ok {
		keyName, _ = c["encryption_key_secret"].(string)
	}
	box, err := seal.FromBase64(s.box.Secrets.Value(keyName))
	if err != nil {
		t.Fatal(err)
	}
	cfg := aws.Config{Region: run.Region, Credentials: credentials.NewStaticCredentialsProvider("stackbox", "stackbox", "")}
	db := dynamo.New(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(os.Getenv("HERALD_DYNAMODB_ENDPOINT"))
		o.DisableValidateResponseChecksum = true
	})
	st, err := ddb.New(db, ddb.TablesWithPrefix(api.Getenv("HERALD_TABLE_PREFIX")), box, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// campaign: 5,000 devices of the default FCM app get one push each from a campaign that is
// paused through the API while it runs, resumed, and completes.
func (s *scenarios) campaign(t *testing.T) {
	const devices = 5000
	st := s.store(t)
	began := time.Now()
	// phase logs each step's time since the scenario began: when a wait fails, the log shows
	// which steps were slow before it.
	phase := func(what string) { t.Logf("campaign +%s: %s", time.Since(began).Round(time.Millisecond), what) }
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= devices {
					return
				}
				d := notify.Device{UserID: fmt.Sprintf("cu%04d", i), Platform: notify.PlatformFCM, App: "default",
					Token: fmt.Sprintf("fcm-stackbox-campaign-%05d", i), UpdatedAt: time.Now()}
				if err := st.PutDevice(context.Background(), d); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("register the campaign's devices: %v", err)
	}
	phase(fmt.Sprintf("%d devices registered", devices))
	out := s.mustCall(t, 202, "POST", "/v1/campaigns", map[string]any{
		"idempotency_key": "stackbox-campaign-1", "category": "transactional", "channels": []string{"push"},
		"content":  map[string]any{"title": "Stack in a box", "body": "A campaign"},
		"audience": map[string]any{"sources": []any{map[string]any{"kind": "app_devices", "app": "default"}}},
	})
	id, _ := out["id"].(string)
	phase("campaign " + id + " created")
	paused := false
	for tries := 0; tries < 40 && !paused; tries++ {
		code, _ := s.call(t, s.service, "", "POST", "/v1/campaigns/"+id+"/pause", nil)
		paused = code == 200
		if !paused {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !paused {
		t.Fatalf("campaign %s could not be paused", id)
	}
	var sentAtPause int
	waitFor(t, 30*time.Second, "the paused campaign's execution to stop", func() (bool, string) {
		for _, x := range s.box.States.Executions() {
			if strings.Contains(x.Input, id) && x.Status == "RUNNING" {
				return false, x.Name + " RUNNING"
			}
		}
		return true, ""
	})
	sentAtPause = s.campaignPushes(devices)
	phase(fmt.Sprintf("paused; its execution has stopped (%d pushes so far)", sentAtPause))
	time.Sleep(2 * time.Second)
	if v := s.mustCall(t, 200, "GET", "/v1/campaigns/"+id, nil); v["state"] != "PAUSED" {
		t.Fatalf("after pause: %v, want PAUSED", v["state"])
	}
	s.mustCall(t, 200, "POST", "/v1/campaigns/"+id+"/resume", nil)
	phase("resumed")
	waitFor(t, 180*time.Second, "campaign "+id+" COMPLETED", func() (bool, string) {
		v := s.mustCall(t, 200, "GET", "/v1/campaigns/"+id, nil)
		return v["state"] == "COMPLETED", fmt.Sprint(v["state"], " ", s.campaignPushes(devices), " pushes")
	})
	phase(fmt.Sprintf("COMPLETED (%d pushes so far)", s.campaignPushes(devices)))
	// COMPLETED means every chunk is dispatched, not sent. A batch whose first attempt failed
	// after its claim is sent once its lease (60 s) has ended: the wait allows for that.
	waitFor(t, 150*time.Second, "every device's push", func() (bool, string) {
		n := s.campaignPushes(devices)
		unreached, repeated := s.campaignReach(devices)
		if n == devices {
			return true, ""
		}
		// What a failure reports: which devices, and what the campaign counted for them.
		_, v := s.call(t, s.service, "", "GET", "/v1/campaigns/"+id, nil)
		stats, _ := json.Marshal(map[string]any{"state": v["state"], "totals": v["totals"], "progress": v["progress"]})
		return false, fmt.Sprintf("%d pushes, %d devices without one (%s), %d with more than one; campaign %s; queues %s",
			n, unreached, s.unreachedDevices(devices), repeated, stats, s.queueDepths(t, "prepare-bulk", "send-bulk", "record-bulk"))
	})
	phase("every device pushed")
	if unreached, repeated := s.campaignReach(devices); unreached+repeated > 0 {
		t.Fatalf("%d devices got no push and %d more than one; each must get exactly one", unreached, repeated)
	}
	execs := 0
	for _, x := range s.box.States.Executions() {
		if strings.Contains(x.Input, id) || strings.Contains(x.Name, id) {
			execs++
		}
	}
	t.Logf("campaign %s: %d pushes before the pause took, %d executions", id, sentAtPause, execs)
}

// campaignReach counts the campaign's devices with no push and with more than one.
func (s *scenarios) campaignReach(devices int) (unreached, repeated int) {
	per := map[string]int{}
	for _, d := range s.box.Sandbox.Recorder.List("fcm", "") {
		per[d.Address]++
	}
	for i := range devices {
		switch n := per[fmt.Sprintf("fcm-stackbox-campaign-%05d", i)]; {
		case n == 0:
			unreached++
		case n > 1:
			repeated++
		}
	}
	return unreached, repeated
}

// unreachedDevices names the campaign's devices without a push: how many, and their index
// ranges (at most 10).
func (s *scenarios) unreachedDevices(devices int) string {
	got := map[string]bool{}
	for _, d := range s.box.Sandbox.Recorder.List("fcm", "") {
		got[d.Address] = true
	}
	var ranges []string
	for i := 0; i < devices && len(ranges) < 10; i++ {
		if got[fmt.Sprintf("fcm-stackbox-campaign-%05d", i)] {
			continue
		}
		j := i
		for j+1 < devices && !got[fmt.Sprintf("fcm-stackbox-campaign-%05d", j+1)] {
			j++
		}
		ranges = append(ranges, fmt.Sprintf("%d–%d", i, j))
		i = j
	}
	return strings.Join(ranges, ", ")
}

// queueDepths is what GET /v1/admin/queues says of the named queues (and their DLQs).
func (s *scenarios) queueDepths(t *testing.T, names ...string) string {
	_, v := s.call(t, s.service, "", "GET", "/v1/admin/queues", nil)
	qs, _ := v["queues"].([]any)
	var out []string
	for _, q := range qs {
		m, _ := q.(map[string]any)
		name, _ := m["name"].(string)
		for _, n := range names {
			if strings.HasPrefix(name, n) {
				b, _ := json.Marshal(m)
				out = append(out, string(b))
			}
		}
	}
	if len(out) == 0 {
		b, _ := json.Marshal(v)
		return string(b)
	}
	return strings.Join(out, ", ")
}

func (s *scenarios) campaignPushes(devices int) int {
	n := 0
	for _, d := range s.box.Sandbox.Recorder.List("fcm", "") {
		if strings.HasPrefix(d.Address, "fcm-stackbox-campaign-") {
			n++
		}
	}
	return n
}

// bounce: an email to a bouncing address is accepted, bounces through SES → SNS → SQS, and
// the bounce function suppresses the address: the next email to it is skipped.
func (s *scenarios) bounce(t *testing.T) {
	s.mustCall(t, 200, "PUT", "/v1/users/bob/contacts", map[string]any{"email": "bob+bounce@example.com"})
	first := s.idOf(t, sendRequest("stackbox-bounce-1", "bob", "email"))
	s.waitStatus(t, first, "SENT", 30*time.Second)
	waitFor(t, 30*time.Second, "the bounce on the bounce queue to be consumed", func() (bool, string) {
		for _, c := range s.box.Calls() {
			if c.Caller == "sns.amazonaws.com" && c.Allowed {
				return true, ""
			}
		}
		return false, "no SNS delivery yet"
	})
	var second string
	waitFor(t, 30*time.Second, "the next email to bob skipped as suppressed", func() (bool, string) {
		second = s.idOf(t, sendRequest(fmt.Sprintf("stackbox-bounce-%d", time.Now().UnixNano()), "bob", "email"))
		var v map[string]any
		for range 40 {
			var st string
			st, v = s.notificationStatus(t, second)
			// 404 until ingest has stored it: the API answers before the queue is read.
			if st != "HTTP 404" && st != "ACCEPTED" && st != "PROCESSING" && st != "DISPATCHING" {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		return strings.Contains(fmt.Sprint(v), notify.ReasonSuppressed), fmt.Sprint(v)
	})
}

// unsubscribe: a marketing email carries RFC 8058's one-click link to the API; a POST to it
// through API Gateway's public route, with no credentials, opts the user out (the api function
// writing the preference and the audit entry under its IAM), and the next marketing email to
// them is skipped as opted_out.
func (s *scenarios) unsubscribe(t *testing.T) {
	s.mustCall(t, 200, "PUT", "/v1/users/una/contacts", map[string]any{"email": "una@example.com"})
	s.mustCall(t, 200, "PUT", "/v1/users/una/preferences", map[string]any{"marketing_consent": true, "night_consent": true})
	sale := func(key string) string {
		req := sendRequest(key, "una", "email")
		req["category"] = "marketing"
		return s.idOf(t, req)
	}
	s.waitStatus(t, sale("stackbox-sale-1"), "SENT", 30*time.Second)
	got := s.box.Sandbox.Recorder.List("ses", "una@example.com")
	if len(got) != 1 || got[0].Data["header:List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
		t.Fatalf("the marketing email: %+v", got)
	}
	link, err := url.Parse(strings.Trim(got[0].Data["header:List-Unsubscribe"], "<>"))
	if err != nil || link.Scheme != "https" || !strings.HasPrefix(link.Path, "/u/") {
		t.Fatalf("List-Unsubscribe %q: want the API's https endpoint", got[0].Data["header:List-Unsubscribe"])
	}
	if code, out := s.call(t, "", "", "POST", link.Path, nil); code != 200 {
		t.Fatalf("the one-click POST: %d %v", code, out)
	}
	v := s.waitStatus(t, sale("stackbox-sale-2"), "SKIPPED", 30*time.Second)
	if !strings.Contains(fmt.Sprint(v["skipped_by_reason"]), notify.ReasonOptedOut) {
		t.Fatalf("the next marketing email: %v, want skipped opted_out", v)
	}
}

// erase: a user with a contact, a device, preferences and an inbox item, sent to, is erased by
// DELETE /v1/users/{user} through the api function under its IAM: their data goes, the
// notification sent to them alone is kept under their hash with its counts, one audit entry is
// written, and the next send to them finds no address.
func (s *scenarios) erase(t *testing.T) {
	s.mustCall(t, 200, "PUT", "/v1/users/erika/contacts", map[string]any{"email": "erika@example.com"})
	s.mustCall(t, 200, "PUT", "/v1/users/erika/preferences", map[string]any{"marketing_consent": true})
	s.device(t, "erika", "fcm-stackbox-erika-0001")
	sent := s.idOf(t, sendRequest("stackbox-erase-1", "erika", "push", "email", "inbox"))
	s.waitStatus(t, sent, "SENT", 30*time.Second)
	out := s.mustCall(t, 200, "DELETE", "/v1/users/erika", nil)
	if out["status"] != "erased" || out["user_hash"] != notify.UserHash("erika") {
		t.Fatalf("DELETE /v1/users/erika: %v", out)
	}
	if removed, _ := out["removed"].(map[string]any); fmt.Sprint(removed["devices"], removed["contact"], removed["inbox"], removed["notifications"]) != "1 1 1 1" {
		t.Fatalf("removed: %v", out["removed"])
	}
	if devs := s.mustCall(t, 200, "GET", "/v1/users/erika/devices", nil); fmt.Sprint(devs["devices"]) != "[]" {
		t.Fatalf("devices after the erasure: %v", devs)
	}
	s.mustCall(t, 404, "GET", "/v1/users/erika/contacts", nil)
	if got := s.mustCall(t, 200, "GET", "/v1/users/erika/erasure", nil); got["status"] != "erased" {
		t.Fatalf("GET erasure: %v", got)
	}
	rs, err := s.store(t).GetRecipients(t.Context(), sent, 0, 10)
	if err != nil || len(rs) != 1 || rs[0].UserID != notify.UserHash("erika") {
		t.Fatalf("the notification sent to erika: recipients %+v, %v; want her hash", rs, err)
	}
	v := s.waitStatus(t, s.idOf(t, sendRequest("stackbox-erase-2", "erika", "push")), "SKIPPED", 30*time.Second)
	if !strings.Contains(fmt.Sprint(v["skipped_by_reason"]), notify.ReasonNoAddress) {
		t.Fatalf("a send after the erasure: %v, want skipped no_address", v)
	}
}

// poison: a body that is no SendRequest goes to the ingest queue's DLQ at once, with its
// reason; the admin route lists it and redrives it (an SQS message move task), and ingest
// dead-letters the redriven copy again.
func (s *scenarios) poison(t *testing.T) {
	if err := s.sendToQueue(t, s.producer, "ingest-orders", `{"this is": "not a send request"`); err != nil {
		t.Fatal(err)
	}
	deadLetters := func() []map[string]any {
		v := s.mustCall(t, 200, "GET", "/v1/admin/queues/ingest-orders/dead-letters", nil)
		l, _ := v["dead_letters"].([]any)
		var out []map[string]any
		for _, x := range l {
			d, _ := x.(map[string]any)
			out = append(out, d)
		}
		return out
	}
	var first map[string]any
	waitFor(t, 30*time.Second, "the poison message in the DLQ", func() (bool, string) {
		l := deadLetters()
		if len(l) == 1 {
			first = l[0]
		}
		return len(l) == 1, fmt.Sprint(l)
	})
	if first["code"] != notify.EINVALID {
		t.Fatalf("the dead letter %v: want code %s", first, notify.EINVALID)
	}
	t.Logf("dead letter: %v", first)
	moved := s.mustCall(t, 200, "POST", "/v1/admin/queues/ingest-orders/redrive", nil)
	if n, _ := moved["moved"].(float64); n != 1 {
		t.Fatalf("redrive answered %v, want 1 moved", moved)
	}
	waitFor(t, 30*time.Second, "the redriven message back through ingest and dead-lettered again", func() (bool, string) {
		l := deadLetters()
		return len(l) == 1 && l[0]["id"] != first["id"], fmt.Sprint(l)
	})
	// The poison one is no good: the operator purges the DLQ, typing its name to confirm.
	purged := s.mustCall(t, 200, "DELETE", "/v1/admin/queues/ingest-orders/dead-letters?confirm=ingest-orders", nil)
	if n, _ := purged["purged"].(float64); n != 1 {
		t.Fatalf("purge answered %v, want 1 purged", purged)
	}
	waitFor(t, 70*time.Second, "the purged DLQ empty", func() (bool, string) {
		l := deadLetters()
		return len(l) == 0, fmt.Sprint(l)
	})
}

// forged: the orders producer sending to the marketing ingest queue is refused by that queue's
// policy (templates with per-service queue policies), and a fire for an orders notification
// put on the marketing queue (by the scheduler's role, which may send to every ingest queue) is
// dead-lettered by ingest.
func (s *scenarios) forged(t *testing.T) {
	marketing := s.box.Queue("ingest-marketing")
	body, _ := json.Marshal(sendRequest("stackbox-forged-1", "alice", "push"))
	err := s.sendToQueue(t, s.producer, "ingest-marketing", string(body))
	switch {
	case s.fromPolicy && err == nil:
		t.Fatalf("the orders producer could send to %s: its policy should refuse it", marketing.Name)
	case s.fromPolicy:
		t.Logf("refused as expected: %v", err)
	case err != nil:
		t.Logf("refused: %v", err)
	default:
		t.Logf("NOTE: %s's policy names no producers (a template without per-service queue policies): the orders producer's forged send was not refused by IAM; ingest checks the service", marketing.Name)
	}
	token := "fcm-stackbox-erin"
	s.device(t, "erin", token)
	req := sendRequest("stackbox-forged-fire", "erin", "push")
	req["send_at"] = sendAt(time.Hour)
	id := s.idOf(t, req)
	s.waitStatus(t, id, "SCHEDULED", 10*time.Second) // stored by ingest, which the API queued it for
	role := s.schedulerRole(t)
	fire := fmt.Sprintf(`{"fire": %q, "at": %q}`, id, req["send_at"].(time.Time).Format(time.RFC3339))
	if err := s.sendToQueue(t, role, "ingest-marketing", fire); err != nil {
		t.Fatalf("the scheduler role's send to %s: %v", marketing.Name, err)
	}
	waitFor(t, 30*time.Second, "the forged fire in the marketing ingest DLQ", func() (bool, string) {
		v := s.mustCall(t, 200, "GET", "/v1/admin/queues/ingest-marketing/dead-letters", nil)
		return strings.Contains(fmt.Sprint(v), notify.EFORBIDDEN), fmt.Sprint(v)
	})
	if st, _ := s.notificationStatus(t, id); st != "SCHEDULED" || s.pushes(token) != 0 {
		t.Fatalf("after the forged fire: %s with %d pushes, want SCHEDULED and none", st, s.pushes(token))
	}
}

// schedulerRole is the role the stack's schedules send as (HERALD_SCHEDULER_ROLE_ARN).
func (s *scenarios) schedulerRole(t *testing.T) string {
	r := s.box.Function("ingest").Getenv("HERALD_SCHEDULER_ROLE_ARN")
	if r == "" {
		t.Fatal("ingest has no HERALD_SCHEDULER_ROLE_ARN")
	}
	return r
}

// consoleMoves: an operator moves a reserved send's and a reserved campaign's schedules in the
// console — UpdateSchedule with the same target and input at a new time — and each goes out at
// the new time.
func (s *scenarios) consoleMoves(t *testing.T) {
	token := "fcm-stackbox-frank"
	s.device(t, "frank", token)
	req := sendRequest("stackbox-console-1", "frank", "push")
	req["send_at"] = sendAt(time.Hour)
	nid := s.idOf(t, req)
	s.waitStatus(t, nid, "SCHEDULED", 10*time.Second)
	// The campaign's audience is a list the service uploads to the lists bucket: S3 notifies
	// the audience queue, the audience function imports it.
	bucket := s.box.Function("audience").Getenv("HERALD_AUDIENCE_BUCKET")
	if err := s.box.PutObject(context.Background(), s.service, bucket, "lists/orders/console.txt", "frank\n"); err != nil {
		t.Fatalf("upload the list: %v", err)
	}
	waitFor(t, 30*time.Second, "the uploaded list imported", func() (bool, string) {
		v := s.mustCall(t, 200, "GET", "/v1/audience-lists/console", nil)
		n, _ := v["members"].(float64)
		return n == 1, fmt.Sprint(v)
	})
	camp := s.mustCall(t, 202, "POST", "/v1/campaigns", map[string]any{
		"idempotency_key": "stackbox-console-campaign", "category": "transactional", "channels": []string{"push"},
		"content":  map[string]any{"title": "Stack in a box", "body": "A reserved campaign"},
		"audience": map[string]any{"sources": []any{map[string]any{"kind": "user_list", "list_id": "console"}}},
		"send_at":  sendAt(time.Hour),
	})
	cid, _ := camp["id"].(string)
	if camp["state"] != "SCHEDULED" {
		t.Fatalf("a reserved campaign answered %v", camp)
	}
	group := s.box.Function("ingest").Getenv("HERALD_SCHEDULE_GROUP")
	console := awsscheduler.NewFromConfig(aws.Config{Region: run.Region, Credentials: credentials.NewStaticCredentialsProvider("console", "console", "")},
		func(o *awsscheduler.Options) { o.BaseEndpoint = aws.String(s.box.Sched.URL) })
	moved := s.box.SchedulerNow().Add(4 * time.Second).Truncate(time.Second).UTC()
	for _, id := range []string{nid, cid} {
		waitFor(t, 10*time.Second, "the schedule of "+id, func() (bool, string) {
			_, ok := s.box.Sched.Schedule(group, id)
			return ok, ""
		})
		var found bool
		for _, sc := range s.box.Sched.Schedules(group) {
			if !strings.Contains(sc.Target.Input, id) {
				continue
			}
			found = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := console.UpdateSchedule(ctx, &awsscheduler.UpdateScheduleInput{
				Name: aws.String(sc.Name), GroupName: aws.String(group),
				ScheduleExpression:    aws.String("at(" + moved.Format("2006-01-02T15:04:05") + ")"),
				FlexibleTimeWindow:    &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
				ActionAfterCompletion: schedtypes.ActionAfterCompletion(sc.ActionAfterCompletion),
				Target:                &schedtypes.Target{Arn: aws.String(sc.Target.Arn), RoleArn: aws.String(sc.Target.RoleArn), Input: aws.String(sc.Target.Input)},
			})
			cancel()
			if err != nil {
				t.Fatalf("UpdateSchedule %s: %v", sc.Name, err)
			}
		}
		if !found {
			t.Fatalf("no schedule of group %s fires %s", group, id)
		}
	}
	if st, _ := s.notificationStatus(t, nid); st != "SCHEDULED" {
		t.Fatalf("before the new time: %s, want SCHEDULED", st)
	}
	s.waitStatus(t, nid, "SENT", 30*time.Second)
	waitFor(t, 60*time.Second, "campaign "+cid+" COMPLETED", func() (bool, string) {
		v := s.mustCall(t, 200, "GET", "/v1/campaigns/"+cid, nil)
		return v["state"] == "COMPLETED", fmt.Sprint(v["state"])
	})
	// One push from the notification, one from the campaign to the list.
	waitFor(t, 30*time.Second, "frank's two pushes", func() (bool, string) { return s.pushes(token) == 2, fmt.Sprint(s.pushes(token)) })
}

// operatorConsole: an operator signed in with the identity provider (a JWT carrying the
// console's admin group) cancels a reserved send and pauses and cancels a campaign through the
// console's data routes, which the admin function serves; a token without the group is refused.
func (s *scenarios) operatorConsole(t *testing.T) {
	token := "fcm-stackbox-grace"
	s.device(t, "grace", token)
	req := sendRequest("stackbox-operator-1", "grace", "push")
	req["send_at"] = sendAt(time.Hour)
	nid := s.idOf(t, req)
	s.waitStatus(t, nid, "SCHEDULED", 10*time.Second)
	operator := s.box.API.TokenWith("op-1", map[string]any{"cognito:groups": []string{"herald-operators"}, "username": "oncall"}, time.Hour)
	stranger := s.box.API.TokenWith("op-2", map[string]any{"cognito:groups": []string{"readers"}}, time.Hour)
	if code, out := s.call(t, "", stranger, "DELETE", "/console/api/notifications/"+nid, nil); code != 403 {
		t.Fatalf("a token without the admin group: %d %v, want 403", code, out)
	}
	if code, out := s.call(t, "", operator, "DELETE", "/console/api/notifications/"+nid, nil); code != 200 {
		t.Fatalf("the operator's cancel: %d %v", code, out)
	}
	s.waitStatus(t, nid, "CANCELED", 10*time.Second)
	// The recipient view: grace's notifications, through the notifications table's by_user index,
	// which the admin function may query (stack.recipient_index is on in dev) and nothing else.
	if code, list := s.call(t, "", operator, "GET", "/console/api/notifications?user=grace", nil); code != 200 || !strings.Contains(fmt.Sprint(list), nid) {
		t.Fatalf("grace's notifications: %d %v, want %s", code, list, nid)
	}
	if code, found := s.call(t, "", operator, "GET", "/console/api/recipients?address="+token, nil); code != 200 || found["user_id"] != "grace" {
		t.Fatalf("the owner of grace's token: %d %v", code, found)
	}
	out := s.mustCall(t, 202, "POST", "/v1/campaigns", map[string]any{
		"idempotency_key": "stackbox-operator-campaign", "category": "transactional", "channels": []string{"push"},
		"content":  map[string]any{"title": "Maintenance", "body": "Tonight 02:00"},
		"audience": map[string]any{"sources": []map[string]any{{"kind": "app_devices", "app": "default"}}},
		"send_at":  sendAt(time.Hour),
	})
	cid, _ := out["id"].(string)
	if code, out := s.call(t, "", operator, "POST", "/console/api/campaigns/"+cid+"/cancel", nil); code != 200 {
		t.Fatalf("the operator's campaign cancel: %d %v", code, out)
	}
	if v := s.mustCall(t, 200, "GET", "/v1/campaigns/"+cid, nil); v["state"] != "CANCELED" {
		t.Fatalf("after the operator's cancel: %v, want CANCELED", v["state"])
	}
	code, audit := s.call(t, s.service, "", "GET", "/v1/admin/audit?actor=oncall", nil)
	if code != 200 || !strings.Contains(fmt.Sprint(audit), "notification.cancel") || !strings.Contains(fmt.Sprint(audit), "campaign.cancel") {
		t.Fatalf("the audit log under the operator: %d %v", code, audit)
	}
}
