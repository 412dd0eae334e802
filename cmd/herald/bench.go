package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	firebase "firebase.google.com/go/v4"
	"google.golang.org/api/option"

	"herald/internal/config"
	"herald/internal/fcm"
	"herald/internal/local"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

// runBench measures end-to-end push throughput through the whole local pipeline (API → ingest →
// prepare → send → record, SQLite store and queue, the real firebase SDK) against the sandbox,
// next to the raw SDK sending the same number of messages to the same sandbox in the same run.
// Their ratio is the pipeline's efficiency.
func runBench(args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "campaign" {
		return runBenchCampaign(args[1:], out)
	}
	if len(args) > 0 && args[0] == "export" {
		return runBenchExport(args[1:], out)
	}
	if len(args) > 0 && args[0] == "single" {
		return runBenchSingle(args[1:], out)
	}
	if len(args) > 0 && args[0] == "cost" {
		return runBenchCost(args[1:], out)
	}
	fs := newFlagSet("bench", "[flags] | herald bench campaign [flags]", `
Measures end-to-end push throughput for --recipients through the whole local pipeline and the
real firebase SDK to the sandbox, on each lane, next to the raw SDK sending as many messages to
the same sandbox in the same run. Needs no running server; takes the machine's cores.
  herald bench campaign   a push campaign to --devices devices: wall time, deliveries/s, real-time
                          latency before and during it, store rows per recipient (see its -h)
  herald bench export     a deliveries export of --rows rows on SQLite: rows/s, peak heap
  herald bench single     single-recipient transactional pushes from --clients clients: accept
                          and completion rates, backlog, store rows per send
  herald bench cost       the AWS bill per million recipients, per AWS service, measured on the
                          AWS runtime's handlers (DynamoDB Local, the AWS fakes; see its -h)`)
	recipients := fs.Int("recipients", 100000, "push recipients (device tokens) in total")
	perNotification := fs.Int("per-notification", 10000, "recipients per notification (≤ 10,000)")
	inFlight := fs.Int("raw-batches", 2, "500-token multicasts in flight for the raw SDK run")
	sendWorkers := fs.Int("send-workers", 4, "send workers of the pipeline in every run (each lane's send max_concurrency for the run)")
	cpuProfile := fs.String("cpuprofile", "", "write CPU profiles of the last round to this file name plus .realtime and .bulk (each lane's pipeline run) and .raw-realtime and .raw-bulk (the raw SDK run before it), and allocation profiles of each run at its start and end (.allocs-base, .allocs)")
	rounds := fs.Int("rounds", 3, "rounds of a raw SDK run then a pipeline run for each lane; each efficiency is against the raw run just before it, and the median is the figure")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unknown subcommand %q (campaign, export, cost)", pos[0])
	}
	profile = *cpuProfile
	if *perNotification < 1 || *perNotification > 10000 || *recipients < *perNotification {
		return usagef(fs, "need 1 ≤ --per-notification ≤ 10000 and --recipients ≥ --per-notification")
	}
	if *rounds < 1 || *rounds > 9 {
		return usagef(fs, "--rounds must be 1 to 9")
	}
	fmt.Fprintf(out, "herald bench: %d push recipients via FCM (firebase-admin-go v4) to the sandbox on 127.0.0.1\n", *recipients)

	// The raw run's rate moves with what else the machine does; each round compares each lane
	// with a raw run of its payload made moments before, and the median of the rounds is the figure.
	// CPU time is the steadier figure on a shared machine: the raw run and the pipeline do the
	// same SDK and sandbox work, so what the pipeline spends beyond the raw run is its own.
	eff, cpuEff := map[notify.Lane][]float64{}, map[notify.Lane][]float64{}
	for round := 1; round <= *rounds; round++ {
		fmt.Fprintf(out, "  round %d/%d\n", round, *rounds)
		for _, lane := range notify.Lanes {
			// Each lane against a raw run made just before it, sending the very payload the lane
			// sends (a marketing push is normal priority: no APNs sound, a smaller body).
			bn := benchRequest(lane).Notification(notify.NewID(notify.NotificationIDPrefix, time.Now()), "bench", time.Now())
			raw, err := benchRawFCM(*recipients, *inFlight, bn)
			if err != nil {
				return fmt.Errorf("raw SDK run: %w", err)
			}
			fmt.Fprintf(out, "  raw SDK      SendEachForMulticast, %d × 500 in flight, %s priority %8.0f msgs/s  (%v%s)\n", *inFlight, bn.Priority,
				raw.rate, raw.wall.Round(time.Millisecond), raw.cpuNote(raw))
			run, err := benchPipeline(*recipients, *perNotification, *sendWorkers, lane)
			if err != nil {
				return fmt.Errorf("pipeline run (%s lane): %w", lane, err)
			}
			eff[lane] = append(eff[lane], run.rate/raw.rate)
			if raw.cpuOK && run.cpuOK {
				cpuEff[lane] = append(cpuEff[lane], raw.cpu.Seconds()/run.cpu.Seconds())
			}
			fmt.Fprintf(out, "  pipeline     %-8s API → ingest → prepare → send → record %8.0f deliveries/s  (%v, %d send workers; efficiency %.2f%s)\n",
				lane, run.rate, run.wall.Round(time.Millisecond), *sendWorkers, run.rate/raw.rate, run.cpuNote(raw))
			fmt.Fprintf(out, "               %-8s %s\n", "", run.phases)
		}
	}
	for _, lane := range notify.Lanes {
		fmt.Fprintf(out, "  efficiency   %-8s %s", lane, medianOf(eff[lane]))
		if len(cpuEff[lane]) > 0 {
			fmt.Fprintf(out, "; CPU %s", medianOf(cpuEff[lane]))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "  (realtime keeps a store record per delivery; bulk one per 500-token batch)")
	return nil
}

var profile string

// startProfile starts a CPU profile of the run named run into profile plus "."+run, when
// --cpuprofile asks for one; stop ends it.
func startProfile(run string) (stop func(), err error) {
	if profile == "" {
		return func() {}, nil
	}
	f, err := os.Create(profile + "." + run)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := writeAllocs(profile + "." + run + ".allocs-base"); err != nil {
		pprof.StopCPUProfile()
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		_ = writeAllocs(profile + "." + run + ".allocs")
	}, nil
}

// writeAllocs writes the allocation profile so far (sampled, cumulative since the process
// started) to name: a run's own allocations are its .allocs less its .allocs-base
// (`go tool pprof -sample_index=alloc_space -diff_base F.allocs-base F.allocs`).
func writeAllocs(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchRun is one run's figures: pushes per second, wall time, and the process's CPU time
// over the same span (cpuOK false where it cannot be read).
type benchRun struct {
	n     int
	rate  float64
	wall  time.Duration
	cpu   time.Duration
	cpuOK bool
	// phases, for a pipeline run: when its first and last push reached the sandbox, and when
	// every notification was SENT.
	phases string
}

type span struct {
	start time.Time
	cpu   time.Duration
	cpuOK bool
}

func startSpan() span {
	cpu, ok := processCPU()
	return span{start: time.Now(), cpu: cpu, cpuOK: ok}
}

// end closes the span over n pushes.
func (s span) end(n int) benchRun {
	wall := time.Since(s.start)
	cpu, _ := processCPU()
	return benchRun{n: n, rate: float64(n) / wall.Seconds(), wall: wall, cpu: cpu - s.cpu, cpuOK: s.cpuOK}
}

// cpuNote is r's CPU figure for its line: CPU seconds per 100,000 pushes and, for a pipeline
// run, its CPU efficiency (raw's CPU over its own).
func (r benchRun) cpuNote(raw benchRun) string {
	if !r.cpuOK || !raw.cpuOK {
		return ""
	}
	note := fmt.Sprintf("; %.1f CPU-s per 100,000", r.cpu.Seconds()*100000/float64(r.n))
	if r != raw {
		note += fmt.Sprintf(", CPU efficiency %.2f", raw.cpu.Seconds()/r.cpu.Seconds())
	}
	return note
}

// medianOf describes figures of the rounds: their median and range.
func medianOf(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("median %.2f of %d rounds (%.2f–%.2f)", s[len(s)/2], len(s), s[0], s[len(s)-1])
}

func benchTokens(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%07d-bench-token-padding-to-a-realistic-length", prefix, i)
	}
	return out
}

// benchRequest is the push the bench sends on lane, without its recipients: transactional on the
// realtime lane, marketing on the bulk lane.
func benchRequest(lane notify.Lane) *notify.SendRequest {
	category := notify.CategoryTransactional
	if lane == notify.LaneBulk {
		category = notify.CategoryMarketing
	}
	return &notify.SendRequest{Category: category, Channels: []notify.Channel{notify.ChannelPush},
		Content: notify.Content{Title: "Bench", Body: "pipeline"}}
}

// benchRawFCM sends n pushes of bn's payload straight through the SDK to a sandbox of its own;
// the CPU profile, if asked for, is named after bn's lane.
func benchRawFCM(n, inFlight int, bn *notify.Notification) (benchRun, error) {
	sb, err := sandbox.Start(sandbox.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return benchRun{}, err
	}
	defer sb.Close()
	ctx := context.Background()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	tr.MaxIdleConns = 200
	defer tr.CloseIdleConnections()
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: "herald-bench"},
		option.WithEndpoint(sb.URL()+"/v1"), option.WithoutAuthentication(), option.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return benchRun{}, err
	}
	client, err := app.Messaging(ctx)
	if err != nil {
		return benchRun{}, err
	}
	tokens := benchTokens("raw", n)
	batches := make(chan []string)
	go func() {
		for i := 0; i < len(tokens); i += 500 {
			batches <- tokens[i:min(i+500, len(tokens))]
		}
		close(batches)
	}()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	// The very payload Herald's FCM sender makes of the pipeline run's notification (title, body,
	// its id as collapse key and tag, the lane's priority for Android and APNs): the same bytes
	// to build, send and parse, so the runs differ only by what the pipeline adds.
	payload := notify.OutboundMessage{Channel: notify.ChannelPush, Content: bn.Content,
		CollapseID: bn.EffectiveCollapseID(), Priority: bn.Priority}
	stopProfile, err := startProfile("raw-" + string(bn.Lane))
	if err != nil {
		return benchRun{}, err
	}
	defer stopProfile()
	span := startSpan()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				br, err := client.SendEachForMulticast(ctx, fcm.MulticastFor(payload, b, time.Now()))
				if err == nil && br.FailureCount > 0 {
					err = fmt.Errorf("%d failures in a batch", br.FailureCount)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	run := span.end(n)
	if firstErr != nil {
		return benchRun{}, firstErr
	}
	if got := sb.Recorder.Len(); got != n {
		return benchRun{}, fmt.Errorf("sandbox recorded %d of %d", got, n)
	}
	return run, nil
}

// noonInSeoul is the wall clock shifted so that it is about noon in Seoul when the bench
// starts: the bulk run sends marketing, which quiet hours would hold at night. Only the time of
// day moves; durations, leases and delays are real.
type noonInSeoul struct{ offset time.Duration }

func newNoonInSeoul() noonInSeoul {
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		return noonInSeoul{}
	}
	now := time.Now().In(seoul)
	noon := time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, seoul)
	return noonInSeoul{offset: noon.Sub(now)}
}

func (c noonInSeoul) Now() time.Time { return time.Now().Add(c.offset) }

func benchPipeline(n, per, sendWorkers int, lane notify.Lane) (benchRun, error) {
	cfg := config.Dev()
	lc := cfg.Lanes[string(lane)]
	lc.Send.MaxConcurrency = sendWorkers
	lc.Prepare.MaxConcurrency = cfg.Lanes[string(notify.LaneRealtime)].Prepare.MaxConcurrency
	cfg.Lanes[string(lane)] = lc
	cfg.Providers.APNs.Apps = nil // FCM only, like the raw run
	// The sandbox records in memory, as in the raw run: only the pipeline's own work differs.
	r, stopRuntime, err := startBenchRuntime(cfg, local.Options{Clock: newNoonInSeoul()})
	if err != nil {
		return benchRun{}, err
	}
	defer stopRuntime()

	tokens := benchTokens("e2e", n)
	var bodies [][]byte
	for i := 0; i < n; i += per {
		req := benchRequest(lane)
		for _, t := range tokens[i:min(i+per, n)] {
			req.Recipients = append(req.Recipients, notify.Recipient{FCMToken: t})
		}
		b, _ := json.Marshal(req)
		bodies = append(bodies, b)
	}
	stopProfile, err := startProfile(string(lane))
	if err != nil {
		return benchRun{}, err
	}
	defer stopProfile()
	span := startSpan()
	var ids []string
	var firstAccepted time.Duration
	for _, b := range bodies {
		var acc struct{ ID string }
		if err := call(http.MethodPost, r.URL+"/v1/notifications", "dev-demo-key", b, &acc); err != nil {
			return benchRun{}, err
		}
		ids = append(ids, acc.ID)
		if len(ids) == 1 {
			firstAccepted = time.Since(span.start)
		}
	}
	posted := time.Since(span.start)
	deadline := time.Now().Add(10 * time.Minute)
	// Every push at the sandbox first (an in-process count), then every notification SENT: the
	// API is asked only at the end, so its reads are not counted as the pipeline's work.
	for r.Sandbox.Recorder.Len() < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	for _, id := range ids {
		for {
			var st struct{ Status string }
			if err := call(http.MethodGet, r.URL+"/v1/notifications/"+id+"?limit=1", "dev-demo-key", nil, &st); err == nil && st.Status != "" &&
				st.Status != "ACCEPTED" && st.Status != "PROCESSING" {
				if st.Status != "SENT" {
					return benchRun{}, fmt.Errorf("notification %s ended %s", id, st.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				return benchRun{}, fmt.Errorf("notification %s not finished after 10 minutes", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	run := span.end(n)
	pushes := r.Sandbox.Recorder.List("", "") // oldest first, each with the time the sandbox took it
	if len(pushes) != n {
		return benchRun{}, fmt.Errorf("sandbox recorded %d deliveries, want %d", len(pushes), n)
	}
	at := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	run.phases = fmt.Sprintf("first request accepted %v, all %d %v; first push %v, last %v; all SENT %v", at(firstAccepted),
		len(ids), at(posted), at(pushes[0].At.Sub(span.start)), at(pushes[n-1].At.Sub(span.start)), at(run.wall))
	return run, nil
}
