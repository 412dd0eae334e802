package apns

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sideshow/apns2"
	"github.com/sideshow/apns2/token"
	"golang.org/x/net/http2"

	"herald/internal/notify"
)

// BenchmarkAPNsSend compares a raw apns2 client (one HTTP/2 connection, 64 pushes in flight per
// batch, prebuilt notifications) with Sender.Send, both against the in-process sandbox, for
// 500-message batches with a few batches in flight at once. One op is one batch; the msgs/s
// metric is what matters.
func BenchmarkAPNsSend(b *testing.B) {
	const batch = MaxBatch
	p8, pub, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	content := notify.Content{Title: "Order shipped", Body: "On its way", Data: map[string]string{"order": "42"}}
	msgs := make([]notify.OutboundMessage, batch)
	for i := range msgs {
		msgs[i] = notify.OutboundMessage{DeliveryID: fmt.Sprintf("d%d", i), Address: fmt.Sprintf("%064x", i), App: "default",
			Content: content, CollapseID: "n_1", Priority: notify.PriorityHigh, TTL: time.Hour}
	}

	for _, workers := range []int{2, 4} {
		b.Run(fmt.Sprintf("raw/batches=%d", workers), func(b *testing.B) {
			sb := startSandbox(b)
			sb.TrustAPNsKey(keyID, teamID, pub)
			key, err := token.AuthKeyFromBytes(p8)
			if err != nil {
				b.Fatal(err)
			}
			client := apns2.NewTokenClient(&token.Token{AuthKey: key, KeyID: keyID, TeamID: teamID})
			client.Host = sb.TLSURL()
			tr := client.HTTPClient.Transport.(*http2.Transport)
			tr.TLSClientConfig = &tls.Config{RootCAs: sb.CertPool()}
			b.Cleanup(client.CloseIdleConnections)
			notes := make([]*apns2.Notification, batch)
			for i := range notes {
				notes[i] = toNotification(msgs[i], topic, time.Now())
			}
			runBatches(b, workers, func(ctx context.Context) error {
				return pushAll(ctx, client, notes, DefaultMaxConcurrency)
			})
		})
		for _, conc := range []int{DefaultMaxConcurrency, 128} {
			if conc != DefaultMaxConcurrency && workers < 4 {
				continue
			}
			b.Run(fmt.Sprintf("sender/batches=%d/inflight=%d", workers, conc), func(b *testing.B) {
				sb := startSandbox(b)
				sb.TrustAPNsKey(keyID, teamID, pub)
				s, err := New(Config{MaxConcurrency: conc, Apps: map[string]App{"default": {Topic: topic, KeyID: keyID,
					TeamID: teamID, KeyP8: p8, Endpoint: sb.TLSURL(), RootCAs: sb.CertPool()}}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				runBatches(b, workers, func(ctx context.Context) error {
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
}

// pushAll pushes notes with n in flight and returns the first failure.
func pushAll(ctx context.Context, c *apns2.Client, notes []*apns2.Notification, n int) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(notes)); i = next.Add(1) - 1 {
				resp, err := c.PushWithContext(ctx, notes[i])
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d %s", resp.StatusCode, resp.Reason)
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// runBatches runs b.N batches, workers at a time, and reports messages per second.
func runBatches(b *testing.B, workers int, batch func(ctx context.Context) error) {
	ctx := context.Background()
	if err := batch(ctx); err != nil { // warm the connection up
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := batch(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N*MaxBatch)/elapsed.Seconds(), "msgs/s")
	// CPU per message (client and in-process sandbox together) is steadier than msgs/s when
	// other work shares the machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N*MaxBatch), "cpu-µs/msg")
}

// cpuTime is the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
