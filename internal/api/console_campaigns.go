package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
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
// (repeatable) selecting states, pages of ?limit= (default 100, ≤ 1000) with ?cursor=. It reads the store's
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
	// A cursor serves only the states it was made for.
	scope := fmt.Sprint(states)
	cursor, err := s.queryCursor(r, "campaigns", scope)
	if err != nil {
		return err
	}
	all, err := lister.ListCampaigns(r.Context(), states...)
	if err != nil {
		return fmt.Errorf("list campaigns: %w", err)
	}
	// Newest first (the store lists oldest first); the cursor is the last one's position.
	pos := func(c *notify.Campaign) string { return fmt.Sprintf("%020d#%s", c.CreatedAt.UnixNano(), c.ID) }
	slices.SortFunc(all, func(a, b *notify.Campaign) int { return strings.Compare(pos(b), pos(a)) })
	out := make([]campaignSummary, 0, min(limit, len(all)))
	next := ""
	var last *notify.Campaign
	for _, c := range all {
		if cursor != "" && pos(c) >= cursor {
			continue
		}
		if len(out) == limit {
			next = pos(last)
			break
		}
		last = c
		out = append(out, campaignSummary{ID: c.ID, Service: c.Service, State: c.State, Category: c.Notification.Category,
			CreatedAt: utc(c.CreatedAt), SendAt: utcPtr(c.SendAt), PausedUntil: utcPtr(c.PausedUntil)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"campaigns": out, "next_cursor": s.sealCursor("campaigns", scope, next)})
	return nil
}
