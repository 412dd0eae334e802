package pipeline

import (
	"bytes"
	"context"
	"encoding/json"

	"herald/internal/notify"
)

// CampaignFirer takes the reserved-send fires that are meant for campaigns (campaign.Control in
// AWS, where a campaign with a send_at starts its Step Functions execution when its fire
// arrives).
type CampaignFirer interface {
	// FireCampaign starts campaign f.Fire's run if it is a campaign waiting for it, and reports
	// whether f.Fire is a campaign at all; false: the fire is a notification's. Idempotent: a
	// redelivered fire starts nothing new. A campaign of another service than the one whose
	// ingest queue the fire came from is EFORBIDDEN (permanent: the message is dead-lettered).
	// f.At is set (ingest refuses a fire without it first).
	FireCampaign(ctx context.Context, service string, f notify.FireMessage) (campaign bool, err error)
}

// IngestWithCampaigns is Ingest for a runtime whose campaigns start on their fire: a fire for a
// campaign goes to campaigns, every other message (and a fire for a notification) to Ingest. A
// nil campaigns is plain Ingest.
func (p *Pipeline) IngestWithCampaigns(service string, scheduler notify.Scheduler, campaigns CampaignFirer) Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		ctx, sum := withSummary(ctx, p.clock.Now())
		defer sum.log(ctx, p, service)
		ctx, verdicts := withVerdicts(ctx)
		fails := eachConcurrently(ctx, msgs, func(ctx context.Context, m notify.Message) error {
			if f, ok := fireOf(m.Body); ok && campaigns != nil {
				if err := checkFire(f); err != nil {
					return err
				}
				if isCampaign, err := campaigns.FireCampaign(ctx, service, f); isCampaign || err != nil {
					return err
				}
			}
			return p.ingestOne(withMessageID(ctx, m.ID), service, scheduler, m)
		})
		return verdicts.record(ctx, p, fails)
	}
}

// fireOf decodes a fire message, as ingestOne recognizes one.
func fireOf(body []byte) (notify.FireMessage, bool) {
	var f notify.FireMessage
	if !bytes.Contains(body, []byte(`"fire"`)) || json.Unmarshal(body, &f) != nil || f.Fire == "" {
		return notify.FireMessage{}, false
	}
	return f, true
}
