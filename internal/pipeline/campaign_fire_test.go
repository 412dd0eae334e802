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

func (f *firer) FireCampaign(_ context.Context, service string, m notify.FireMessage) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, service+"/"+m.Fire)
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
		{ID: "2", Body: []byte(`{"fire":"n_unknown","at":"2026-12-01T09:00:00Z"}`)}, // a notification's fire: no such notification
		{ID: "3", Body: []byte(`{"fire":"c_err","at":"2026-12-01T09:00:00Z"}`)},
		{ID: "4", Body: []byte(`{"channels": 5}`)}, // not a fire: ingest refuses it, campaigns never see it
		{ID: "5", Body: []byte(`{"fire":"c_2"}`)},  // no "at": refused before campaigns see it
	})
	var failed []string
	for _, fl := range failures {
		failed = append(failed, fl.MessageID)
	}
	if !slices.Equal(failed, []string{"2", "3", "4", "5"}) {
		t.Fatalf("failed %v, want 2 (unknown id), 3 (the campaign's start failed, retryable), 4 (invalid) and 5 (no at)", failed)
	}
	if !notify.IsCode(failures[0].Err, notify.ENOTFOUND) || !notify.IsRetryable(failures[1].Err) ||
		!notify.IsCode(failures[2].Err, notify.EINVALID) || !notify.IsCode(failures[3].Err, notify.EINVALID) {
		t.Fatalf("failures %+v", failures)
	}
	slices.Sort(f.ids) // a batch's messages are handled side by side
	if !slices.Equal(f.ids, []string{"shop/c_1", "shop/c_err", "shop/n_unknown"}) {
		t.Fatalf("campaigns were offered %v, want every fire with an at, with the queue's service, and nothing else", f.ids)
	}
}
