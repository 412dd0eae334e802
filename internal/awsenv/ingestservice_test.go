package awsenv

import (
	"context"
	"testing"

	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/pipeline"
)

// TestIngestServiceRefusesUnknownQueues: the queue names the service a message is accepted for,
// so a queue of no configured service is forbidden and its messages are refused whole.
func TestIngestServiceRefusesUnknownQueues(t *testing.T) {
	cfg := config.Dev()
	name := cfg.Services[0].Name
	if s, err := IngestService(cfg, "ingest-"+name); err != nil || s != name {
		t.Fatalf("IngestService(ingest-%s) = %q, %v", name, s, err)
	}
	for _, q := range []string{"ingest-nosuchservice", "ingest-", "prepare-bulk", name} {
		_, err := IngestService(cfg, q)
		if !notify.IsCode(err, notify.EFORBIDDEN) {
			t.Errorf("IngestService(%q) = %v, want forbidden", q, err)
		}
		if notify.IsRetryable(err) {
			t.Errorf("IngestService(%q): %v is retryable; want it dead-lettered", q, err)
		}
		fails := pipeline.Refuse(err)(context.Background(), []notify.Message{{ID: "m1", Body: []byte(`{}`)}, {ID: "m2"}})
		if len(fails) != 2 || fails[0].MessageID != "m1" || !notify.IsCode(fails[1].Err, notify.EFORBIDDEN) {
			t.Errorf("Refuse answered %+v", fails)
		}
	}
}
