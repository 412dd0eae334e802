package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"herald/internal/notify"
)

// Re-arming reserved sends from the tables: POST /v1/admin/schedules/rearm arms again the fire
// of every SCHEDULED notification and reserved campaign, for its stored send_at, after the
// schedules were lost (in AWS: the schedule group was replaced with the stack). Arming replaces
// whatever schedule an id has (notify.Scheduler), so re-arming what is armed changes nothing,
// and running it twice is safe. One call does one page and returns a cursor; `herald schedules
// rearm` pages to the end.

// CampaignRearmer is implemented by Campaigns whose reserved campaigns wait for a fire
// (campaign.Control in AWS). Locally, reserved campaigns have no schedule — the runner starts
// them from the table — so there is nothing to re-arm.
type CampaignRearmer interface {
	// RearmCampaigns arms the fire of every reserved campaign on one page of the listing and
	// returns how many, with the next page's cursor ("" when done).
	RearmCampaigns(ctx context.Context, cursor string, limit int) (armed int, next string, err error)
}

// rearmResponse answers POST /v1/admin/schedules/rearm: what this call re-armed, per kind.
type rearmResponse struct {
	Notifications int    `json:"notifications"`
	Campaigns     int    `json:"campaigns"`
	NextCursor    string `json:"next_cursor"`
}

// Cursor phases: notifications are listed first, then campaigns. The store's own cursor follows
// the prefix.
const (
	rearmNotifications = "n."
	rearmCampaigns     = "c."
)

// reservedPage reads the limit and the cursor of a route that walks the reserved sends
// (kind names its cursors): notifications first (phase rearmNotifications), then campaigns
// (rearmCampaigns), inner being the store's cursor within the phase.
func (s *server) reservedPage(r *http.Request, kind string) (limit int, phase, inner string, err error) {
	if limit, err = queryLimit(r, 100, notify.MaxReservedPage); err != nil {
		return 0, "", "", err
	}
	cursor, err := s.queryCursor(r, kind, "")
	if err != nil {
		return 0, "", "", err
	}
	phase = rearmNotifications
	if cursor != "" {
		phase, inner = cursor[:min(2, len(cursor))], cursor[min(2, len(cursor)):]
		if phase != rearmNotifications && phase != rearmCampaigns {
			return 0, "", "", notify.FieldError("cursor", "not a cursor this route returned; start again without one")
		}
	}
	return limit, phase, inner, nil
}

func (s *server) rearmSchedules(w http.ResponseWriter, r *http.Request) (err error) {
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditSchedulesRearm, notify.AuditTargetSchedules, "", params, &err)
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	limit, phase, inner, err := s.reservedPage(r, "rearm")
	if err != nil {
		return err
	}
	if s.scheduler == nil {
		writeNotImplemented(w, "reserved sends are not available in this runtime")
		return nil
	}
	ctx := r.Context()
	var out rearmResponse
	defer func() { // runs before the audit entry is written (defers run last in, first out), also after a failed page
		params["notifications"], params["campaigns"] = strconv.Itoa(out.Notifications), strconv.Itoa(out.Campaigns)
		params["more"] = strconv.FormatBool(out.NextCursor != "")
	}()
	if phase == rearmNotifications {
		page, next, err := s.store.ListScheduledNotifications(ctx, inner, limit)
		if err != nil {
			return fmt.Errorf("rearm: %w", err)
		}
		for _, n := range page {
			if err := s.scheduler.Schedule(ctx, n.ID, notify.IngestQueue(n.Service), n.SendAt); err != nil {
				return fmt.Errorf("rearm notification %s: %w", n.ID, err)
			}
			out.Notifications++
		}
		if next != "" {
			out.NextCursor = rearmNotifications + next
		} else if _, ok := s.campaigns.(CampaignRearmer); ok {
			out.NextCursor = rearmCampaigns
		}
	} else if cr, ok := s.campaigns.(CampaignRearmer); ok {
		armed, next, err := cr.RearmCampaigns(ctx, inner, limit)
		if err != nil {
			return err
		}
		out.Campaigns = armed
		if next != "" {
			out.NextCursor = rearmCampaigns + next
		}
	}
	s.log.InfoContext(ctx, "schedules re-armed", "notifications", out.Notifications, "campaigns", out.Campaigns,
		"more", out.NextCursor != "", "by", serviceOf(r))
	out.NextCursor = s.sealCursor("rearm", "", out.NextCursor)
	writeJSON(w, http.StatusOK, out)
	return nil
}
