package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/config"
	"herald/internal/local"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

// runBenchSingle measures single transactional sends end to end through the local runtime: many
// clients post single-recipient pushes to the API for a while; the bench prints the API's accept
// rate, the rate at which notifications reached the sandbox during the load and the backlog
// left when it stopped, the time to drain it, and the store rows written per send — checking
// that every accepted notification reached its device exactly once.
func runBenchSingle(args []string, out io.Writer) error {
	fs := newFlagSet("bench single", "[flags]", `
Posts single-recipient transactional pushes (a user with one FCM device) from --clients
concurrent clients for --duration through the local runtime to the sandbox (no running server
needed), and prints the API's accept rate, the completion rate during the load, the backlog when
it stops and the time to drain it, and the store rows written per send.`)
	clients := fs.Int("clients", 50, "concurrent API clients")
	duration := fs.Duration("duration", 20*time.Second, "how long the clients post")
	users := fs.Int("users", 150000, "users (one FCM device each); each is sent to at most once")
	inbox := fs.Bool("inbox", false, "send to the inbox channel too")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load and the drain to this file")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *clients < 1 || *users < 1 || *duration <= 0 {
		return usagef(fs, "need --clients, --users ≥ 1 and a positive --duration")
	}
	channels := []string{"push"}
	if *inbox {
		channels = append(channels, "inbox")
	}
	fmt.Fprintf(out, "herald bench single: %d clients posting single-recipient transactional %s for %v through the local runtime to the sandbox on 127.0.0.1\n",
		*clients, strings.Join(channels, "+"), *duration)

	cfg := config.Dev()
	cfg.Providers.APNs.Apps = nil // FCM only
	cfg.ApplyDefaults()
	r, stopRuntime, err := startBenchRuntime(cfg, local.Options{})
	if err != nil {
		return err
	}
	defer stopRuntime()
	ctx := context.Background()
	token := func(i int) string { return fmt.Sprintf("single-%07d-bench-token-padding-to-a-realistic-length", i) }
	for i := range *users {
		if err := r.Store.PutDevice(ctx, notify.Device{UserID: fmt.Sprintf("single-user-%07d", i), Platform: notify.PlatformFCM,
			App: "default", Token: token(i), Environment: "production"}); err != nil {
			return fmt.Errorf("register devices: %w", err)
		}
	}
	seen := newDeliveryCounter(r.Sandbox.Recorder, "single-")
	defer seen.stop()
	tc0, err := r.Store.TotalChanges(ctx)
	if err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *clients, MaxConnsPerHost: *clients}}
	var (
		next, accepted atomic.Int64
		mu             sync.Mutex
		lat            []time.Duration
		errs           []error
		wg             sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(*duration)
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for time.Now().Before(end) {
				i := int(next.Add(1) - 1)
				if i >= *users {
					return
				}
				body, _ := json.Marshal(map[string]any{"idempotency_key": fmt.Sprintf("single-%d", i), "category": "transactional",
					"channels": channels, "content": map[string]string{"title": "Your code", "body": "123456"},
					"recipients": []map[string]string{{"user_id": fmt.Sprintf("single-user-%07d", i)}}})
				t0 := time.Now()
				req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/notifications", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+benchCampaignKey)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("POST /v1/notifications: %s", resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				accepted.Add(1)
			}
		}()
	}
	// The backlog (accepted, not yet at the sandbox) every 5 s: flat when the pipeline keeps up.
	type sample struct {
		at             time.Duration
		accepted, done int
	}
	var samples []sample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				samples = append(samples, sample{time.Since(start), int(accepted.Load()), seen.count()})
			}
		}
	}()
	wg.Wait()
	close(stopSampling)
	<-sampled
	load := time.Since(start)
	doneAtStop := seen.count()
	if len(errs) > 0 {
		return fmt.Errorf("%d posts failed: %w", len(errs), errs[0])
	}
	n := int(accepted.Load())
	if n >= *users {
		fmt.Fprintf(out, "  (every one of the %d users was sent to before --duration ran out: raise --users)\n", *users)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for seen.count() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d notifications reached the sandbox in 10 minutes", seen.count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	drained := time.Since(start)
	time.Sleep(300 * time.Millisecond) // a late duplicate would show here
	if dup, distinct := seen.duplicates(); dup > 0 || distinct != n {
		return fmt.Errorf("%d notifications accepted: %d devices reached, %d deliveries more than once", n, distinct, dup)
	}
	// Every notification's final write follows its send: wait for SENT before counting rows.
	for i := range n {
		id := notify.NotificationIDFor("demo", fmt.Sprintf("single-%d", i), start)
		for {
			got, err := r.Store.GetNotification(ctx, id)
			if err != nil {
				return err
			}
			if got.Status.Final() {
				if got.Status != notify.StatusSent {
					return fmt.Errorf("notification %s ended %s", id, got.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("notification %s still %s", id, got.Status)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	tc1, err := r.Store.TotalChanges(ctx)
	if err != nil {
		return err
	}
	acceptRate := float64(n) / load.Seconds()
	doneRate := float64(doneAtStop) / load.Seconds()
	fmt.Fprintf(out, "  accepted     POST /v1/notifications → 202                    %8.0f requests/s   (%d in %v; p50 %s p99 %s)\n",
		acceptRate, n, load.Round(time.Millisecond), ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)))
	fmt.Fprintf(out, "  completed    reached the sandbox while the clients posted   %8.0f notifications/s (%.2f of the accept rate; backlog %d when they stopped)\n",
		doneRate, doneRate/acceptRate, n-doneAtStop)
	var windows []string
	prev := sample{}
	for _, sm := range samples {
		w := (sm.at - prev.at).Seconds()
		windows = append(windows, fmt.Sprintf("%.0fs: %d/s in, %d/s out, backlog %d",
			sm.at.Seconds(), int(float64(sm.accepted-prev.accepted)/w), int(float64(sm.done-prev.done)/w), sm.accepted-sm.done))
		prev = sm
	}
	if len(windows) > 0 {
		fmt.Fprintf(out, "  every 5 s    %s\n", strings.Join(windows, "; "))
	}
	fmt.Fprintf(out, "  drained      last delivery after the first post              %8.0f notifications/s (%v; every device reached exactly once)\n",
		float64(n)/drained.Seconds(), drained.Round(time.Millisecond))
	fmt.Fprintf(out, "  writes       store rows per single send (%s)              %8.2f\n", strings.Join(channels, "+"), float64(tc1-tc0)/float64(n))
	return nil
}

// deliveryCounter counts the sandbox's deliveries to addresses with a prefix.
type deliveryCounter struct {
	rec     *sandbox.Recorder
	prefix  string
	quit    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	perAddr map[string]int
	total   int
}

func newDeliveryCounter(rec *sandbox.Recorder, prefix string) *deliveryCounter {
	c := &deliveryCounter{rec: rec, prefix: prefix, quit: make(chan struct{}), done: make(chan struct{}), perAddr: map[string]int{}}
	go func() {
		defer close(c.done)
		seen := rec.Len()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.quit:
				return
			case <-t.C:
			}
			ds := rec.Since(seen)
			seen += len(ds)
			c.mu.Lock()
			for _, d := range ds {
				if strings.HasPrefix(d.Address, prefix) {
					c.perAddr[d.Address]++
					c.total++
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *deliveryCounter) stop() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
}

// count is how many distinct addresses were reached.
func (c *deliveryCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.perAddr)
}

// duplicates returns the deliveries beyond the first per address, and the addresses reached.
func (c *deliveryCounter) duplicates() (extra, distinct int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - len(c.perAddr), len(c.perAddr)
}
