package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"herald/internal/webpush"
)

// TestHelp: every command and subcommand answers -h, --help and help with its usage on stdout,
// naming its flags, and exit code 0; nothing on stderr, no server needed.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"herald dev", "herald send", "HERALD_API", "HERALD_API_KEY", "Exit codes"}},
		{[]string{"dev"}, []string{"-addr", "-data", "-config", "-log-level", "-sandbox-addr"}},
		{[]string{"send"}, []string{"-api", "-key", "-to", "-channels", "-title", "-body", "-category", "-idempotency-key", "-wait", "HERALD_API"}},
		{[]string{"dlq"}, []string{"-api", "-key", "show QUEUE", "redrive QUEUE"}},
		{[]string{"dlq", "show"}, []string{"-api", "-key", "-limit", "-json"}},
		{[]string{"dlq", "redrive"}, []string{"-api", "-key"}},
		{[]string{"campaign"}, []string{"campaign create", "campaign watch"}},
		{[]string{"campaign", "create"}, []string{"-api", "-key", "-app", "-lists", "-title", "-body", "-channels", "-category", "-send-at", "-max-rate", "-idempotency-key"}},
		{[]string{"campaign", "watch"}, []string{"-api", "-key", "-every", "paused_until", "Exits 0"}},
		{[]string{"audience"}, []string{"audience upload", "audience show"}},
		{[]string{"audience", "upload"}, []string{"-api", "-key", "LIST FILE"}},
		{[]string{"audience", "show"}, []string{"-api", "-key", "LIST"}},
		{[]string{"template"}, []string{"template put", "template show", "template preview"}},
		{[]string{"template", "put"}, []string{"-api", "-key", "NAME FILE", "channels.email.html"}},
		{[]string{"template", "show"}, []string{"-api", "-key", "-version"}},
		{[]string{"template", "preview"}, []string{"-api", "-key", "-data", "-version", "missing"}},
		{[]string{"schedules"}, []string{"schedules rearm"}},
		{[]string{"schedules", "rearm"}, []string{"-api", "-key", "-sigv4", "-limit"}},
		{[]string{"audit"}, []string{"-api", "-key", "-sigv4", "-actor", "-action", "-target", "-since", "-limit", "-json"}},
		{[]string{"export"}, []string{"export create", "export list", "export show", "export download", "notifications|suppressions"}},
		{[]string{"export", "list"}, []string{"-api", "-key", "-limit", "-json"}},
		{[]string{"export", "create"}, []string{"-api", "-key", "-kind", "-format", "-notification", "-status", "-channel", "-reason", "-action", "-since", "-json", "suppressions"}},
		{[]string{"export", "show"}, []string{"-api", "-key", "-json"}},
		{[]string{"export", "download"}, []string{"-api", "-key", "-out", "-timeout"}},
		{[]string{"webpush"}, []string{"webpush keys"}},
		{[]string{"webpush", "keys"}, []string{"-json", "providers.webpush"}},
		{[]string{"inbox"}, []string{"inbox migrate"}},
		{[]string{"inbox", "migrate"}, []string{"-env", "-table-prefix", "-dynamodb-endpoint", "dynamodb:Scan", "safe to run again"}},
		{[]string{"bench"}, []string{"-recipients", "-per-notification", "-raw-batches", "-send-workers", "-cpuprofile", "-rounds", "bench campaign", "bench export", "bench cost"}},
		{[]string{"bench", "campaign"}, []string{"-devices", "-probe-rate", "-idle-probes", "-max-probes", "-timeout"}},
		{[]string{"bench", "export"}, []string{"-rows"}},
		{[]string{"bench", "cost"}, []string{"-sends", "-devices", "-dynamodb-endpoint", "HERALD_DYNAMODB_ENDPOINT", "-timeout"}},
	} {
		for _, h := range []string{"-h", "--help", "help"} {
			args := append(append([]string(nil), c.args...), h)
			var stdout, stderr strings.Builder
			if code := run(args, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Errorf("herald %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("herald %s: usage does not name %q:\n%s", strings.Join(args, " "), w, stdout.String())
				}
			}
		}
	}
	// The entry functions themselves report help as flag.ErrHelp, which is exit 0.
	var out strings.Builder
	if err := runSend([]string{"-h"}, &out); exitCode(err) != 0 || !strings.Contains(out.String(), "-to") {
		t.Errorf("runSend -h = %v, usage %q", err, out.String())
	}
}

// TestUsageErrors: a bad flag or argument is exit 2 with the problem and the way to help on
// stderr, and no usage dump on stdout.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--nope"}, `herald send: flag provided but not defined: -nope` + "\n" + `Run "herald send -h" for usage.`},
		{[]string{"send", "--to", "alice", "--body", "x"}, `--to "alice": want kind:value`},
		{[]string{"campaign"}, "want a subcommand"},
		{[]string{"campaign", "nope"}, `unknown subcommand "nope"`},
		{[]string{"campaign", "create", "--send-at", "tomorrow"}, `Run "herald campaign create -h" for usage.`},
		{[]string{"campaign", "watch"}, "want one campaign id"},
		{[]string{"audience", "upload", "vip"}, "want LIST and FILE"},
		{[]string{"template", "put", "welcome"}, "want NAME and FILE"},
		{[]string{"template", "preview", "welcome", "--data", "[1]"}, "--data must be a JSON object"},
		{[]string{"dlq", "show"}, "want one queue"},
		{[]string{"dlq", "nope"}, `unknown subcommand "nope"`},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"bench", "nope"}, `unknown subcommand "nope" (campaign, export, cost)`},
		{[]string{"bench", "cost", "--sends", "0"}, "--sends and --devices must be at least 1"},
		{[]string{"bench", "cost", "now"}, `unexpected argument "now"`},
		{[]string{"bench", "cost", "--dynamodb-endpoint", ""}, "--dynamodb-endpoint (or HERALD_DYNAMODB_ENDPOINT) is required"},
		{[]string{"inbox", "migrate"}, "--env (or --table-prefix) is required"},
		{[]string{"inbox", "migrate", "--env", "prod", "now"}, `unexpected argument "now"`},
		{nil, "Usage:"},
	} {
		var stdout, stderr strings.Builder
		if code := run(c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("herald %s: exit %d, stdout %q, stderr %q; want 2 and %q on stderr", strings.Join(c.args, " "), code, stdout.String(), stderr.String(), c.want)
		}
	}
}

// TestParseFlagsAnywhere: flags may follow the positional arguments; "--" ends them.
func TestParseFlagsAnywhere(t *testing.T) {
	t.Parallel()
	fs := newFlagSet("x", "", "")
	n := fs.Int("n", 0, "")
	v := fs.Bool("v", false, "")
	pos, err := parseFlags(fs, []string{"a", "-n", "3", "b", "-v", "--", "-c", "d"}, nil)
	if err != nil || *n != 3 || !*v || strings.Join(pos, " ") != "a b -c d" {
		t.Fatalf("parseFlags = %q, %v; n=%d v=%v", pos, err, *n, *v)
	}
}

// TestDLQShow prints dead letters as a table — reason and payload cut to fit, a dead letter with
// no recorded reason explained — and --json prints the API's answer.
func TestDLQShow(t *testing.T) {
	t.Parallel()
	answer := map[string]any{"queue": "send-realtime", "dead_letters": []map[string]any{
		{"id": "m-1", "code": "invalid", "error": "send: batch body is not JSON:\n unexpected end of input", "source_queue": "send-realtime",
			"receive_count": 1, "sent_at": time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC),
			"payload": map[string]any{"notification_id": "n_1", "addresses": []string{"a***@example.com"}, "more": strings.Repeat("x", 100)}},
		{"id": "m-2", "receive_count": 5, "sent_at": time.Date(2026, 12, 1, 9, 31, 0, 0, time.UTC), "payload": "t***"},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/admin/queues/send-realtime/dead-letters" || r.URL.Query().Get("limit") != "5" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)

	var out, errOut strings.Builder
	if code := run([]string{"dlq", "--api", srv.URL, "show", "send-realtime", "--limit", "5"}, &out, &errOut); code != 0 {
		t.Fatalf("dlq show: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, 2 rows and a summary:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"ID", "RECEIVES", "CODE", "REASON", "SENT", "PAYLOAD"},
		{"m-1", " 1 ", "invalid", "send: batch body is not JSON: unexpected end of input", "2026-12-01 09:30:00Z", `{"addresses":["a***@example.com"],"more":"xxx`, "…"},
		{"m-2", " 5 ", " - ", "failed every receive", "2026-12-01 09:31:00Z", `"t***"`},
		{"2 dead letters in send-realtime"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(out.String(), strings.Repeat("x", 100)) {
		t.Errorf("payload not cut:\n%s", out.String())
	}

	out.Reset()
	if code := run([]string{"dlq", "show", "--json", "--limit=5", "--api", srv.URL, "send-realtime"}, &out, &errOut); code != 0 {
		t.Fatalf("dlq show --json: exit %d: %s", code, errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got["dead_letters"].([]any)) != 2 {
		t.Fatalf("--json printed %v (%v), want the API's answer", out.String(), err)
	}
}

func TestWebPushKeys(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"webpush", "keys", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var k struct {
		Public  string `json:"public_key"`
		Private string `json:"private_key"`
	}
	if err := json.Unmarshal([]byte(out.String()), &k); err != nil {
		t.Fatal(err)
	}
	if _, err := webpush.ParseKeys(k.Public, k.Private); err != nil {
		t.Fatalf("generated keys do not belong together: %v", err)
	}
	out.Reset()
	if code := run([]string{"webpush", "keys"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "vapid_public_key: ") {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
	if code := run([]string{"webpush", "keys", "extra"}, &out, &errOut); code != 2 {
		t.Errorf("an argument: exit %d, want 2", code)
	}
	if code := run([]string{"webpush", "nope"}, &out, &errOut); code != 2 {
		t.Errorf("unknown subcommand: exit %d, want 2", code)
	}
}

// The local runtime's processes run twice the default GOMAXPROCS, unless the environment sets it.
func TestLocalProcs(t *testing.T) {
	if got := localProcs("", 2); got != 4 {
		t.Fatalf("localProcs(unset, 2) = %d, want 4", got)
	}
	if got := localProcs("3", 3); got != 3 {
		t.Fatalf("localProcs(GOMAXPROCS=3, 3) = %d, want 3: the environment wins", got)
	}
}

// The local runtime's processes hold a heap floor, unless the environment sets GOGC; the export
// bench (an export's heap) and the cost bench (the deployed functions' durations) do not.
func TestKeepsHeapFloor(t *testing.T) {
	for _, c := range []struct {
		args []string
		gogc string
		want bool
	}{
		{[]string{"dev"}, "", true},
		{[]string{"bench"}, "", true},
		{[]string{"bench", "campaign"}, "", true},
		{[]string{"bench", "single", "--duration", "5s"}, "", true},
		{[]string{"bench", "export"}, "", false},
		{[]string{"bench", "cost", "--dynamodb-endpoint", "http://127.0.0.1:8000"}, "", false},
		{[]string{"dev"}, "200", false},
		{[]string{"bench"}, "off", false},
	} {
		if got := keepsHeapFloor(c.args, c.gogc); got != c.want {
			t.Errorf("keepsHeapFloor(%q, GOGC=%q) = %v, want %v", c.args, c.gogc, got, c.want)
		}
	}
}
