package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"herald/internal/stackbox/asl"
	"herald/internal/stackbox/iam"
)

// StateMachine is an AWS::StepFunctions::StateMachine of the template.
type StateMachine struct {
	ARN, Name, Role string
	Machine         *asl.Machine
}

// Execution is one run of a state machine.
type Execution struct {
	ARN, Name, Machine, Input string
	Status                    string // RUNNING, SUCCEEDED, FAILED, ABORTED
	Output, Error, Cause      string
	Start, Stop               time.Time
	History                   *asl.History
	cancel                    context.CancelFunc
	done                      chan struct{}
}

// States is the Step Functions API of the box (StartExecution, DescribeExecution,
// StopExecution), its executions run by the asl interpreter.
type States struct {
	b        *Box
	mu       sync.Mutex
	machines map[string]*StateMachine
	execs    map[string]*Execution
	order    []string
}

func newStates(b *Box) *States {
	return &States{b: b, machines: map[string]*StateMachine{}, execs: map[string]*Execution{}}
}

// startStateMachines resolves, validates and parses every state machine's definition.
func (b *Box) startStateMachines(ctx context.Context) error {
	for _, id := range b.Template.LogicalIDs("AWS::StepFunctions::StateMachine") {
		def, err := b.Template.StateMachineDefinition(id, b.Resolver)
		if err != nil {
			return err
		}
		if b.opts.ASLValidator != "" {
			if err := validateASL(ctx, b.opts.ASLValidator, b.dir, id, def); err != nil {
				return err
			}
		}
		m, err := asl.Parse(def)
		if err != nil {
			return fmt.Errorf("state machine %s: %w", id, err)
		}
		p, err := b.props(id)
		if err != nil {
			return err
		}
		a := b.Resolver.Resources[id]
		sm := &StateMachine{ARN: a.Ref, Name: a.Attrs["Name"], Role: str(p["RoleArn"]), Machine: m}
		b.States.machines[sm.ARN] = sm
	}
	return nil
}

// validateASL runs scripts/asl-validate.sh on a definition.
func validateASL(ctx context.Context, validator, dir, id string, def []byte) error {
	p := filepath.Join(dir, id+".asl.json")
	if err := os.WriteFile(p, def, 0o600); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, validator, p).CombinedOutput()
	if err != nil {
		return fmt.Errorf("state machine %s: asl-validator: %v\n%s", id, err, out)
	}
	return nil
}

func (s *States) fail(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.swf.service.v2.model#" + typ, "message": msg})
}

func (s *States) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ StateMachineArn, Name, Input, ExecutionArn, Error, Cause string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.fail(w, "ValidationException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	epoch := func(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
	switch target(r) {
	case "StartExecution":
		x, err := s.Start(in.StateMachineArn, in.Name, in.Input)
		if err != nil {
			var e *startError
			if errors.As(err, &e) {
				s.fail(w, e.typ, e.msg)
				return
			}
			s.fail(w, "ValidationException", err.Error())
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"executionArn": x.ARN, "startDate": epoch(x.Start)})
	case "DescribeExecution":
		x, ok := s.Execution(in.ExecutionArn)
		if !ok {
			s.fail(w, "ExecutionDoesNotExist", "Execution Does Not Exist: '"+in.ExecutionArn+"'")
			return
		}
		out := map[string]any{"executionArn": x.ARN, "stateMachineArn": x.Machine, "name": x.Name, "status": x.Status,
			"input": x.Input, "startDate": epoch(x.Start)}
		if x.Status != "RUNNING" {
			out["stopDate"] = epoch(x.Stop)
		}
		if x.Status == "SUCCEEDED" {
			out["output"] = x.Output
		}
		if x.Error != "" {
			out["error"], out["cause"] = x.Error, x.Cause
		}
		_ = json.NewEncoder(w).Encode(out)
	case "StopExecution":
		x, ok := s.Stop(in.ExecutionArn, in.Error, in.Cause)
		if !ok {
			s.fail(w, "ExecutionDoesNotExist", "Execution Does Not Exist: '"+in.ExecutionArn+"'")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"stopDate": epoch(x.Stop)})
	default:
		s.fail(w, "UnknownOperationException", target(r))
	}
}

type startError struct{ typ, msg string }

func (e *startError) Error() string { return e.typ + ": " + e.msg }

// Start starts an execution with Standard's idempotency: the same name and input while it
// runs returns it; a name used before otherwise is ExecutionAlreadyExists.
func (s *States) Start(machineARN, name, input string) (Execution, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sm, ok := s.machines[machineARN]
	if !ok {
		return Execution{}, &startError{"StateMachineDoesNotExist", "State Machine Does Not Exist: '" + machineARN + "'"}
	}
	if name == "" {
		name = fmt.Sprintf("exec-%d", time.Now().UnixNano())
	}
	if input == "" {
		input = "{}"
	}
	arn := strings.Replace(machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
	if x, ok := s.execs[arn]; ok {
		if x.Status == "RUNNING" && x.Input == input {
			return *x, nil
		}
		return Execution{}, &startError{"ExecutionAlreadyExists", "Execution Already Exists: '" + arn + "'"}
	}
	ctx, cancel := context.WithCancel(s.b.ctx)
	x := &Execution{ARN: arn, Name: name, Machine: machineARN, Input: input, Status: "RUNNING", Start: time.Now(),
		History: &asl.History{}, cancel: cancel, done: make(chan struct{})}
	s.execs[arn] = x
	s.order = append(s.order, arn)
	s.b.wg.Add(1)
	go func() {
		defer s.b.wg.Done()
		defer close(x.done)
		var clock asl.Clock
		if s.b.outages() {
			clock = hurriedClock{} // an injected outage outlasts the retries in seconds
		}
		out, err := sm.Machine.Run(ctx, json.RawMessage(input), asl.Env{
			Integrations: s.b.integrations(sm), Fallback: s.b.lambdaTask(sm), Clock: clock,
			Execution: asl.ExecutionInfo{ID: arn, Name: name, StateMachineARN: sm.ARN, StateMachine: sm.Name, RoleARN: sm.Role, StartTime: x.Start},
			History:   x.History,
		})
		s.mu.Lock()
		defer s.mu.Unlock()
		if x.Status != "RUNNING" {
			return // stopped
		}
		x.Stop = time.Now()
		var ae *asl.Error
		switch {
		case err == nil:
			x.Status, x.Output = "SUCCEEDED", string(out)
		case errors.As(err, &ae):
			x.Status, x.Error, x.Cause = "FAILED", ae.Name, ae.Cause
		default:
			x.Status, x.Error, x.Cause = "FAILED", "States.Runtime", err.Error()
		}
		if x.Status == "FAILED" {
			s.b.log.Warn("stackbox: execution failed", "execution", arn, "error", x.Error, "cause", x.Cause)
		}
	}()
	return *x, nil
}

// Stop aborts a running execution.
func (s *States) Stop(arn, errName, cause string) (Execution, bool) {
	s.mu.Lock()
	x, ok := s.execs[arn]
	if ok && x.Status == "RUNNING" {
		x.Status, x.Error, x.Cause, x.Stop = "ABORTED", errName, cause, time.Now()
		x.cancel()
	}
	var out Execution
	if ok {
		out = *x
	}
	s.mu.Unlock()
	return out, ok
}

// Execution returns a copy of an execution.
func (s *States) Execution(arn string) (Execution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.execs[arn]
	if !ok {
		return Execution{}, false
	}
	return *x, true
}

// Executions returns copies of every execution, in start order.
func (s *States) Executions() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Execution, 0, len(s.order))
	for _, a := range s.order {
		out = append(out, *s.execs[a])
	}
	return out
}

// integrations serve the optimized integrations as the state machine's role.
func (b *Box) integrations(sm *StateMachine) map[string]asl.Integration {
	return map[string]asl.Integration{
		asl.ResourceSQSSendMessage: func(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
			var p struct {
				QueueUrl    string
				MessageBody json.RawMessage
			}
			if err := json.Unmarshal(c.Parameters, &p); err != nil {
				return nil, err
			}
			if b.outage(p.QueueUrl) {
				return nil, &asl.Error{Name: "SQS.SqsException", Cause: "stackbox: an injected outage of " + p.QueueUrl}
			}
			body := string(p.MessageBody)
			var s string
			if json.Unmarshal(p.MessageBody, &s) == nil {
				body = s // a string body is sent as it is; an object as its JSON
			}
			out, err := b.SQSClient(sm.Role).SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(p.QueueUrl), MessageBody: aws.String(body)})
			if err != nil {
				return nil, &asl.Error{Name: "SQS.SdkClientException", Cause: err.Error()}
			}
			return json.Marshal(map[string]any{"MessageId": aws.ToString(out.MessageId), "MD5OfMessageBody": aws.ToString(out.MD5OfMessageBody)})
		},
		asl.ResourceStartExecution: func(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
			var p struct {
				StateMachineArn, Name string
				Input                 json.RawMessage
			}
			if err := json.Unmarshal(c.Parameters, &p); err != nil {
				return nil, err
			}
			input := string(p.Input)
			var s string
			if json.Unmarshal(p.Input, &s) == nil {
				input = s
			}
			if d := b.recorder.check(sm.Name, iam.Request{Principal: sm.Role, Action: "states:StartExecution", Resource: p.StateMachineArn}); !d.Allowed {
				return nil, &asl.Error{Name: "States.AccessDeniedException", Cause: d.Reason}
			}
			x, err := b.States.Start(p.StateMachineArn, p.Name, input)
			if err != nil {
				var e *startError
				if errors.As(err, &e) {
					return nil, &asl.Error{Name: "StepFunctions." + e.typ + "Exception", Cause: e.msg}
				}
				return nil, err
			}
			return json.Marshal(map[string]any{"ExecutionArn": x.ARN, "StartDate": x.Start.UTC().Format(time.RFC3339Nano)})
		},
	}
}

// lambdaTask serves a Task whose resource is a function ARN: the state machine's role must be
// allowed lambda:InvokeFunction on it.
func (b *Box) lambdaTask(sm *StateMachine) asl.Integration {
	return func(ctx context.Context, c *asl.Call) (json.RawMessage, error) {
		arn := c.Resource
		payload := c.Parameters
		if arn == asl.ResourceLambdaInvoke {
			var p struct {
				FunctionName string
				Payload      json.RawMessage
			}
			if err := json.Unmarshal(c.Parameters, &p); err != nil {
				return nil, err
			}
			arn, payload = p.FunctionName, p.Payload
		}
		f, ok := b.FunctionByARN(arn)
		if !ok {
			return nil, fmt.Errorf("%w: %s", asl.ErrNoIntegration, arn)
		}
		if d := b.recorder.check(sm.Name, iam.Request{Principal: sm.Role, Action: "lambda:InvokeFunction", Resource: f.ARN}); !d.Allowed {
			return nil, &asl.Error{Name: "Lambda.AWSLambdaException", Cause: d.Reason}
		}
		out, err := f.Invoke(ctx, payload)
		if err != nil {
			var fe *FunctionError
			if errors.As(err, &fe) {
				return nil, asl.LambdaFunctionError(fe.Type, fe.Message)
			}
			return nil, &asl.Error{Name: asl.ErrLambdaService, Cause: err.Error()}
		}
		if c.Resource == asl.ResourceLambdaInvoke {
			return json.Marshal(map[string]any{"StatusCode": 200, "Payload": json.RawMessage(out)})
		}
		return out, nil
	}
}
