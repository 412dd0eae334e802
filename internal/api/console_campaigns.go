package api

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"herald/internal/notify"
)

// campaignSummary is one campaign in the operator's listing; progress is on GET …/campaigns/{id}.
type campaignSummary struct {
	ID          string               `json:"id"`
	Service     string               `json:"service"`
	State       notify.CampaignState `json:"state"`
	Category    notify.Category      `json:"category"`
	CreatedAt   time.Time            `json:"created_at"`
	SendAt      *time.Time           `json:"send_at"`
	PausedUntil *time.Time           `json:"paused_until"`
}

var campaignStates = []notify.CampaignState{notify.CampaignScheduled, notify.CampaignRunning, notify.CampaignPaused, notify.CampaignPausedQuietHours,
	notify.CampaignCompleted, notify.CampaignCanceled, notify.CampaignFailed}

// listCampaigns is GET /v1/admin/campaigns: every service's campaigns, newest first, ?state=
// (repeatable) selecting states, at most ?limit= (default 100, ≤ 1000). It reads the store's
// campaign listing whole (CampaignStore.ListCampaigns: one listing partition on DynamoDB, one
// table locally): campaigns are few, a handful a day.
func (s *server) listCampaigns(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	lister, ok := s.store.(notify.CampaignStore)
	if !ok {
		writeNotImplemented(w, "campaigns are not available in this runtime")
		return nil
	}
	var states []notify.CampaignState
	for _, st := range r.URL.Query()["state"] {
		if !slices.Contains(campaignStates, notify.CampaignState(st)) {
			return notify.FieldError("state", "unknown state %q; one of %s", st, oneOf(campaignStates))
		}
		states = append(states, notify.CampaignState(st))
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	all, err := lister.ListCampaigns(r.Context(), states...)
	if err != nil {
		return fmt.Errorf("list campaigns: %w", err)
	}
	out := make([]campaignSummary, 0, min(limit, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- { // oldest first from the store
		c := all[i]
		out = append(out, campaignSummary{ID: c.ID, Service: c.Service, State: c.State, Category: c.Notification.Category,
			CreatedAt: utc(c.CreatedAt), SendAt: utcPtr(c.SendAt), PausedUntil: utcPtr(c.PausedUntil)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"campaigns": out})
	return nil
}
