package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"herald/internal/apns"
	"herald/internal/config"
	"herald/internal/fcm"
)

// campaignKillConfig is the development setup with short visibility timeouts and send lease, so
// the work in flight at a SIGKILL comes back within seconds of the restart instead of a minute,
// and two bulk send workers, so a kill can catch two batches at once.
//
// The send lease (the local runtime takes it from the realtime send visibility timeout) stays
// well above the time one batch of 500 takes to send here, so a resend can only come from a
// kill, never from a lease running out under a live worker.
const campaignKillConfig = `
env: e2e
sandbox: true
services:
  - name: demo
    api_keys: [dev-demo-key]
    max_concurrency: 4
lanes:
  realtime:
    send: {visibility_timeout: 5s}
  bulk:
    prepare: {visibility_timeout: 10s}
    send: {max_concurrency: 2, visibility_timeout: 5s}
    record: {visibility_timeout: 5s}
retry: {base: 200ms, max: 2s}
providers:
  fcm:
    apps: {default: {project_id: herald-e2e}}
  apns:
    apps: {default: {topic: com.example.e2e}}
  ses: {from: noreply@example.com}
  twilio: {account_sid: AC00000000000000000000000000000000, auth_token: sandboxtoken0000, from: "+15005550006"}
contacts:
  encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=
`

// killCampaignRate is the campaign's max_rate (recipients per second), a little under what the
// local runtime delivers here: it spreads the audience's pages over the campaign, as for any
// campaign sent at a provider's pace, so kills land while the runner is still paging and
// dispatching (state RUNNING) and the restart has to resume from the saved cursor. Unthrottled,
// the whole audience is dispatched within a second and every kill would find it COMPLETED.
const killCampaignRate = 3000

// Token parts that must never show up in a log: masked tokens keep only 4 characters each end.
const (
	killFCMInfix  = "-campaign-kill-fcm-token-"
	killAPNsInfix = "c0ffeec0ffeec0ffee"
)

type killDevice struct {
	user, token, platform string
}

// campaignKillDevices returns n devices of app "default", in registration order. Most users
// have one device (every third an APNs device, the rest FCM). Some have two of different
// platforms (a phone and a tablet), which makes them campaign members once per device, and each
// device must still get exactly one delivery (internal/campaign's package comment): one user in
// twenty registers both at once, so they sit next to each other in the audience and now and then
// on either side of a chunk's edge; another one in twenty registers the second device after
// every first device, so it is pages away from the first.
func campaignKillDevices(n int) []killDevice {
	ds := make([]killDevice, 0, n)
	add := func(user int, platform string) {
		i := len(ds)
		d := killDevice{user: fmt.Sprintf("ck-user-%07d", user), platform: platform,
			token: fmt.Sprintf("ck%07d%spadding-to-a-realistic-length", i, killFCMInfix)}
		if platform == "apns" {
			d.token = strings.Repeat("c0ffee", 10)[:56] + fmt.Sprintf("%08x", i) // 64 hex digits, like a real one
		}
		ds = append(ds, d)
	}
	first := func(u int) string {
		if u%3 == 0 {
			return "apns"
		}
		return "fcm"
	}
	other := func(p string) string {
		if p == "apns" {
			return "fcm"
		}
		return "apns"
	}
	users := n * 20 / 22 // 20 users have 22 devices
	for u := 0; u < users && len(ds) < n; u++ {
		add(u, first(u))
		if u%20 == 10 && len(ds) < n {
			add(u, other(first(u)))
		}
	}
	for u := 0; u < users && len(ds) < n; u += 20 {
		add(u, other(first(u)))
	}
	for u := users; len(ds) < n; u++ { // rounding: single-device users up to n
		add(u, first(u))
	}
	return ds
}

// TestCampaignKilledThreeTimesReachesEveryDeviceOnce is the acceptance test of docs/design.md
// §1 and §4: `herald dev` killed with SIGKILL three times at random points of a push campaign to
// every device of an app, and restarted on the same data directory each time, completes the campaign;
// every device gets a delivery, and the only devices that get two are those whose batch was in
// flight at a kill, resent after it with the same collapse id (the campaign's id).
//
// HERALD_KILL_CAMPAIGN_DEVICES sets the audience (default 20,000; 300,000 is the full acceptance
// run) and HERALD_KILL_CAMPAIGN_SEED replays the kill points of an earlier run.
func TestCampaignKilledThreeTimesReachesEveryDeviceOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills the herald binary; skipped with -short")
	}
	n := 20000
	if s := os.Getenv("HERALD_KILL_CAMPAIGN_DEVICES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1000 {
			t.Fatalf("HERALD_KILL_CAMPAIGN_DEVICES=%q: want an integer ≥ 1000", s)
		}
		n = v
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HERALD_KILL_CAMPAIGN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HERALD_KILL_CAMPAIGN_SEED=%q: want an unsigned integer", s)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 0x6865_7261_6c64))
	const kills = 3
	fracs := make([]float64, kills)
	for i := range fracs {
		fracs[i] = 0.15 + 0.70*rng.Float64()
	}
	slices.Sort(fracs)
	t.Logf("%d devices; seed %d (HERALD_KILL_CAMPAIGN_SEED=%d replays it): SIGKILL after %.1f%%, %.1f%%, %.1f%% of the deliveries",
		n, seed, seed, 100*fracs[0], 100*fracs[1], 100*fracs[2])

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "herald.yaml")
	if err := os.WriteFile(cfgPath, []byte(campaignKillConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// In flight at a kill is at most what the bulk send workers hold: each has received up to
	// batch_size send messages of at most one provider batch (500 FCM or APNs tokens) each.
	bulkSend := cfg.Lanes["bulk"].Send
	inFlight := bulkSend.MaxConcurrency * bulkSend.BatchSize * max(fcm.MaxBatch, apns.MaxBatch)
	t.Logf("in flight at a kill ≤ %d bulk send workers × %d messages × %d tokens = %d deliveries; ≤ %d over %d kills",
		bulkSend.MaxConcurrency, bulkSend.BatchSize, max(fcm.MaxBatch, apns.MaxBatch), inFlight, kills*inFlight, kills)

	data := filepath.Join(dir, "data")
	if d := os.Getenv("HERALD_E2E_DATA"); d != "" { // keep the databases for a post-mortem
		data = d
	}
	recordFile := filepath.Join(data, "sandbox-deliveries.jsonl")
	if _, err := os.Stat(recordFile); err == nil {
		t.Fatalf("%s already holds a sandbox record: the test needs an empty data directory", data)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	logs := newKillLog(killFCMInfix, killAPNsInfix, "dev-demo-key")
	t.Cleanup(func() {
		if f := os.Getenv("HERALD_E2E_LOG"); f != "" {
			_ = os.WriteFile(f, []byte(logs.String()), 0o600)
		}
	})
	// Generous, but bounded: a stalled campaign fails the test instead of hanging it.
	stepTimeout := max(2*time.Minute, time.Duration(n)*2*time.Millisecond)

	p := startKillHerald(t, addr, data, cfgPath, logs)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(client.CloseIdleConnections)

	devices := campaignKillDevices(n)
	regStart := time.Now() // in order, so every second device is registered after all the first ones
	registerKillDevices(t, client, base, devices, 8)
	reg := time.Since(regStart)
	t.Logf("registered %d devices with PUT /v1/users/{user}/devices/{token} (8 at a time) in %v: %.0f/s",
		n, reg.Round(time.Millisecond), float64(n)/reg.Seconds())

	var created struct{ ID, State string }
	start := time.Now()
	if code := killAPI(client, http.MethodPost, base+"/v1/campaigns", map[string]any{
		"idempotency_key": "campaign-kill-test",
		"category":        "transactional", // marketing needs consent (docs/design.md §3, §4)
		"channels":        []string{"push"},
		"content":         map[string]string{"title": "Kill test", "body": "every device once"},
		"audience":        map[string]any{"sources": []map[string]string{{"kind": "app_devices", "app": "default"}}},
		"quiet_hours":     map[string]bool{"enabled": false}, // whatever the time of day of the run
		"max_rate":        killCampaignRate,
	}, &created); code != http.StatusAccepted || created.ID == "" {
		t.Fatalf("POST /v1/campaigns = %d %+v\n%s", code, created, logs.tail())
	}
	t.Logf("campaign %s created (%s)", created.ID, created.State)

	rec := &recordTail{path: recordFile}
	var bounds []int // record lines when each killed process had exited: the lifetimes' boundaries
	for k, f := range fracs {
		at := int(f * float64(n))
		if now := rec.lines(t); at <= now {
			at = now + 1 // never kill a fresh process before it has delivered anything
		}
		deadline := time.Now().Add(stepTimeout)
		nextLook := time.Now().Add(time.Second)
		for rec.lines(t) < at {
			select {
			case err := <-p.done:
				t.Fatalf("herald dev exited on its own before kill %d: %v\n%s", k+1, err, logs.tail())
			default:
			}
			if time.Now().After(nextLook) { // fail fast if the campaign ended short of the kill point
				nextLook = time.Now().Add(time.Second)
				var cst campaignStatus
				killAPI(client, http.MethodGet, base+"/v1/campaigns/"+created.ID, nil, &cst)
				if cst.State == "COMPLETED" && cst.Totals.Pending == 0 {
					t.Fatalf("kill %d: the campaign ended %s with %d deliveries recorded, before the kill point %d\n%s",
						k+1, killTotals(cst), rec.lines(t), at, logs.tail())
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: fewer than %d deliveries recorded after %v (%d)\n%s", k+1, at, stepTimeout, rec.lines(t), logs.tail())
			}
			time.Sleep(10 * time.Millisecond)
		}
		var st campaignStatus
		killAPI(client, http.MethodGet, base+"/v1/campaigns/"+created.ID, nil, &st)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		bounds = append(bounds, rec.lines(t))
		t.Logf("kill %d: SIGKILL at %d recorded deliveries (aimed at %.1f%% = %d; %d when the process was gone); campaign %s, %d members dispatched, %d sent",
			k+1, at, 100*f, int(f*float64(n)), bounds[k], st.State, st.Totals.Members, st.Totals.Sent)
		p = startKillHerald(t, addr, data, cfgPath, logs)
	}

	// The last start finishes the campaign: COMPLETED (audience read and dispatched) with
	// nothing pending (every member prepared, every delivery ended) and nothing failed.
	deadline := time.Now().Add(stepTimeout)
	var st campaignStatus
	for {
		st = campaignStatus{}
		killAPI(client, http.MethodGet, base+"/v1/campaigns/"+created.ID, nil, &st)
		if st.State == "CANCELED" || st.State == "FAILED" {
			t.Fatalf("campaign %s ended %s after %d kills\n%s", created.ID, st.State, kills, logs.tail())
		}
		if st.State == "COMPLETED" && st.Totals.Pending == 0 {
			if st.Totals.Failed != 0 {
				t.Fatalf("campaign %s COMPLETED with failures: %s\n%s", created.ID, killTotals(st), logs.tail())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("campaign %s not done %v after the last restart: state %q, totals %s, %d deliveries recorded\n%s",
				created.ID, stepTimeout, st.State, killTotals(st), rec.lines(t), logs.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	wall := time.Since(start)
	time.Sleep(500 * time.Millisecond) // a late resend would show up here
	// The totals as they stand a moment later (a late resend would show here).
	st = campaignStatus{}
	if code := killAPI(client, http.MethodGet, base+"/v1/campaigns/"+created.ID, nil, &st); code != http.StatusOK {
		t.Errorf("GET /v1/campaigns/%s = %d", created.ID, code)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("herald dev after SIGTERM: %v\n%s", err, logs.tail())
		}
	case <-time.After(40 * time.Second):
		t.Errorf("herald dev did not stop within 40s of SIGTERM")
		_ = p.cmd.Process.Kill()
		<-p.done
	}

	// The sandbox's durable record is the truth of what reached the providers.
	want := make(map[string]string, n) // token → provider
	devicesOf := map[string]int{}
	for _, d := range devices {
		want[d.token] = d.platform
		devicesOf[d.user]++
	}
	lines := readKillRecord(t, recordFile)
	got := map[string][]int{} // token → record line of each delivery
	badCollapse, wrongProvider, unknown := 0, 0, 0
	for i, r := range lines {
		prov, ok := want[r.Address]
		if !ok {
			unknown++
			continue
		}
		got[r.Address] = append(got[r.Address], i)
		if r.CollapseID != created.ID {
			if badCollapse++; badCollapse <= 5 {
				t.Errorf("record line %d (%s %s) carries collapse id %q, want the campaign id %q", i, r.Provider, maskForLog(r.Address), r.CollapseID, created.ID)
			}
		}
		if r.Provider != prov {
			if wrongProvider++; wrongProvider <= 5 {
				t.Errorf("record line %d: %s token delivered through %s", i, prov, r.Provider)
			}
		}
	}
	lifetime := func(line int) int { // 0 before the first kill, k after the k-th
		l := 0
		for l < len(bounds) && line >= bounds[l] {
			l++
		}
		return l
	}
	var (
		missing, resentDevices, resends int
		perKill                         = make([]int, kills)
		unexplained                     int
	)
	for i, d := range devices {
		idx := got[d.token]
		switch {
		case len(idx) == 0:
			if missing++; missing <= 5 {
				t.Errorf("device #%d (%s %s of user %s) never got the campaign", i, d.platform, maskForLog(d.token), d.user)
			}
			continue
		case len(idx) > 1:
			resentDevices++
		}
		for j := 1; j < len(idx); j++ {
			resends++
			a, b := lifetime(idx[j-1]), lifetime(idx[j])
			if a == b {
				// Both copies from one process lifetime: nothing was killed between them.
				if unexplained++; unexplained <= 5 {
					t.Errorf("device #%d (%s %s of user %s, who has %d devices) got the campaign twice within one run of herald dev (record lines %d and %d, run %d): a duplicate no kill explains",
						i, d.platform, maskForLog(d.token), d.user, devicesOf[d.user], idx[j-1], idx[j], a+1)
				}
				continue
			}
			perKill[a]++ // in flight at the kill that ended the first copy's run
		}
	}
	t.Logf("%d devices, %d SIGKILLs at %v record lines: wall time %v from POST /v1/campaigns to COMPLETED+SENT (%.0f deliveries/s); %d deliveries recorded",
		n, kills, bounds, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), len(lines))
	t.Logf("resent devices: %d (%d extra deliveries; per kill %v; bound %d per kill from the config); missing: %d; wrong collapse id: %d; campaign totals %s",
		resentDevices, resends, perKill, inFlight, missing, badCollapse, killTotals(st))

	if missing > 0 {
		t.Errorf("%d of %d devices never got the campaign", missing, n)
	}
	if unknown > 0 {
		t.Errorf("the sandbox recorded %d deliveries to addresses that are no registered device", unknown)
	}
	if len(got) != n {
		t.Errorf("the sandbox saw %d distinct devices, want %d", len(got), n)
	}
	if unexplained > 0 {
		t.Errorf("%d resends within a single run of herald dev (not in flight at a kill)", unexplained)
	}
	for k, c := range perKill {
		if c > inFlight {
			t.Errorf("kill %d: %d devices resent, more than the %d the bulk send workers can hold in flight", k+1, c, inFlight)
		}
	}
	if resends > kills*inFlight {
		t.Errorf("%d resends: more than %d kills × %d in flight", resends, kills, inFlight)
	}
	if st.Totals.Sent != n || st.Totals.Failed != 0 {
		t.Errorf("campaign totals %s: want %d sent, 0 failed", killTotals(st), n)
	}
	if leaks := logs.leaks(); len(leaks) > 0 {
		t.Errorf("the log holds raw secrets or tokens (%v), e.g.:\n%s", leaks, logs.firstLeak())
	}
}

// registerKillDevices registers ds through the API, workers at a time; there is no bulk route
// or CLI for devices. A failing PUT is retried twice before the test fails.
func registerKillDevices(t *testing.T, client *http.Client, base string, ds []killDevice, workers int) {
	t.Helper()
	jobs := make(chan killDevice)
	var (
		wg      sync.WaitGroup
		failed  atomic.Bool
		errMu   sync.Mutex
		firstEr string
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				var code int
				for range 3 {
					if code = killAPI(client, http.MethodPut, base+"/v1/users/"+d.user+"/devices/"+d.token,
						map[string]string{"platform": d.platform, "app": "default"}, nil); code == http.StatusOK {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if code != http.StatusOK && !failed.Swap(true) {
					errMu.Lock()
					firstEr = fmt.Sprintf("PUT device of %s = %d", d.user, code)
					errMu.Unlock()
				}
			}
		}()
	}
	for _, d := range ds {
		if failed.Load() {
			break
		}
		jobs <- d
	}
	close(jobs)
	wg.Wait()
	if failed.Load() {
		t.Fatalf("register devices: %s", firstEr)
	}
}

// killAPI calls the API as service demo and decodes the answer into out; 0 if the call failed.
func killAPI(client *http.Client, method, url string, body, out any) int {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer dev-demo-key")
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
	}
	return resp.StatusCode
}

// recordTail counts the complete lines of the sandbox's record file as it grows, reading only
// what was appended since the last call.
type recordTail struct {
	path string
	off  int64
	n    int
	buf  []byte
}

func (r *recordTail) lines(t *testing.T) int {
	t.Helper()
	f, err := os.Open(r.path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r.buf == nil {
		r.buf = make([]byte, 1<<20)
	}
	for {
		k, err := f.ReadAt(r.buf, r.off)
		r.n += bytes.Count(r.buf[:k], []byte{'\n'})
		r.off += int64(k)
		if err == io.EOF || k == 0 {
			return r.n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readKillRecord reads every line of the sandbox record, in order; a line that does not decode
// (a write torn by a kill) fails the test rather than hide a delivery.
func readKillRecord(t *testing.T, path string) []record {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A running herald may be writing its last line as we read: only whole lines count.
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	var out []record
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for i := 0; sc.Scan(); i++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("record line %d does not decode (torn by a kill?): %v", i, err)
		}
		out = append(out, r) // kept even if torn, so line numbers match the kill boundaries
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func maskForLog(token string) string {
	if len(token) <= 12 {
		return "***"
	}
	return token[:4] + "…" + token[len(token)-4:]
}

// killLog keeps herald's log lines except the access log (one line per request: 300,000 device
// registrations would be most of it), and checks every line, access log included, for the
// strings that must never be logged.
type killLog struct {
	secrets []string

	mu    sync.Mutex
	buf   bytes.Buffer
	found map[string]int
	first string
}

func newKillLog(secrets ...string) *killLog {
	return &killLog{secrets: secrets, found: map[string]int{}}
}

func (l *killLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sec := range l.secrets {
		if strings.Contains(s, sec) {
			l.found[sec]++
			if l.first == "" {
				l.first = s
			}
		}
	}
	if !strings.Contains(s, `"msg":"http request"`) {
		l.buf.WriteString(s)
		l.buf.WriteByte('\n')
	}
}

func (l *killLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *killLog) tail() string { return tail(l.String()) }

func (l *killLog) leaks() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.found)
}

func (l *killLog) firstLeak() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// startKillHerald starts `herald dev` like startHerald, logging into l.
func startKillHerald(t *testing.T, addr, data, cfg string, l *killLog) *proc {
	t.Helper()
	cmd := exec.Command(heraldBin, "dev", "--addr", addr, "--data", data, "--config", cfg)
	cmd.Stdout = io.Discard
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	exited := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := false
		for sc.Scan() {
			l.line(sc.Text())
			if !once && strings.Contains(sc.Text(), "herald dev started") {
				once = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, pr) // a line too long for the scanner must not block herald
	}()
	go func() { err := cmd.Wait(); pw.Close(); p.done <- err; close(exited) }()
	t.Cleanup(func() { // every process the test starts is stopped, whatever happened
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("herald dev (pid %d) still running 10s after SIGKILL", cmd.Process.Pid)
		}
	})
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("herald dev exited at start: %v\n%s", err, l.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("herald dev not ready after 30s\n%s", l.tail())
	}
	return p
}

func killTotals(st campaignStatus) string {
	t := st.Totals
	rem := strconv.Itoa(t.Remaining)
	if !t.RemainingExact {
		rem = "~" + rem
	}
	return fmt.Sprintf("{members %d, total %d, sent %d, failed %d, skipped %d, pending %d, remaining %s}",
		t.Members, t.Total, t.Sent, t.Failed, t.Skipped, t.Pending, rem)
}
