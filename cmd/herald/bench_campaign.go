package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"herald/internal/config"
	"herald/internal/local"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

// The bench's second service: real-time single sends that must keep their latency while the
// "demo" service's campaign runs on the bulk lane.
const (
	benchOrdersService = "orders"
	benchOrdersKey     = "bench-orders-key"
	benchCampaignKey   = "dev-demo-key"
)

// runBenchCampaign measures a campaign to every device of one app through the local runtime
// (sandbox providers): its wall time and deliveries/s, with exactly one delivery per device
// verified at the sandbox; the latency of real-time single sends from another service, idle and
// while the campaign runs; and the store rows written per recipient for the campaign and for a
// single transactional send (SQLite's total_changes() on the store's writer connection).
func runBenchCampaign(args []string, out io.Writer) error {
	fs := newFlagSet("bench campaign", "[flags]", `
Runs a push campaign to --devices devices of one app through the local runtime and the sandbox
(no running server needed), with real-time single sends from another service before and during
it, and prints the campaign's wall time and deliveries/s (one delivery per device checked), the
real-time latency idle and during the campaign, and the store rows written per recipient.`)
	devices := fs.Int("devices", 300000, "devices of the app, one per user: the campaign's recipients")
	rate := fs.Float64("probe-rate", 20, "real-time single sends per second (idle and during the campaign)")
	idleProbes := fs.Int("idle-probes", 300, "real-time single sends measured before the campaign starts")
	maxProbes := fs.Int("max-probes", 2000, "at most this many real-time single sends during the campaign")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up if the campaign has not completed by then")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *devices < 1 || *rate <= 0 || *idleProbes < 1 || *maxProbes < 1 {
		return usagef(fs, "need --devices, --probe-rate, --idle-probes and --max-probes ≥ 1")
	}
	fmt.Fprintf(out, "herald bench campaign: a push campaign to %d devices of app \"default\" (FCM) through the local runtime to the sandbox on 127.0.0.1\n", *devices)

	cfg := config.Dev()
	cfg.Providers.APNs.Apps = nil // FCM only
	cfg.Services = append(cfg.Services, config.Service{Name: benchOrdersService, APIKeys: []string{benchOrdersKey}, MaxConcurrency: 4})
	cfg.ApplyDefaults()
	r, stopRuntime, err := startBenchRuntime(cfg, local.Options{})
	if err != nil {
		return err
	}
	defer stopRuntime()
	ctx := context.Background()

	// Setup: the devices, straight into the store (not part of any figure).
	start := time.Now()
	for i := range *devices {
		d := notify.Device{
			UserID: fmt.Sprintf("bench-user-%07d", i), Platform: notify.PlatformFCM, App: "default",
			Token: fmt.Sprintf("cmp-%07d-bench-token-padding-to-a-realistic-length", i), Environment: "production",
		}
		if err := r.Store.PutDevice(ctx, d); err != nil {
			return fmt.Errorf("register devices: %w", err)
		}
	}
	reg := time.Since(start)
	fmt.Fprintf(out, "  setup        %d devices via Store.PutDevice (not a figure)     %8.0f devices/s     (%v)\n",
		*devices, float64(*devices)/reg.Seconds(), reg.Round(time.Millisecond))

	w := newSandboxWatcher(r.Sandbox.Recorder)
	defer w.stop()

	// Idle: real-time single sends with nothing else going on; they also give the rows written
	// per transactional send. The setup's writes are on disk first: the kernel writing back
	// hundreds of megabytes of it stalled the idle probes' own writes by up to half a second.
	flushDisk()
	tc0, err := r.Store.TotalChanges(ctx)
	if err != nil {
		return err
	}
	idle := newProbeRun(r.URL, w)
	idle.run(*rate, *idleProbes, nil)
	if err := idle.settle(r.URL, time.Minute); err != nil {
		return fmt.Errorf("idle probes: %w", err)
	}
	tc1, err := r.Store.TotalChanges(ctx)
	if err != nil {
		return err
	}
	perSend := float64(tc1-tc0) / float64(len(idle.ids))

	// The campaign, with probes alongside until it has completed.
	body, _ := json.Marshal(map[string]any{
		"category": "transactional", "channels": []string{"push"},
		"content":     map[string]string{"title": "Bench", "body": "campaign"},
		"audience":    map[string]any{"sources": []map[string]string{{"kind": "app_devices", "app": "default"}}},
		"quiet_hours": map[string]bool{"enabled": false},
	})
	var created struct{ ID, State string }
	start = time.Now()
	if err := call(http.MethodPost, r.URL+"/v1/campaigns", benchCampaignKey, body, &created); err != nil {
		return fmt.Errorf("create campaign: %w", err)
	}
	during := newProbeRun(r.URL, w)
	stopProbes := make(chan struct{})
	probesDone := make(chan struct{})
	go func() { defer close(probesDone); during.run(*rate, *maxProbes, stopProbes) }()
	stop := func() {
		select {
		case <-stopProbes:
		default:
			close(stopProbes)
		}
		<-probesDone
	}
	defer stop()

	deadline := start.Add(*timeout)
	var wall time.Duration
	for {
		if time.Now().After(deadline) {
			distinct, total, _ := w.campaignCounts()
			return fmt.Errorf("campaign %s not complete after %v: %d deliveries to %d distinct devices of %d", created.ID, *timeout, total, distinct, *devices)
		}
		if _, total, last := w.campaignCounts(); total >= *devices && wall == 0 {
			wall = last.Sub(start)
		}
		var c struct {
			State, Error string
			Totals       struct{ Pending, Failed int }
		}
		if err := call(http.MethodGet, r.URL+"/v1/campaigns/"+created.ID, benchCampaignKey, nil, &c); err != nil {
			return err
		}
		if c.State != string(notify.CampaignCompleted) && notify.CampaignState(c.State).Final() {
			return fmt.Errorf("campaign %s ended %s %s", created.ID, c.State, c.Error)
		}
		if wall > 0 && c.State == string(notify.CampaignCompleted) && c.Totals.Pending == 0 {
			if c.Totals.Failed != 0 {
				return fmt.Errorf("campaign %s: %d deliveries failed", created.ID, c.Totals.Failed)
			}
			break
		}
		// As a console would, but more often: reading a campaign counts what is left of its
		// audience, which is work the probes compete with. The wall time is the sandbox's.
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a late duplicate would show up here
	distinct, total, _ := w.campaignCounts()
	if distinct != *devices || total != *devices {
		return fmt.Errorf("campaign %s: %d deliveries to %d distinct devices, want exactly one to each of %d", created.ID, total, distinct, *devices)
	}
	fmt.Fprintf(out, "  campaign     POST /v1/campaigns → last sandbox delivery   %8.0f deliveries/s  (%v; %d devices, one delivery each)\n",
		float64(*devices)/wall.Seconds(), wall.Round(time.Millisecond), distinct)
	stop() // real-time sends already posted are waited for, however late
	if err := during.settle(r.URL, 10*time.Minute); err != nil {
		return fmt.Errorf("real-time sends during the campaign: %w", err)
	}
	tc2, err := r.Store.TotalChanges(ctx)
	if err != nil {
		return err
	}

	i50, i99 := percentile(idle.lat, 0.50), percentile(idle.lat, 0.99)
	d50, d99 := percentile(during.lat, 0.50), percentile(during.lat, 0.99)
	fmt.Fprintf(out, "  realtime     %q single sends, POST → sandbox, idle           p50 %6s  p99 %6s  (%d sends)\n",
		benchOrdersService, ms(i50), ms(i99), len(idle.lat))
	fmt.Fprintf(out, "  realtime     %q single sends, during the campaign            p50 %6s  p99 %6s  (%d sends; p99 %.2g× idle; aim < 200 ms and ≤ 3×)\n",
		benchOrdersService, ms(d50), ms(d99), len(during.lat), float64(d99)/float64(max(i99, time.Microsecond)))

	// The probes during the campaign wrote too; they are single sends like the idle ones.
	campaignRows := float64(tc2-tc1) - perSend*float64(len(during.ids))
	fmt.Fprintf(out, "  writes       store rows per recipient: campaign %.2f (aim ≤ 0.05), single transactional send %.2f\n",
		campaignRows/float64(*devices), perSend)
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}

// sandboxWatcher follows the sandbox's record: it counts the campaign's deliveries (tokens
// "cmp-…") per address and hands each probe's delivery time to whoever waits for its token.
type sandboxWatcher struct {
	rec  *sandbox.Recorder
	quit chan struct{}
	done chan struct{}

	mu       sync.Mutex
	perAddr  map[string]int
	total    int
	last     time.Time
	probeAt  map[string]time.Time
	waitChan map[string]chan time.Time
}

func newSandboxWatcher(rec *sandbox.Recorder) *sandboxWatcher {
	w := &sandboxWatcher{rec: rec, quit: make(chan struct{}), done: make(chan struct{}),
		perAddr: map[string]int{}, probeAt: map[string]time.Time{}, waitChan: map[string]chan time.Time{}}
	go w.loop()
	return w
}

func (w *sandboxWatcher) loop() {
	defer close(w.done)
	seen := w.rec.Len() // nothing before the watcher counts
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		ds := w.rec.Since(seen)
		seen += len(ds)
		if len(ds) == 0 {
			continue
		}
		w.mu.Lock()
		for _, d := range ds {
			switch {
			case strings.HasPrefix(d.Address, "cmp-"):
				w.perAddr[d.Address]++
				w.total++
				w.last = d.At
			case strings.HasPrefix(d.Address, "probe-"):
				if _, ok := w.probeAt[d.Address]; !ok {
					w.probeAt[d.Address] = d.At
					if ch := w.waitChan[d.Address]; ch != nil {
						ch <- d.At
					}
				}
			}
		}
		w.mu.Unlock()
	}
}

func (w *sandboxWatcher) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

func (w *sandboxWatcher) campaignCounts() (distinct, total int, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.perAddr), w.total, w.last
}

// expect registers interest in token's delivery before it is sent.
func (w *sandboxWatcher) expect(token string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.waitChan[token] = ch
	w.mu.Unlock()
	return ch
}

// probeRun sends real-time single notifications from the "orders" service at a fixed rate and
// measures each from POST to its delivery at the sandbox.
type probeRun struct {
	url string
	w   *sandboxWatcher

	mu   sync.Mutex
	ids  []string
	lat  []time.Duration
	errs []error
}

// probeWait is how long one real-time send may take to reach the sandbox before the bench
// calls it lost: long, so a starved real-time lane shows up as its true latency.
const probeWait = 10 * time.Minute

var probeSeq struct {
	sync.Mutex
	n int
}

func newProbeRun(url string, w *sandboxWatcher) *probeRun { return &probeRun{url: url, w: w} }

// run sends up to n probes at rate per second until stop closes, and waits for them.
func (p *probeRun) run(rate float64, n int, stop <-chan struct{}) {
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); p.one() }()
		select {
		case <-stop:
			wg.Wait()
			return
		case <-t.C:
		}
	}
	wg.Wait()
}

func (p *probeRun) one() {
	probeSeq.Lock()
	probeSeq.n++
	token := fmt.Sprintf("probe-%06d-bench-token-padding-to-a-realistic-length", probeSeq.n)
	probeSeq.Unlock()
	body, _ := json.Marshal(map[string]any{
		"channels": []string{"push"}, "content": map[string]string{"title": "Order", "body": "shipped"},
		"recipients": []map[string]string{{"fcm_token": token}},
	})
	ch := p.w.expect(token)
	t0 := time.Now()
	var acc struct{ ID string }
	err := call(http.MethodPost, p.url+"/v1/notifications", benchOrdersKey, body, &acc)
	if err == nil {
		p.mu.Lock()
		p.ids = append(p.ids, acc.ID)
		p.mu.Unlock()
		select {
		case at := <-ch:
			p.mu.Lock()
			p.lat = append(p.lat, at.Sub(t0))
			p.mu.Unlock()
			return
		case <-time.After(probeWait):
			err = fmt.Errorf("notification %s not delivered within %v", acc.ID, probeWait)
		}
	}
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// settle fails on any probe error, then waits until every probe's notification has reached an
// end state (SENT), so the store writes for it are all done.
func (p *probeRun) settle(url string, limit time.Duration) error {
	if len(p.errs) > 0 {
		return fmt.Errorf("%d of %d failed: %w", len(p.errs), len(p.errs)+len(p.lat), errors.Join(p.errs[:min(len(p.errs), 3)]...))
	}
	deadline := time.Now().Add(limit)
	for _, id := range p.ids {
		for {
			var st struct{ Status notify.NotificationStatus }
			if err := call(http.MethodGet, url+"/v1/notifications/"+id+"?limit=1", benchOrdersKey, nil, &st); err != nil {
				return err
			}
			if st.Status.Final() {
				if st.Status != notify.StatusSent {
					return fmt.Errorf("notification %s ended %s", id, st.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("notification %s still %s after %v", id, st.Status, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// startBenchRuntime starts the local runtime on cfg in a temporary directory, with the sandbox
// recording in memory and no log, on top of opts; stop shuts it down and removes the directory.
func startBenchRuntime(cfg *config.Config, opts local.Options) (r *local.Runtime, stop func(), err error) {
	dir, removeDir, err := benchTempDir("herald-bench-")
	if err != nil {
		return nil, nil, err
	}
	opts.Config, opts.DataDir, opts.Addr, opts.SandboxInMemory = cfg, dir, "127.0.0.1:0", true
	opts.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	var logFile io.Closer = io.NopCloser(nil)              // HERALD_BENCH_LOG's file, closed with the runtime
	if name := os.Getenv("HERALD_BENCH_LOG"); name != "" { // the runtime's log, appended run after run
		f, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			removeDir()
			return nil, nil, fmt.Errorf("HERALD_BENCH_LOG: %w", err)
		}
		opts.Logger, logFile = slog.New(slog.NewJSONHandler(f, nil)), f
	}
	if r, err = local.Start(context.Background(), opts); err != nil {
		logFile.Close()
		removeDir()
		return nil, nil, err
	}
	return r, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
		logFile.Close()
		removeDir()
	}, nil
}
