package notify_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestJSONLoggerWritesDurationsInMillis(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := notify.NewJSONLogger(&buf, slog.LevelInfo)
	log.Info("x", "retry_in", 1500*time.Millisecond, slog.Duration("duration", 2345*time.Microsecond),
		"timeout_ms", 3*time.Second, "count", 7, slog.Group("req", slog.Duration("took", time.Minute)))
	log.Debug("below the level", "d", time.Second)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	want := map[string]any{"retry_in_ms": 1500.0, "duration_ms": 2.345, "timeout_ms": 3000.0, "count": 7.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, buf.Bytes())
		}
	}
	for _, k := range []string{"retry_in", "duration", "timeout_ms_ms"} {
		if _, ok := got[k]; ok {
			t.Errorf("key %q still written: %s", k, buf.Bytes())
		}
	}
	if req, _ := got["req"].(map[string]any); req["took_ms"] != 60000.0 {
		t.Errorf("grouped duration: req = %v, want took_ms 60000", got["req"])
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Errorf("debug line written at info level: %s", buf.Bytes())
	}
}

// A LogValuer's durations (a sender's config in a start-up line) are converted too.
type cfg struct{ timeout time.Duration }

func (c cfg) LogValue() slog.Value { return slog.GroupValue(slog.Duration("timeout", c.timeout)) }

func TestDurationsInMillisResolvesLogValuers(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	notify.NewJSONLogger(&buf, nil).Info("x", "ses", cfg{timeout: 10 * time.Second})
	if !bytes.Contains(buf.Bytes(), []byte(`"ses":{"timeout_ms":10000}`)) {
		t.Fatalf("line = %s, want ses.timeout_ms 10000", buf.Bytes())
	}
}
