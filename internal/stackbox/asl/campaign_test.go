package asl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/campaign"
	"herald/internal/stackbox/asl"
)

// testdata/campaign.asl.json is the campaign state machine of the synthesized dev template
// (infra/campaign.go), its Fn::Join resolved by internal/stackbox/cfn with the made-up account
// below. Regenerate both after a change to infra/:
//
//	make synth ENV=dev && cp infra/cdk.out/herald-dev.template.json internal/stackbox/testdata/
//	go test ./internal/stackbox/cfn -run TestDevTemplate -update
const (
	campaignFn      = "arn:aws:lambda:eu-west-1:123456789012:function:herald-dev-campaign"
	prepareBulkURL  = "https://sqs.eu-west-1.amazonaws.com/123456789012/herald-dev-prepare-bulk"
	campaignMachine = "arn:aws:states:eu-west-1:123456789012:stateMachine:herald-dev-campaign"
)

func campaignMachineDef(t *testing.T) *asl.Machine {
	t.Helper()
	b, err := os.ReadFile("testdata/campaign.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, string(b))
}

// fakeCampaign plays the campaign function (internal/awsenv.CampaignHandler) over an in-memory
// campaign of pages×batches, and the SQS and Step Functions integrations around it.
type fakeCampaign struct {
	mu            sync.Mutex
	pages         int // pages in the audience
	batches       int // batches per page
	committed     int // pages fetched
	enqueued      int // pages whose batches SaveCursor recorded
	failed        bool
	maxIterations int
	// waitFirst makes the first CheckWindow answer wait 30s.
	waitFirst bool
	// failures queue errors per step name, returned before the step runs.
	failures map[string][]error
	// permanent makes the step fail the campaign (as Machine.Run does) and return an error.
	permanent string
	// sendFailures are the errors SendBatch returns first.
	sendFailures []error
	// startErr is what startExecution returns.
	startErr error

	calls  []string // step names, in order
	sent   []string // message bodies sent to prepare-bulk
	starts []json.RawMessage
}

func (f *fakeCampaign) integrations() map[string]asl.Integration {
	return map[string]asl.Integration{
		campaignFn:                 f.lambda,
		asl.ResourceSQSSendMessage: f.sendMessage,
		asl.ResourceStartExecution: f.startExecution,
	}
}

func (f *fakeCampaign) lambda(_ context.Context, c *asl.Call) (json.RawMessage, error) {
	var ev struct {
		Step  string                `json:"step"`
		State campaign.MachineState `json:"state"`
	}
	if err := json.Unmarshal(c.Parameters, &ev); err != nil {
		return nil, asl.LambdaFunctionError("UnmarshalTypeError", err.Error())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ev.Step)
	if q := f.failures[ev.Step]; len(q) > 0 {
		f.failures[ev.Step] = q[1:]
		return nil, q[0]
	}
	st := ev.State
	if f.permanent == ev.Step && !f.failed {
		f.failed = true
		return nil, asl.LambdaFunctionError("Error", "campaign "+st.CampaignID+": audience list unreadable")
	}
	switch ev.Step {
	case campaign.StepCheckWindow:
		st.Batches, st.Enqueued, st.Done, st.WaitSeconds, st.NextExecution = []json.RawMessage{}, 0, false, 0, ""
		st.Iterations++
		switch {
		case f.failed:
			st.Window = campaign.WindowStop
		case f.waitFirst && st.Iterations == 1:
			st.Window, st.WaitSeconds = campaign.WindowWait, 30
		case f.maxIterations > 0 && st.Iterations > f.maxIterations:
			st.Window = campaign.WindowContinue
			st.NextExecution = campaign.ExecutionName(st.CampaignID, st.Generation+1)
		default:
			st.Window = campaign.WindowOpen
		}
	case campaign.StepFetchPage:
		st.Batches, st.Enqueued = []json.RawMessage{}, 0
		if f.failed {
			break
		}
		if f.committed == f.enqueued && f.committed < f.pages {
			f.committed++
		}
		if f.committed > f.enqueued {
			for b := range f.batches {
				st.Batches = append(st.Batches, json.RawMessage(fmt.Sprintf(`{"campaign":%q,"page":%d,"batch":%d}`, st.CampaignID, f.committed, b)))
			}
			st.Enqueued = f.committed
		}
	case campaign.StepSaveCursor:
		if f.failed {
			st.Batches, st.Done = []json.RawMessage{}, true
			break
		}
		if st.Enqueued > f.enqueued {
			f.enqueued = st.Enqueued
		}
		st.Batches, st.Enqueued = []json.RawMessage{}, 0
		st.Done = f.enqueued == f.pages
	default:
		return nil, asl.LambdaFunctionError("Error", "unknown step "+ev.Step)
	}
	return json.Marshal(st)
}

func (f *fakeCampaign) sendMessage(_ context.Context, c *asl.Call) (json.RawMessage, error) {
	var p struct {
		QueueURL    string          `json:"QueueUrl"`
		MessageBody json.RawMessage `json:"MessageBody"`
	}
	if err := json.Unmarshal(c.Parameters, &p); err != nil {
		return nil, err
	}
	if p.QueueURL != prepareBulkURL {
		return nil, &asl.Error{Name: "SQS.QueueDoesNotExistException", Cause: p.QueueURL}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sendFailures) > 0 {
		err := f.sendFailures[0]
		f.sendFailures = f.sendFailures[1:]
		return nil, err
	}
	f.sent = append(f.sent, string(p.MessageBody))
	return json.RawMessage(`{"MessageId":"m-1","MD5OfMessageBody":"x"}`), nil
}

func (f *fakeCampaign) startExecution(_ context.Context, c *asl.Call) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, c.Parameters)
	if f.startErr != nil {
		return nil, f.startErr
	}
	return json.RawMessage(`{"ExecutionArn":"arn:aws:states:eu-west-1:123456789012:execution:herald-dev-campaign:next","StartDate":"2026-03-01T12:00:00Z"}`), nil
}

func runCampaign(t *testing.T, f *fakeCampaign) (json.RawMessage, error, *asl.History, *asl.VirtualClock) {
	t.Helper()
	e := env()
	e.Integrations = f.integrations()
	e.Execution = asl.ExecutionInfo{ID: "arn:aws:states:eu-west-1:123456789012:execution:herald-dev-campaign:c1-g0",
		Name: "c1-g0", StateMachineARN: campaignMachine, StateMachine: "herald-dev-campaign"}
	e.Rand = func() float64 { return 1 } // FULL jitter at its upper bound: the delays are the backoff's
	out, err := campaignMachineDef(t).Run(context.Background(), json.RawMessage(`{"campaign_id":"c1","generation":0}`), e)
	return out, err, e.History, e.Clock.(*asl.VirtualClock)
}

func TestCampaignFixtureUses(t *testing.T) {
	m := campaignMachineDef(t)
	want := []string{campaignFn, asl.ResourceSQSSendMessage, asl.ResourceStartExecution}
	if got := m.Resources(); !reflect.DeepEqual(got, want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	if m.Timeout() != 30*24*time.Hour {
		t.Fatalf("timeout %s", m.Timeout())
	}
}

func TestCampaignTwoPages(t *testing.T) {
	f := &fakeCampaign{pages: 2, batches: 3}
	out, err, h, _ := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	var st campaign.MachineState
	if err := json.Unmarshal(out, &st); err != nil || !st.Done || st.Iterations != 2 {
		t.Fatalf("output %s (%v)", out, err)
	}
	if len(f.sent) != 6 {
		t.Fatalf("%d messages sent, want 6: %v", len(f.sent), f.sent)
	}
	for p := 1; p <= 2; p++ {
		for b := range 3 {
			// The body is the batch object as JSON (the interpreter writes keys sorted).
			if want := fmt.Sprintf(`{"batch":%d,"campaign":"c1","page":%d}`, b, p); !slices.Contains(f.sent, want) {
				t.Fatalf("message %s not sent: %v", want, f.sent)
			}
		}
	}
	wantPath := []string{"CheckWindow", "Window?", "FetchPage", "DispatchBatches", "SaveCursor", "More?",
		"CheckWindow", "Window?", "FetchPage", "DispatchBatches", "SaveCursor", "More?", "Done"}
	if got := h.Path(""); !reflect.DeepEqual(got, wantPath) {
		t.Fatalf("path\n got %v\nwant %v", got, wantPath)
	}
	if n := h.Count(asl.StateEntered, "SendBatch"); n != 6 {
		t.Fatalf("SendBatch entered %d times", n)
	}
}

func TestCampaignWaitsForTheWindow(t *testing.T) {
	f := &fakeCampaign{pages: 1, batches: 1, waitFirst: true}
	_, err, h, clock := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	if got := clock.Slept(); !reflect.DeepEqual(got, []time.Duration{30 * time.Second}) {
		t.Fatalf("slept %v, want the 30s wait_seconds", got)
	}
	if got := h.Path("")[:4]; !reflect.DeepEqual(got, []string{"CheckWindow", "Window?", "WaitForWindow", "CheckWindow"}) {
		t.Fatalf("path %v", got)
	}
}

func TestCampaignLambdaStepRetried(t *testing.T) {
	f := &fakeCampaign{pages: 1, batches: 1, failures: map[string][]error{
		campaign.StepFetchPage: {
			&asl.Error{Name: asl.ErrLambdaService, Cause: "Lambda is throttled"},
			asl.LambdaFunctionError("Error", "conflict: cursor moved"),
		},
	}}
	_, err, h, clock := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	if n := h.Retries("FetchPage"); n != 2 {
		t.Fatalf("FetchPage retried %d times, want 2\n%s", n, h)
	}
	// Each error is counted by the retrier that matches it: the service exception by the
	// Lambda retrier, the function error by States.TaskFailed — 2s each, the first of each.
	if got := clock.Slept(); !reflect.DeepEqual(got, []time.Duration{2 * time.Second, 2 * time.Second}) {
		t.Fatalf("retry delays %v", got)
	}
	if len(f.sent) != 1 {
		t.Fatalf("sent %v", f.sent)
	}
}

func TestCampaignPermanentFailureEndsTheRun(t *testing.T) {
	// A step that fails permanently fails the campaign and returns its error; the retried step
	// finds the campaign ended and the execution stops without dispatching.
	f := &fakeCampaign{pages: 3, batches: 2, permanent: campaign.StepFetchPage}
	out, err, h, _ := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	if len(f.sent) != 0 || !strings.Contains(string(out), `"done":true`) {
		t.Fatalf("sent %v, output %s", f.sent, out)
	}
	if h.Retries("FetchPage") != 1 || h.Count(asl.TaskFailed, "FetchPage") != 1 {
		t.Fatalf("history\n%s", h)
	}
	if got := h.Path(""); got[len(got)-1] != "Done" {
		t.Fatalf("path %v", got)
	}
}

func TestCampaignStepFailingForeverFailsTheExecution(t *testing.T) {
	var errs []error
	for range 7 {
		errs = append(errs, asl.LambdaFunctionError("Error", "store unavailable"))
	}
	f := &fakeCampaign{pages: 1, batches: 1, failures: map[string][]error{campaign.StepCheckWindow: errs}}
	_, err, h, clock := runCampaign(t, f)
	var ae *asl.Error
	if !errors.As(err, &ae) || ae.Name != "Error" || ae.State != "CheckWindow" {
		t.Fatalf("err = %v\n%s", err, h)
	}
	// MaxAttempts 6 at 2s × 2^n: 2+4+8+16+32+64 s.
	want := []time.Duration{2, 4, 8, 16, 32, 64}
	for i := range want {
		want[i] *= time.Second
	}
	if got := clock.Slept(); !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

// A transient SQS error on SendBatch is retried by the synthesized definition (infra/campaign.go:
// 7 attempts, backoff with jitter), and the page is dispatched whole.
func TestCampaignSendBatchRetried(t *testing.T) {
	f := &fakeCampaign{pages: 1, batches: 2, sendFailures: []error{
		&asl.Error{Name: "SQS.SdkClientException", Cause: "connection reset"},
		&asl.Error{Name: "SQS.SdkClientException", Cause: "connection reset"},
	}}
	out, err, h, _ := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	if n := h.Retries("SendBatch"); n != 2 || len(f.sent) != 2 || !strings.Contains(string(out), `"done":true`) {
		t.Fatalf("%d retries, sent %v, output %s\n%s", n, f.sent, out, h)
	}
}

func TestCampaignContinuesAsNew(t *testing.T) {
	f := &fakeCampaign{pages: 5, batches: 1, maxIterations: 2}
	out, err, h, _ := runCampaign(t, f)
	if err != nil {
		t.Fatalf("%v\n%s", err, h)
	}
	if len(f.starts) != 1 {
		t.Fatalf("%d startExecution calls\n%s", len(f.starts), h)
	}
	var p struct {
		StateMachineArn string
		Name            string
		Input           map[string]any
	}
	if err := json.Unmarshal(f.starts[0], &p); err != nil {
		t.Fatal(err)
	}
	if p.StateMachineArn != campaignMachine || p.Name != "c1-g1" {
		t.Fatalf("startExecution %s", f.starts[0])
	}
	if p.Input["campaign_id"] != "c1" || p.Input["generation"] != float64(1) ||
		p.Input["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"] != "arn:aws:states:eu-west-1:123456789012:execution:herald-dev-campaign:c1-g0" {
		t.Fatalf("startExecution input %v", p.Input)
	}
	if len(f.sent) != 2 {
		t.Fatalf("this generation sent %d pages, want 2", len(f.sent))
	}
	// ResultPath null: the execution ends with CheckWindow's state.
	if !strings.Contains(string(out), `"window":"continue"`) {
		t.Fatalf("output %s", out)
	}

	t.Run("already started by a resume", func(t *testing.T) {
		f := &fakeCampaign{pages: 5, batches: 1, maxIterations: 1,
			startErr: &asl.Error{Name: "StepFunctions.ExecutionAlreadyExistsException", Cause: "c1-g1 exists"}}
		_, err, h, _ := runCampaign(t, f)
		if err != nil {
			t.Fatalf("%v\n%s", err, h)
		}
		// Retry comes before Catch, and States.TaskFailed matches every task error: the
		// definition retries ExecutionAlreadyExists 3 times (up to 14s) before the Catch ends
		// the execution at Done.
		if h.Count(asl.Caught, "ContinueAsNew") != 1 || h.Retries("ContinueAsNew") != 3 || len(f.starts) != 4 {
			t.Fatalf("history\n%s", h)
		}
		if got := h.Path(""); got[len(got)-1] != "Done" {
			t.Fatalf("path %v", got)
		}
	})
}
