package awsenv

import (
	"testing"

	"herald/internal/api"
	"herald/internal/campaign"
	"herald/internal/pipeline"
)

// TestOrNilKeepsNoCampaignsNil: without a campaign state machine the handlers must see a nil
// interface (501 for /v1/campaigns, plain ingest), never one holding a nil *campaign.Control.
func TestOrNilKeepsNoCampaignsNil(t *testing.T) {
	t.Parallel()
	if c := orNil[api.Campaigns](nil); c != nil {
		t.Errorf("orNil[api.Campaigns](nil) = %#v, want a nil interface", c)
	}
	if c := orNil[pipeline.CampaignFirer](nil); c != nil {
		t.Errorf("orNil[pipeline.CampaignFirer](nil) = %#v, want a nil interface", c)
	}
	x := &campaign.Control{}
	if c := orNil[api.Campaigns](x); c != x {
		t.Errorf("orNil[api.Campaigns](x) = %#v, want x", c)
	}
}
