package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herald/internal/apidoc"
)

// shellBlock is one ```sh block of README.md or docs/*.md.
type shellBlock struct {
	file         string // relative to the repository root
	line         int    // the opening fence's line
	text         string
	illustrative string // the name its <!-- illustrative: name --> marker gives it, if any
}

var illustrativeMarker = regexp.MustCompile(`^<!-- illustrative: ([a-z0-9-]+) -->$`)

// shellBlocks reads every shell block of README.md and of the Markdown files under docs/, in
// that order (WalkDir's, lexical).
func shellBlocks(t *testing.T, root string) []shellBlock {
	t.Helper()
	files, err := apidoc.DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []shellBlock
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			lang, ok := strings.CutPrefix(lines[i], "```")
			if !ok || lang == "" {
				continue
			}
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			if lang == "sh" || lang == "bash" || lang == "shell" || lang == "console" {
				b := shellBlock{file: filepath.ToSlash(rel), line: i + 1, text: strings.Join(lines[i+1:end], "\n")}
				if i > 0 {
					if m := illustrativeMarker.FindStringSubmatch(lines[i-1]); m != nil {
						b.illustrative = m[1]
					}
				}
				out = append(out, b)
			}
			i = end
		}
	}
	return out
}

// talksToLocalHerald is whether a block is one the test must run: it calls a local Herald's API
// or its CLI.
func talksToLocalHerald(text string) bool {
	return strings.Contains(text, "localhost:8080") || strings.Contains(text, "127.0.0.1:8080") ||
		strings.Contains(text, "go run ./cmd/herald")
}

// examplePrelude runs before each block: curl records every answer (method, URL, status, type and
// body) in $HERALD_EX_DIR and prints the body as curl -s would, so pipes still work; herald_id is
// the first "id" of the newest answer, for the <id> a block's text leaves to its reader.
const examplePrelude = `set -eo pipefail
curl() {
  local f; f="$HERALD_EX_DIR/answer-$(date +%s%N)-$BASHPID"
  command curl -sS "$@" -o "$f.body" -w '%{method} %{url_effective} %{http_code} %{content_type}\n' > "$f.meta"
  cat "$f.body"
}
herald_id() {
  grep -o '"id": *"[^"]*"' "$(ls "$HERALD_EX_DIR"/answer-*.body | sort | tail -1)" | head -1 | sed 's/.*"\([^"]*\)"$/\1/'
}
herald_cli() {
  echo >> "$HERALD_EX_DIR/cli-runs"
  "$HERALD_EX_BIN" "$@"
}
`

// exampleFixtures are the files a block reads from its working directory.
var exampleFixtures = map[string]string{
	"vip.csv": "user_id\nalice\nbob\nminji\n",
}

// TestDocExamples runs every shell block of README.md and docs/ that talks to a local Herald, in
// the files' order, against one `herald dev` with the development configuration: its address for
// localhost:8080 (and the 127.0.0.1:9000 of the "another port" example), the built binary for `go
// run ./cmd/herald`, and the newest answer's id for <id>. Every curl answer must be a success the
// OpenAPI document lists for its route, with the shape of that status's schema (the sandbox's
// own routes, not in the document, must at least answer JSON when they say they do); every CLI
// run must exit 0. A block that only illustrates (make, aws, a deployed stack) is marked
// <!-- illustrative: name --> on the line above its fence and skipped by that name; an unmarked
// block the test cannot run fails it. The banner `herald dev` prints and the "Try it" blocks are
// held to one text.
//
// It prints a line per block ("example: docs/getting-started.md:9 PASS …"), which `make test`
// shows.
func TestDocExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the docs' examples need %s: %v", tool, err)
		}
	}
	root := filepath.Join("..", "..")
	blocks := shellBlocks(t, root)
	if len(blocks) == 0 {
		t.Fatal("no shell block in README.md or docs/")
	}
	raw, err := os.ReadFile(filepath.Join(root, "internal", "api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	answers, err := apidoc.NewChecker(raw)
	if err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	banner := startDev(t, addr)
	printed := bannerTryIt(banner)
	if printed == "" {
		t.Fatalf("herald dev printed no Try it block:\n%s", banner)
	}
	if got := strings.ReplaceAll(printed, "http://"+addr, "localhost:8080"); got != tryIt {
		t.Errorf("herald dev's banner prints\n%s\nwant the Try it block\n%s", got, tryIt)
	}

	work := t.TempDir()
	for name, body := range exampleFixtures {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tryIts := 0
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", b.file, b.line)
		if b.illustrative != "" {
			fmt.Printf("example: %s SKIP (illustrative: %s)\n", where, b.illustrative)
			continue
		}
		if !talksToLocalHerald(b.text) {
			t.Errorf("%s: a shell block that talks to no local Herald; mark it <!-- illustrative: <name> --> on the line above its fence, or make it runnable", where)
			continue
		}
		if b.text == tryIt {
			tryIts++
		}
		requests, cli, problems := runExampleBlock(t, b, addr, work, answers)
		if len(problems) > 0 {
			fmt.Printf("example: %s FAIL\n", where)
			t.Errorf("%s:\n  %s\n--- the block as run:\n%s", where, strings.Join(problems, "\n  "), b.text)
			continue
		}
		fmt.Printf("example: %s PASS (%d requests, %d CLI runs)\n", where, requests, cli)
	}
	if tryIts != 2 {
		t.Errorf("%d blocks are the Try it text (README.md and docs/getting-started.md should both be), the banner's:\n%s", tryIts, tryIt)
	}
}

// startDev starts `herald dev` on addr with the development configuration and returns what it
// printed on stdout once it is ready; the test's cleanup stops it.
func startDev(t *testing.T, addr string) string {
	t.Helper()
	cmd := exec.Command(heraldBin, "dev", "--addr", addr, "--data", t.TempDir(), "--log-level", "warn")
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := stdout.String()
		// the banner ends with the Try it block and a blank line
		if strings.Contains(out, "Try it") && strings.HasSuffix(out, "\n\n") {
			return out
		}
		select {
		case err := <-done:
			t.Fatalf("herald dev exited at start: %v\n%s%s", err, out, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("herald dev printed no banner in 60s:\n%s", out)
		}
	}
}

// bannerTryIt is the block the banner prints under "Try it", its two-space indent removed.
func bannerTryIt(banner string) string {
	_, after, ok := strings.Cut(banner, "Try it (paste into another terminal):\n\n")
	if !ok {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(after))
	for sc.Scan() && sc.Text() != "" {
		lines = append(lines, strings.TrimPrefix(sc.Text(), "  "))
	}
	return strings.Join(lines, "\n")
}

// runExampleBlock runs one block with bash in work and checks what it did; it returns how many
// HTTP requests and CLI runs the block made and what was wrong.
func runExampleBlock(t *testing.T, b shellBlock, addr, work string, answers *apidoc.Checker) (int, int, []string) {
	t.Helper()
	exDir := t.TempDir()
	script := b.text
	for _, host := range []string{"localhost:8080", "127.0.0.1:8080", "127.0.0.1:9000"} {
		script = strings.ReplaceAll(script, host, addr)
	}
	script = strings.ReplaceAll(script, "go run ./cmd/herald", "herald_cli")
	script = strings.ReplaceAll(script, "<id>", "$(herald_id)")
	cmd := exec.Command("bash", "-c", examplePrelude+script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HERALD_EX_DIR="+exDir, "HERALD_EX_BIN="+heraldBin,
		"HERALD_API=http://"+addr, "HERALD_API_KEY=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var problems []string
	select {
	case err := <-done:
		if err != nil {
			problems = append(problems, fmt.Sprintf("the block failed (%v); it printed:\n%s", err, out.String()))
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		problems = append(problems, "the block ran over 2 minutes; it printed:\n"+out.String())
	}

	metas, _ := filepath.Glob(filepath.Join(exDir, "answer-*.meta"))
	slices.Sort(metas)
	for _, m := range metas {
		meta, _ := os.ReadFile(m)
		body, _ := os.ReadFile(strings.TrimSuffix(m, ".meta") + ".body")
		problems = append(problems, checkExampleAnswer(answers, strings.TrimSpace(string(meta)), body)...)
	}
	cli := 0
	if runs, err := os.ReadFile(filepath.Join(exDir, "cli-runs")); err == nil {
		cli = bytes.Count(runs, []byte("\n"))
	}
	if len(metas) == 0 && cli == 0 {
		problems = append(problems, "the block made no request and ran no CLI command")
	}
	return len(metas), cli, problems
}

// checkExampleAnswer checks one answer, given curl's "METHOD URL STATUS CONTENT-TYPE" line.
func checkExampleAnswer(answers *apidoc.Checker, meta string, body []byte) []string {
	f := strings.Fields(meta)
	if len(f) < 3 {
		return []string{fmt.Sprintf("curl wrote no answer line (%q)", meta)}
	}
	method, rawURL := f[0], f[1]
	status, _ := strconv.Atoi(f[2])
	ctype := ""
	if len(f) > 3 {
		ctype = f[3]
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return []string{fmt.Sprintf("%s %s: %v", method, rawURL, err)}
	}
	name := method + " " + u.RequestURI()
	if status < 200 || status > 299 {
		return []string{fmt.Sprintf("%s: status %d: %.300s", name, status, body)}
	}
	route := answers.Route(method, u.Path)
	if route == "" {
		if strings.HasPrefix(u.Path, "/v1/") {
			return []string{name + ": no route of the OpenAPI document matches"}
		}
		// the sandbox's own routes: JSON when they say so
		if strings.HasPrefix(ctype, "application/json") && !json.Valid(body) {
			return []string{fmt.Sprintf("%s: says JSON, answers %.200s", name, body)}
		}
		return nil
	}
	var problems []string
	for _, p := range answers.Answer(method, route, status, body) {
		problems = append(problems, fmt.Sprintf("%s (%s %s): %s", name, method, route, p))
	}
	return problems
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
