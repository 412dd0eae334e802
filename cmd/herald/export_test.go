package main

import (
	"context"
	"encoding/csv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/local"
	"herald/internal/notify"
)

// TestExportCLI: `herald export create` asks for a notification's deliveries, `show` prints the
// job, `download` waits for DONE and writes the CSV, one row per delivery, addresses masked.
func TestExportCLI(t *testing.T) {
	t.Parallel()
	rt, err := local.Start(context.Background(), local.Options{Config: config.Dev(), DataDir: t.TempDir(),
		Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	var sendOut, stderr strings.Builder
	if code := run([]string{"send", "--api", rt.URL, "--to", "email:cli-export@example.com,phone:+821011112222",
		"--channels", "email,sms", "--title", "Hi", "--body", "Hello", "--wait"}, &sendOut, &stderr); code != 0 {
		t.Fatalf("send: exit %d %s", code, stderr.String())
	}
	nid := regexp.MustCompile(`n_[0-9A-Za-z]+`).FindString(sendOut.String())
	if nid == "" {
		t.Fatalf("no notification id in %q", sendOut.String())
	}
	var out strings.Builder
	if code := run([]string{"export", "create", "--api", rt.URL, "--notification", nid}, &out, &stderr); code != 0 {
		t.Fatalf("export create: exit %d %s", code, stderr.String())
	}
	xid := regexp.MustCompile(`x_[0-9A-Za-z]+`).FindString(out.String())
	if xid == "" || !strings.Contains(out.String(), "PENDING") {
		t.Fatalf("export create printed %q", out.String())
	}
	dest := filepath.Join(t.TempDir(), "deliveries.csv")
	out.Reset()
	if code := run([]string{"export", "download", "--api", rt.URL, "--out", dest, xid}, &out, &stderr); code != 0 {
		t.Fatalf("export download: exit %d %s", code, stderr.String())
	}
	f, err := os.Open(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, _ := io.ReadAll(f)
	recs, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("csv %q %v, want a header and 2 rows", recs, err)
	}
	if strings.Contains(string(raw), "cli-export@example.com") || !strings.Contains(string(raw), notify.MaskEmail("cli-export@example.com")) {
		t.Errorf("addresses not masked:\n%s", raw)
	}
	out.Reset()
	if code := run([]string{"export", "show", "--api", rt.URL, xid}, &out, &stderr); code != 0 || !strings.Contains(out.String(), "DONE") || !strings.Contains(out.String(), "/exports/"+xid+"?") {
		t.Fatalf("export show: exit %d %q %s", code, out.String(), stderr.String())
	}
	if code := run([]string{"export", "show", "--api", rt.URL}, &out, &stderr); code != exitUsage {
		t.Errorf("export show without id: exit %d, want %d", code, exitUsage)
	}
}

// TestExportCLIKinds: `herald export create --kind notifications|suppressions` asks for those
// exports and `download` writes them; `list` shows the jobs, newest first; a filter the kind
// does not take is refused naming it.
func TestExportCLIKinds(t *testing.T) {
	t.Parallel()
	rt, err := local.Start(context.Background(), local.Options{Config: config.Dev(), DataDir: t.TempDir(),
		Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	var sendOut, stderr strings.Builder
	if code := run([]string{"send", "--api", rt.URL, "--to", "email:cli-kinds@example.com", "--channels", "email",
		"--title", "Hi", "--body", "Hello", "--wait"}, &sendOut, &stderr); code != 0 {
		t.Fatalf("send: exit %d %s", code, stderr.String())
	}
	nid := regexp.MustCompile(`n_[0-9A-Za-z]+`).FindString(sendOut.String())
	if err := rt.Store.Suppress(t.Context(), notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelSMS, "+821099998888"),
		Masked: notify.MaskPhone("+821099998888"), Channel: notify.ChannelSMS, Reason: "invalid_number"}); err != nil {
		t.Fatal(err)
	}
	var xids []string
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kind", "notifications", "--channel", "email", "--since", "1h"}, []string{"id,created_at,", nid + ",", ",SENT,transactional,realtime,email,1,1,1,0,0,"}},
		{[]string{"--kind", "suppressions", "--channel", "sms", "--format", "jsonl"}, []string{`"address":"` + notify.MaskPhone("+821099998888") + `"`, `"reason":"invalid_number"`}},
	} {
		var out strings.Builder
		if code := run(append([]string{"export", "create", "--api", rt.URL}, c.args...), &out, &stderr); code != 0 {
			t.Fatalf("export create %v: exit %d %s", c.args, code, stderr.String())
		}
		xid := regexp.MustCompile(`x_[0-9A-Za-z]+`).FindString(out.String())
		xids = append(xids, xid)
		out.Reset()
		if code := run([]string{"export", "download", "--api", rt.URL, "--out", "-", xid}, &out, &stderr); code != 0 {
			t.Fatalf("export download %s: exit %d %s", xid, code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("export %v: file lacks %q:\n%s", c.args, w, out.String())
			}
		}
		if strings.Contains(out.String(), "+821099998888") {
			t.Errorf("export %v holds a raw number:\n%s", c.args, out.String())
		}
	}
	var out strings.Builder
	if code := run([]string{"export", "list", "--api", rt.URL}, &out, &stderr); code != 0 {
		t.Fatalf("export list: exit %d %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], xids[1]) || !strings.Contains(lines[0], "suppressions") || !strings.Contains(lines[0], "DONE") ||
		!strings.HasPrefix(lines[1], xids[0]) {
		t.Fatalf("export list printed %q, want %v newest first", out.String(), xids)
	}
	stderr.Reset()
	if code := run([]string{"export", "create", "--api", rt.URL, "--kind", "suppressions", "--action", "export.create"}, &out, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "action") {
		t.Errorf("a suppressions export filtered on action: exit %d %q", code, stderr.String())
	}
}
