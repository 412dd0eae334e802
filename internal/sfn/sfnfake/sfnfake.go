// Package sfnfake is an in-memory AWS Step Functions speaking the two calls of the service's
// JSON 1.0 protocol (X-Amz-Target: AWSStepFunctions.StartExecution, DescribeExecution) that
// internal/sfn makes, over httptest, so the real aws-sdk-go-v2 client can be tested against it.
// It keeps Standard's semantics: StartExecution with a running execution's name and input returns
// that execution; any other reuse of a name is ExecutionAlreadyExists.
package sfnfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Execution is a started execution.
type Execution struct {
	Input  string
	Status string // RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED
}

// Fake is the service for one state machine. Its zero value is not usable; call New.
type Fake struct {
	machineARN string

	mu       sync.Mutex
	execs    map[string]*Execution // by execution ARN
	calls    []string              // operations, in order
	throttle bool
}

// New returns a fake holding the state machine machineARN and no executions; serve it with
// httptest.NewServer.
func New(machineARN string) *Fake {
	return &Fake{machineARN: machineARN, execs: map[string]*Execution{}}
}

// ExecutionARN is the ARN of the state machine's execution name.
func (f *Fake) ExecutionARN(name string) string {
	return strings.Replace(f.machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

// Executions returns the executions by name.
func (f *Fake) Executions() map[string]Execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]Execution{}
	for arn, e := range f.execs {
		out[arn[strings.LastIndexByte(arn, ':')+1:]] = *e
	}
	return out
}

// Calls returns the operations called, in order.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// SetStatus sets the status of execution name (which must exist), as the service does when a
// run ends.
func (f *Fake) SetStatus(name, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[f.ExecutionARN(name)].Status = status
}

// Throttle makes every call fail with ThrottlingException while on.
func (f *Fake) Throttle(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle = on
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSStepFunctions.")
	f.calls = append(f.calls, op)
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.swf.service.v2.model#" + typ, "message": msg})
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.0") {
		fail(400, "ValidationException", "not JSON 1.0")
		return
	}
	if f.throttle {
		fail(400, "ThrottlingException", "Rate exceeded")
		return
	}
	var in struct {
		StateMachineArn, Name, Input, ExecutionArn string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(400, "ValidationException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	switch op {
	case "StartExecution":
		if in.StateMachineArn != f.machineARN {
			fail(400, "StateMachineDoesNotExist", "State Machine Does Not Exist: '"+in.StateMachineArn+"'")
			return
		}
		arn := f.ExecutionARN(in.Name)
		if e, ok := f.execs[arn]; ok && (e.Status != "RUNNING" || e.Input != in.Input) {
			fail(400, "ExecutionAlreadyExists", "Execution Already Exists: '"+arn+"'")
			return
		} else if !ok {
			f.execs[arn] = &Execution{Input: in.Input, Status: "RUNNING"}
		}
		fmt.Fprintf(w, `{"executionArn":%q,"startDate":1.7e9}`, arn)
	case "DescribeExecution":
		e, ok := f.execs[in.ExecutionArn]
		if !ok {
			fail(400, "ExecutionDoesNotExist", "Execution Does Not Exist: '"+in.ExecutionArn+"'")
			return
		}
		fmt.Fprintf(w, `{"executionArn":%q,"stateMachineArn":%q,"status":%q,"input":%q,"startDate":1.7e9}`,
			in.ExecutionArn, f.machineARN, e.Status, e.Input)
	default:
		fail(400, "UnknownOperationException", op)
	}
}
