package costbench

import (
	"bytes"
	"os"
	"testing"
)

// The embedded campaign state machine is the one the asl tests check against the synthesized
// dev template (internal/stackbox/asl/testdata, regenerated from infra/ as its tests say): copy
// it here again when it changes.
func TestCampaignDefinitionIsTheStacks(t *testing.T) {
	want, err := os.ReadFile("../../stackbox/asl/testdata/campaign.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(campaignDefinition, want) {
		t.Fatal("internal/cost/costbench/campaign.asl.json differs from internal/stackbox/asl/testdata/campaign.asl.json: cp the latter over the former")
	}
}
