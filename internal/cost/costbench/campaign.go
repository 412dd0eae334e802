package costbench

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/campaign"
	"herald/internal/stackbox/asl"
)

// campaignDefinition is the campaign state machine as infra/campaign.go synthesizes it for the
// dev stack (Fn::Join resolved with a made-up account): the same file as
// internal/stackbox/asl/testdata/campaign.asl.json, which a test keeps equal.
//
//go:embed campaign.asl.json
var campaignDefinition []byte

// machines runs campaign executions in process on the asl interpreter — the state machine's
// own definition, its Lambda tasks invoking the campaign function's handler, its SQS tasks
// sending to the queues — and bills each state transition (every state entered, in every Map
// iteration, and every retry), as Step Functions Standard does. It is the campaign.Executions the
// api and ingest functions start runs with.
type machines struct {
	w       *world
	machine *asl.Machine
	handler lambda.Handler

	mu      sync.Mutex
	started map[string]bool // execution name → still running
	pending []execution
	err     error
}

type execution struct {
	id  string
	gen int
}

func newMachines(w *world) (*machines, error) {
	m, err := asl.Parse(campaignDefinition)
	if err != nil {
		return nil, fmt.Errorf("campaign state machine: %w", err)
	}
	x := &machines{w: w, machine: m, started: map[string]bool{}}
	x.handler = lambda.NewHandler(w.env.CampaignHandler(x))
	return x, nil
}

// Start records the run; Run executes it.
func (x *machines) Start(_ context.Context, id string, gen int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	name := campaign.ExecutionName(id, gen)
	if _, ok := x.started[name]; ok {
		return nil
	}
	x.started[name] = true
	x.pending = append(x.pending, execution{id, gen})
	return nil
}

func (x *machines) Started(_ context.Context, id string, gen int) (bool, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	running, ok := x.started[campaign.ExecutionName(id, gen)]
	return ok, running, nil
}

// Run executes the started runs, and the generations they continue as, until none is left.
func (x *machines) Run(ctx context.Context) error {
	for {
		x.mu.Lock()
		if len(x.pending) == 0 {
			x.mu.Unlock()
			return nil
		}
		e := x.pending[0]
		x.pending = x.pending[1:]
		x.mu.Unlock()
		if err := x.run(ctx, e); err != nil {
			return err
		}
	}
}

func (x *machines) run(ctx context.Context, e execution) error {
	name := campaign.ExecutionName(e.id, e.gen)
	const machineARN = "arn:aws:states:eu-west-1:123456789012:stateMachine:herald-dev-campaign"
	h := &asl.History{}
	env := asl.Env{
		Fallback: x.lambda, // the campaign function, whatever its ARN
		Integrations: map[string]asl.Integration{
			asl.ResourceSQSSendMessage: x.sendMessage,
			asl.ResourceStartExecution: x.startExecution,
		},
		// Waits (quiet hours, a retry's backoff) pass at once: they bill no transition of their own.
		Clock:   asl.NewVirtualClock(time.Now()),
		History: h,
		Execution: asl.ExecutionInfo{ID: strings.Replace(machineARN, ":stateMachine:", ":execution:", 1) + ":" + name, Name: name,
			StateMachineARN: machineARN, StateMachine: "herald-dev-campaign"},
	}
	input, _ := json.Marshal(map[string]any{"campaign_id": e.id, "generation": e.gen})
	_, err := x.machine.Run(ctx, input, env)
	x.mu.Lock()
	x.started[name] = false
	x.mu.Unlock()
	x.w.meter.StateTransitions(h.Count(asl.StateEntered, "") + h.Count(asl.RetryScheduled, ""))
	if err != nil {
		return fmt.Errorf("campaign execution %s: %w", name, err)
	}
	return nil
}

// lambda invokes the campaign function's handler as the Lambda runtime does (JSON in and out).
func (x *machines) lambda(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
	if !strings.HasPrefix(c.Resource, "arn:aws:lambda:") {
		return nil, fmt.Errorf("%w: %s", asl.ErrNoIntegration, c.Resource)
	}
	var out []byte
	var err error
	x.w.meter.Invoke("campaign", func() { out, err = x.handler.Invoke(ctx, c.Parameters) })
	if err != nil {
		return nil, asl.LambdaFunctionError("Error", err.Error())
	}
	return out, nil
}

// sendMessage is the SQS SendMessage integration: to the queue of the same name in this world.
func (x *machines) sendMessage(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
	var p struct {
		QueueURL    string          `json:"QueueUrl"`
		MessageBody json.RawMessage `json:"MessageBody"`
	}
	if err := json.Unmarshal(c.Parameters, &p); err != nil {
		return nil, err
	}
	name := p.QueueURL[strings.LastIndexByte(p.QueueURL, '/')+1:]
	queue := strings.TrimPrefix(name, "herald-dev-")
	body := string(p.MessageBody)
	var s string
	if json.Unmarshal(p.MessageBody, &s) == nil { // a string body is sent as the string
		body = s
	}
	out, err := x.w.sqs.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(x.w.queueURL(queue)), MessageBody: aws.String(body)})
	if err != nil {
		return nil, &asl.Error{Name: "SQS.SdkClientException", Cause: err.Error()}
	}
	return json.Marshal(map[string]string{"MessageId": aws.ToString(out.MessageId), "MD5OfMessageBody": aws.ToString(out.MD5OfMessageBody)})
}

// startExecution is continue-as-new: the next generation, run after this one.
func (x *machines) startExecution(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
	var p struct {
		Name  string `json:"Name"`
		Input struct {
			CampaignID string `json:"campaign_id"`
			Generation int    `json:"generation"`
		} `json:"Input"`
	}
	if err := json.Unmarshal(c.Parameters, &p); err != nil {
		return nil, err
	}
	if ok, _, _ := x.Started(ctx, p.Input.CampaignID, p.Input.Generation); ok {
		return nil, &asl.Error{Name: "StepFunctions.ExecutionAlreadyExistsException", Cause: p.Name}
	}
	if err := x.Start(ctx, p.Input.CampaignID, p.Input.Generation); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"ExecutionArn": p.Name, "StartDate": time.Now().UTC().Format(time.RFC3339)})
}

var _ campaign.Executions = (*machines)(nil)
