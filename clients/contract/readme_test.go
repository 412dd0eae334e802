package contract

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"herald/internal/awsenv/awsenvtest"
	"herald/internal/notify"
)

// readmeExamples are the examples of docs/sending.md ("Sending from your service"), by name
// (a block opening "// example: <name>").
func readmeExamples(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/sending.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```(?:go|ts)\n// example: ([a-z-]+)\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// runExample writes an example as a program of this module (under testdata, which no ./...
// pattern builds) and runs it with env; it returns what it printed.
func runExample(t *testing.T, name, src string, env ...string) string {
	t.Helper()
	dir := filepath.Join("testdata", "readme", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.ToSlash(dir))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestContractREADMEExamples runs the Go and TypeScript examples of docs/sending.md: over HTTP against `herald dev`'s
// runtime (its address for 127.0.0.1:8080), and over SQS against the AWS runtime's ingest queue.
func TestContractREADMEExamples(t *testing.T) {
	ex := readmeExamples(t)
	if len(ex) != 4 || ex["go-http"] == "" || ex["go-sqs"] == "" || ex["ts-http"] == "" || ex["ts-sqs"] == "" {
		t.Fatalf("docs/sending.md examples %v, want go-http, go-sqs, ts-http and ts-sqs", keys(ex))
	}
	report(t, "go", "http", "README example", func(t *testing.T) {
		rt := startLocal(t)
		out := runExample(t, "go-http", strings.ReplaceAll(ex["go-http"], "http://127.0.0.1:8080", rt.URL))
		if !strings.HasPrefix(out, "accepted n_") {
			t.Fatalf("the example printed %q", out)
		}
		id := strings.TrimSpace(strings.TrimPrefix(out, "accepted "))
		deadline := time.Now().Add(20 * time.Second)
		for len(rt.Sandbox.Recorder.List("fcm", "fcm-alice-phone-0001")) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the example's notification %s never reached alice's phone", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	report(t, "go", "sqs", "README example", func(t *testing.T) {
		w := awsenvtest.Setup(t) // its environment (the SQS endpoint, credentials) is the example's too
		src := strings.Replace(ex["go-sqs"], `"orders"`, `"demo"`, 1)
		out := runExample(t, "go-sqs", src, "HERALD_INGEST_QUEUE_URL="+w.URLBase+notify.IngestQueue("demo"))
		if want := "queued " + notify.NotificationIDFor("demo", "order-1001-shipped", time.Now()); strings.TrimSpace(out) != want {
			t.Fatalf("the example printed %q, want %q", out, want)
		}
		ev := w.Receive(notify.IngestQueue("demo"), 1)
		if len(ev.Records) != 1 || !strings.Contains(ev.Records[0].Body, `"idempotency_key":"order-1001-shipped"`) {
			t.Fatalf("the queue holds %+v", ev.Records)
		}
	})
	report(t, "typescript", "http", "README example", func(t *testing.T) {
		rt := startLocal(t)
		out := runTSExample(t, "ts-http", strings.ReplaceAll(ex["ts-http"], "http://127.0.0.1:8080", rt.URL))
		if !strings.HasPrefix(out, "accepted n_") {
			t.Fatalf("the example printed %q", out)
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(rt.Sandbox.Recorder.List("fcm", "fcm-alice-phone-0001")) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the example's notification never reached alice's phone")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	report(t, "typescript", "sqs", "README example", func(t *testing.T) {
		w := awsenvtest.Setup(t)
		src := strings.Replace(ex["ts-sqs"], `"orders"`, `"demo"`, 1)
		out := runTSExample(t, "ts-sqs", src, "HERALD_INGEST_QUEUE_URL="+w.URLBase+notify.IngestQueue("demo"))
		if want := "queued " + notify.NotificationIDFor("demo", "order-1001-shipped", time.Now()); strings.TrimSpace(out) != want {
			t.Fatalf("the example printed %q, want %q", out, want)
		}
		ev := w.Receive(notify.IngestQueue("demo"), 1)
		if len(ev.Records) != 1 || !strings.Contains(ev.Records[0].Body, `"idempotency_key":"order-1001-shipped"`) {
			t.Fatalf("the queue holds %+v", ev.Records)
		}
	})
}

// runTSExample compiles a TypeScript example with the package's own tsc (its import of
// @herald/client resolves to the package itself) and runs it with env; it returns what it
// printed. Without node, or the package unbuilt, it skips as runTS does.
func runTSExample(t *testing.T, name, src string, env ...string) string {
	t.Helper()
	node := nodeOrSkip(t, name)
	dir := filepath.Join(tsDir, "contract", "readme")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, name+".ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tsc := exec.CommandContext(ctx, node, "node_modules/typescript/bin/tsc", "--module", "nodenext", "--moduleResolution", "nodenext",
		"--target", "es2022", "--strict", "--skipLibCheck", "--rootDir", "contract/readme", "--outDir", "contract/readme/out", "contract/readme/"+name+".ts")
	tsc.Dir = tsDir
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("example %s does not compile: %v\n%s", name, err, out)
	}
	cmd := exec.CommandContext(ctx, node, "contract/readme/out/"+name+".js")
	cmd.Dir = tsDir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder // the AWS SDK's warnings go there
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("example %s: %v\n%s\n%s", name, err, out, stderr.String())
	}
	return string(out)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
