package awsenv

import (
	"testing"
	"time"

	"herald/internal/api"
	"herald/internal/notify"
)

func TestExportLinkTTL(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", notify.ExportLinkTTL, true},
		{"5m", 5 * time.Minute, true},
		{"0s", 0, false},
		{"200h", 0, false},
		{"soon", 0, false},
	} {
		t.Setenv(EnvExportLinkTTL, c.v)
		got, err := exportLinkTTL()
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("%s=%q: %v %v, want %v ok=%v", EnvExportLinkTTL, c.v, got, err, c.want, c.ok)
		}
	}
}

// TestWithExportsNeedsTheBucket: without HERALD_EXPORTS_BUCKET the admin routes have no export
// store (they answer 501); with it, the store, the presigner and the export queue are wired.
func TestWithExportsNeedsTheBucket(t *testing.T) {
	e := &Env{}
	t.Setenv(EnvExportsBucket, "")
	var o api.Options
	if err := e.withExports(&o); err != nil || o.Exports != nil || o.ExportLinks != nil {
		t.Fatalf("without a bucket: %v %+v", err, o)
	}
	t.Setenv(EnvExportsBucket, "herald-test-exports")
	t.Setenv(EnvExportLinkTTL, "")
	if err := e.withExports(&o); err != nil || o.ExportLinks == nil || o.ExportLinkTTL != notify.ExportLinkTTL ||
		len(o.Queues) != 1 || o.Queues[0] != notify.QueueExport {
		t.Fatalf("with a bucket: %v %+v", err, o)
	}
}
