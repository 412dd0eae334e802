package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"herald/internal/notify"
)

func TestLogEventsWritesOneLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := notify.LogEvents{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}
	err := l.Emit(t.Context(), notify.Event{Type: notify.EventCampaignFailed, Service: "marketing", CampaignID: "c_1",
		Recipients: 1200, Detail: map[string]any{"code": notify.EINVALID, "error": "list missing"}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1: %s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "ERROR", "msg": "campaign failed", "event": "campaign_failed", "service": "marketing",
		"campaign_id": "c_1", "recipients": float64(1200), "code": notify.EINVALID, "error": "list missing"}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, rec[k], v, lines[0])
		}
	}
	if _, ok := rec["notification_id"]; ok {
		t.Errorf("an empty notification_id is logged: %s", lines[0])
	}
}

func TestEventTitle(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		notify.EventLargeSendStarted: "Large Send Started",
		notify.EventCampaignFinished: "Campaign Finished",
		notify.EventCampaignFailed:   "Campaign Failed",
	} {
		if got := notify.EventTitle(in); got != want {
			t.Errorf("EventTitle(%q) = %q, want %q", in, got, want)
		}
	}
}

type failingEvents struct{ n int }

func (f *failingEvents) Emit(context.Context, notify.Event) error { f.n++; return errors.New("down") }

func TestTeeEventsEmitsToAllAndJoinsErrors(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	bad := &failingEvents{}
	tee := notify.TeeEvents(bad, notify.LogEvents{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	err := tee.Emit(t.Context(), notify.Event{Type: notify.EventCampaignFinished, Service: "s", CampaignID: "c"})
	if err == nil || bad.n != 1 {
		t.Fatalf("err = %v, failing emitter called %d times; want its error and one call", err, bad.n)
	}
	if !strings.Contains(buf.String(), `"event":"campaign_finished"`) {
		t.Fatalf("the log emitter after a failing one wrote %q", buf.String())
	}
}
