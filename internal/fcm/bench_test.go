package fcm

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"firebase.google.com/go/v4/messaging"
	"golang.org/x/net/http2"

	"herald/internal/notify"
	"herald/internal/sandbox"
)

// BenchmarkFCMSend compares the raw SDK (SendEachForMulticast, set up as REFERENCE.md does) with
// Sender.Send, both against the in-process sandbox, for 500-token batches with a few batches
// in flight at once — over plain HTTP/1.1 and over HTTP/2 with TLS. One op is one batch; the
// msgs/s metric is what matters. The sandbox runs in the same process and takes its share of
// the two cores.
func BenchmarkFCMSend(b *testing.B) {
	tokens := make([]string, MaxBatch)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("bench-token-%04d-0000000000", i)
	}
	content := notify.Content{Title: "Order shipped", Body: "On its way", Data: map[string]string{"order": "42"}}
	msgs := make([]notify.OutboundMessage, MaxBatch)
	for i := range msgs {
		msgs[i] = notify.OutboundMessage{DeliveryID: fmt.Sprintf("d%d", i), Address: tokens[i], App: "default",
			Content: content, CollapseID: "n_1", Priority: notify.PriorityHigh, TTL: time.Hour}
	}
	tmpl := toMessage(msgs[0], time.Now())

	cases := []struct {
		sender  bool
		proto   string
		batches int
		conc    int // Sender MaxConcurrency; 0 = default
	}{
		{false, "http1", 2, 0},
		{true, "http1", 2, 0},
		{false, "http1", 4, 0},
		{true, "http1", 4, 0},
		{false, "http2", 4, 0},
		{true, "http2", 4, 0},
		{true, "http2", 4, 200},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("raw/%s/batches=%d", tc.proto, tc.batches)
		if tc.sender {
			name = fmt.Sprintf("sender/%s/batches=%d/inflight=%d", tc.proto, tc.batches, max(tc.conc, DefaultMaxConcurrency))
		}
		b.Run(name, func(b *testing.B) {
			sb := startSandbox(b)
			endpoint, hc := benchEndpoint(b, sb, tc.proto)
			if !tc.sender {
				client := newRawClient(b, endpoint, hc)
				runOps(b, tc.batches, MaxBatch, func(ctx context.Context) error {
					br, err := client.SendEachForMulticast(ctx, toMulticast(tmpl, tokens))
					if err == nil && br.FailureCount > 0 {
						err = firstFailure(br)
					}
					return err
				})
				return
			}
			s, err := New(context.Background(), Config{HTTPClient: hc, MaxConcurrency: tc.conc,
				Apps: map[string]App{"default": {ProjectID: project, Endpoint: endpoint}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			runOps(b, tc.batches, MaxBatch, func(ctx context.Context) error {
				res, err := s.Send(ctx, msgs)
				if err != nil {
					return err
				}
				for _, r := range res {
					if r.Err != nil {
						return r.Err
					}
				}
				return nil
			})
		})
	}
}

// benchEndpoint returns the sandbox endpoint for proto and, for http2, a TLS HTTP/2 client
// trusting it (nil for http1: the SDK's or the Sender's default client).
func benchEndpoint(b *testing.B, sb *sandbox.Server, proto string) (string, *http.Client) {
	if proto == "http1" {
		return sb.URL() + "/v1", nil
	}
	tr := &http2.Transport{TLSClientConfig: sb.TLSConfig()}
	b.Cleanup(tr.CloseIdleConnections)
	return sb.TLSURL() + "/v1", &http.Client{Transport: tr}
}

// runOps runs b.N operations of msgs messages each, workers at a time, and reports messages per
// second and the process's CPU per message.
func runOps(b *testing.B, workers, msgs int, op func(ctx context.Context) error) {
	ctx := context.Background()
	if err := op(ctx); err != nil { // warm connections up
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*msgs)/elapsed.Seconds(), "msgs/s")
	// CPU per message (client and in-process sandbox together) is steadier than msgs/s when
	// other work shares the machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N*msgs), "cpu-µs/msg")
}

// cpuTime is the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func firstFailure(br *messaging.BatchResponse) error {
	for _, r := range br.Responses {
		if !r.Success {
			return fmt.Errorf("%d of %d failed, first: %w", br.FailureCount, len(br.Responses), r.Error)
		}
	}
	return nil
}

// BenchmarkFCMSendOne is single pushes from 50 callers at once, as a stream of single sends
// makes them: the raw SDK's SendEachForMulticast of one token, which starts 50 workers for it,
// against Sender.Send of one message. One op is one push; cpu-µs/msg is the figure.
func BenchmarkFCMSendOne(b *testing.B) {
	m := notify.OutboundMessage{DeliveryID: "d0", Address: "bench-token-0000-0000000000", App: "default",
		Content: notify.Content{Title: "Your code", Body: "123456"}, CollapseID: "n_1", Priority: notify.PriorityHigh, TTL: time.Hour}
	tmpl := toMessage(m, time.Now())
	for _, sender := range []bool{false, true} {
		name := "raw"
		if sender {
			name = "sender"
		}
		b.Run(name, func(b *testing.B) {
			sb := startSandbox(b)
			endpoint := sb.URL() + "/v1"
			var one func(ctx context.Context) error
			if sender {
				s, err := New(context.Background(), Config{Apps: map[string]App{"default": {ProjectID: project, Endpoint: endpoint}}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				one = func(ctx context.Context) error {
					res, err := s.Send(ctx, []notify.OutboundMessage{m})
					if err == nil {
						err = res[0].Err
					}
					return err
				}
			} else {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConnsPerHost = DefaultMaxConcurrency
				b.Cleanup(tr.CloseIdleConnections)
				client := newRawClient(b, endpoint, &http.Client{Transport: tr})
				one = func(ctx context.Context) error {
					br, err := client.SendEachForMulticast(ctx, toMulticast(tmpl, []string{m.Address}))
					if err == nil && br.FailureCount > 0 {
						err = firstFailure(br)
					}
					return err
				}
			}
			runOps(b, 50, 1, one)
		})
	}
}
