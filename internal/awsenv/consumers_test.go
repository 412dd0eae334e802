package awsenv

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"herald/internal/notify"
)

type fakeLambda struct{ enabled map[string]bool }

func (f *fakeLambda) GetEventSourceMapping(_ context.Context, in *lambda.GetEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	state := "Disabled"
	if f.enabled[aws.ToString(in.UUID)] {
		state = "Enabled"
	}
	return &lambda.GetEventSourceMappingOutput{State: aws.String(state)}, nil
}

func (f *fakeLambda) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	f.enabled[aws.ToString(in.UUID)] = aws.ToBool(in.Enabled)
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

// TestMappingsPauseByEnabledFlag: a queue's consumers are paused by turning its mapping's
// Enabled off, and read back; a queue no mapping consumes is ENOTFOUND.
func TestMappingsPauseByEnabledFlag(t *testing.T) { // not parallel: it sets the environment
	f := &fakeLambda{enabled: map[string]bool{"u-1": true}}
	m := &Mappings{Client: f, ByQueue: map[string]string{"ingest-orders": "u-1"}}
	ctx := t.Context()
	if p, err := m.Paused(ctx, "ingest-orders"); err != nil || p {
		t.Fatalf("Paused = %v, %v; want running", p, err)
	}
	if err := m.SetPaused(ctx, "ingest-orders", true); err != nil || f.enabled["u-1"] {
		t.Fatalf("SetPaused(true) = %v; mapping enabled %v", err, f.enabled["u-1"])
	}
	if p, _ := m.Paused(ctx, "ingest-orders"); !p {
		t.Fatal("not paused after SetPaused(true)")
	}
	if err := m.SetPaused(ctx, "ingest-orders", false); err != nil || !f.enabled["u-1"] {
		t.Fatalf("SetPaused(false) = %v", err)
	}
	if _, err := m.Paused(ctx, "send-bulk"); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("an unmapped queue: %v, want ENOTFOUND", err)
	}
	t.Setenv(EnvConsumerMappings, `{"ingest-orders":"u-9"}`)
	got, err := NewMappings(aws.Config{Region: "us-east-1"})
	if err != nil || got.ByQueue["ingest-orders"] != "u-9" {
		t.Fatalf("NewMappings = %+v, %v", got, err)
	}
}
