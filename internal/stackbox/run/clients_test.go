package run_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	herald "herald/clients/go"
	"herald/internal/stackbox/run"
)

// goClient: the Go producer client calls API Gateway signed as the orders service (SigV4 with its
// role's credentials), and sends to the orders ingest queue as its producer; every call is
// checked against the template's IAM like the rest of the box's, a retry answers the first
// request, and the notifications go out once.
func (s *scenarios) goClient(t *testing.T) {
	ctx := context.Background()
	c := herald.New(herald.NewHTTP(s.box.API.URL, herald.SigV4(run.Region, s.box.AWSConfig(s.service).Credentials)), nil)
	const token = "fcm-stackbox-goclient"
	if _, err := c.PutDevice(ctx, "gina", token, &herald.DeviceRequest{Platform: "fcm"}); err != nil {
		t.Fatalf("PutDevice signed as %s: %v", s.service, err)
	}
	req := &herald.SendRequest{IdempotencyKey: "stackbox-goclient-1", Channels: []herald.Channel{herald.Push},
		Content: &herald.Content{Title: "Stack in a box", Body: "From the Go client"}, Recipients: []herald.Recipient{{UserID: "gina"}}}
	a, err := c.Send(ctx, req)
	if err != nil || a.Replayed {
		t.Fatalf("Send over API Gateway = %+v, %v", a, err)
	}
	again, err := c.Send(ctx, req)
	if err != nil || !again.Replayed || again.ID != a.ID {
		t.Fatalf("the retry = %+v, %v; want the first's id", again, err)
	}
	s.waitStatus(t, a.ID, "SENT", 30*time.Second)

	q := herald.NewSQS(s.box.SQSClient(s.producer), s.box.Queue("ingest-orders").URL, "orders", herald.SQSOptions{})
	defer q.Close(ctx)
	viaQueue := *req
	viaQueue.IdempotencyKey = "stackbox-goclient-2"
	b, err := q.Send(ctx, &viaQueue)
	if err != nil {
		t.Fatalf("Send to the ingest queue as %s: %v", s.producer, err)
	}
	s.waitStatus(t, b.ID, "SENT", 30*time.Second)
	if n := s.pushes(token); n != 2 {
		t.Fatalf("gina got %d pushes, want 2", n)
	}
}

// tsClient: the same with the TypeScript client (clients/typescript/contract/contract.mjs, mode
// box), when node is here and the package is built (make test builds it first and requires it).
func (s *scenarios) tsClient(t *testing.T) {
	node, err := exec.LookPath("node")
	dist := filepath.Join("..", "..", "..", "clients", "typescript", "dist", "index.js")
	if _, serr := os.Stat(dist); err != nil || serr != nil {
		if os.Getenv("HERALD_CONTRACT_TS") == "required" {
			t.Fatalf("the TypeScript client is needed and not built (node: %v, %s: %v)", err, dist, serr)
		}
		t.Skip("no node, or the TypeScript client is not built (cd clients/typescript && npm ci && npm run build)")
	}
	s.device(t, "tomo", "fcm-stackbox-tsclient")
	sk, ss := s.box.Credentials(s.service)
	pk, ps := s.box.Credentials(s.producer)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "contract/contract.mjs", "box")
	cmd.Dir = filepath.Join("..", "..", "..", "clients", "typescript")
	cmd.Env = append(os.Environ(), "HERALD_URL="+s.box.API.URL, "HERALD_REGION="+run.Region,
		"HERALD_SERVICE_KEY_ID="+sk, "HERALD_SERVICE_SECRET="+ss, "HERALD_PRODUCER_KEY_ID="+pk, "HERALD_PRODUCER_SECRET="+ps,
		"HERALD_SQS_ENDPOINT="+s.box.Endpoint("SQS"), "HERALD_QUEUE_URL="+s.box.Queue("ingest-orders").URL, "HERALD_SERVICE=orders")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node contract/contract.mjs box: %v\n%s\n%s", err, raw, stderr.String())
	}
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r struct {
			Case   string   `json:"case"`
			OK     bool     `json:"ok"`
			Detail string   `json:"detail"`
			IDs    []string `json:"ids"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Case == "" {
			continue
		}
		if !r.OK {
			t.Fatalf("typescript %s: %s", r.Case, r.Detail)
		}
		ids = append(ids, r.IDs...)
	}
	if len(ids) != 2 {
		t.Fatalf("the script reported ids %v, want the API's and the queue's", ids)
	}
	for _, id := range ids {
		s.waitStatus(t, id, "SENT", 30*time.Second)
	}
	if n := s.pushes("fcm-stackbox-tsclient"); n != 2 {
		t.Fatalf("tomo got %d pushes, want 2", n)
	}
}

// pauseQueue: an operator pauses the orders ingest queue's consumers through the admin route —
// its event source mapping turned off, with the admin role's rights on that mapping — and a
// send to the queue waits there; resumed, it goes out.
func (s *scenarios) pauseQueue(t *testing.T) {
	const token = "fcm-stackbox-paused"
	s.device(t, "pia", token)
	out := s.mustCall(t, 200, "POST", "/v1/admin/queues/ingest-orders/pause", nil)
	if p, _ := out["paused"].(bool); !p {
		t.Fatalf("pause answered %v", out)
	}
	queues := s.mustCall(t, 200, "GET", "/v1/admin/queues", nil)
	if !strings.Contains(fmt.Sprint(queues), "name:ingest-orders paused:true") {
		t.Fatalf("the queue listing does not say ingest-orders is paused: %v", queues)
	}
	time.Sleep(1500 * time.Millisecond) // a poll under way when the pause came finishes
	raw, _ := json.Marshal(sendRequest("stackbox-paused-1", "pia", "push"))
	if err := s.sendToQueue(t, s.producer, "ingest-orders", string(raw)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := s.pushes(token); n != 0 {
		t.Fatalf("%d pushes while ingest-orders was paused", n)
	}
	s.mustCall(t, 200, "POST", "/v1/admin/queues/ingest-orders/resume", nil)
	waitFor(t, 30*time.Second, "the waiting send after the resume", func() (bool, string) { return s.pushes(token) == 1, fmt.Sprint(s.pushes(token)) })
}
