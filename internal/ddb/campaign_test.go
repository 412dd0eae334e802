package ddb

import (
	"testing"

	"herald/internal/notify/campaigntest"
)

// TestCampaignStore runs the notify.CampaignStore and notify.AudienceSource conformance suite
// against DynamoDB Local, each case on its own tables.
func TestCampaignStore(t *testing.T) {
	t.Parallel()
	testClient(t)
	campaigntest.Run(t, func(t *testing.T) campaigntest.Store {
		s, _ := newTestStore(t)
		return s
	})
}
