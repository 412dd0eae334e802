package campaign

import (
	"context"
	"fmt"

	"herald/internal/notify"
)

// RearmCampaigns arms again the fire of every reserved (SCHEDULED) campaign on one page of the
// store's listing, for its stored send_at — after the schedules were lost (the schedule group
// replaced). Arming is Scheduler.Schedule, which replaces whatever schedule the id has, so
// re-arming an armed campaign is a no-op in effect, and a send_at already past fires as soon as
// the scheduler can (MinLead). It returns how many it armed and the cursor of the next page ("":
// done). Without a Scheduler (campaigns start on create and wait inside their run) there is
// nothing to arm.
func (x *Control) RearmCampaigns(ctx context.Context, cursor string, limit int) (armed int, next string, err error) {
	if x.Scheduler == nil {
		return 0, "", nil
	}
	page, next, err := x.Steps.d.Campaigns.ListReservedCampaigns(ctx, cursor, limit)
	if err != nil {
		return 0, "", fmt.Errorf("rearm campaigns: %w", err)
	}
	for _, r := range page {
		if err := x.Scheduler.Schedule(ctx, r.ID, notify.IngestQueue(r.Service), r.SendAt); err != nil {
			return armed, "", fmt.Errorf("rearm campaign %s: %w", r.ID, err)
		}
		armed++
	}
	return armed, next, nil
}
