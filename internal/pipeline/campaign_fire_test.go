package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"herald/internal/notify"
)

// firer takes fires for ids starting with c_ as campaigns; c_err fails.
type firer struct {
	mu  sync.Mutex
	ids []string
}

func (f *firer) FireCampaign(_ context.Context, m notify.FireMessage) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, m.Fire)
	switch {
	case m.Fire == "c_err":
		return true, notify.Errorf(notify.EUNAVAILABLE, "step functions is down")
	case len(m.Fire) > 2 && m.Fire[:2] == "c_":
		return true, nil
	}
	return false, nil
}

func TestIngestHandsCampaignFiresOver(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	f := &firer{}
	h := p.IngestWithCampaigns("shop", nil, f)
	failures := h(t.Context(), []notify.Message{
		{ID: "1", Body: []byte(`{"fire":"c_1","at":"2026-12-01T09:00:00Z"}`)},
		{ID: "2", Body: []byte(`{"fire":"n_unknown"}`)}, // a notification's fire: ingest ignores an unknown one
		{ID: "3", Body: []byte(`{"fire":"c_err"}`)},
		{ID: "4", Body: []byte(`{"channels": 5}`)}, // not a fire: ingest refuses it, campaigns never see it
	})
	var failed []string
	for _, fl := range failures {
		failed = append(failed, fl.MessageID)
	}
	if !slices.Equal(failed, []string{"3", "4"}) {
		t.Fatalf("failed %v, want 3 (the campaign's start failed, retryable) and 4 (invalid)", failed)
	}
	if !notify.IsRetryable(failures[0].Err) || !notify.IsCode(failures[1].Err, notify.EINVALID) {
		t.Fatalf("failures %+v", failures)
	}
	if !slices.Equal(f.ids, []string{"c_1", "n_unknown", "c_err"}) {
		t.Fatalf("campaigns were offered %v, want every fire and nothing else", f.ids)
	}
}
