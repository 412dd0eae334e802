package awsenv_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"herald/internal/awsenv"
	"herald/internal/campaign"
	"herald/internal/notify"
)

const machineARN = "arn:aws:states:us-east-1:123456789012:stateMachine:herald-test-campaign"

// sfnFake speaks the two calls of the Step Functions JSON protocol (1.0) the adapter makes, with
// Standard's semantics: StartExecution with a running execution's name and input returns that
// execution; any other reuse of a name is ExecutionAlreadyExists.
type sfnFake struct {
	mu       sync.Mutex
	execs    map[string]*fakeExecution // by execution ARN
	calls    []string                  // X-Amz-Target operations, in order
	throttle bool
}

type fakeExecution struct {
	input, status string
}

func newSFNFake(t *testing.T) (*sfnFake, *awsenv.Executions) {
	t.Helper()
	f := &sfnFake{execs: map[string]*fakeExecution{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := sfn.New(sfn.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMaxAttempts: 1,
	})
	x, err := awsenv.NewExecutions(client, machineARN)
	if err != nil {
		t.Fatal(err)
	}
	return f, x
}

func (f *sfnFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		if in.StateMachineArn != machineARN {
			fail(400, "StateMachineDoesNotExist", "State Machine Does Not Exist: '"+in.StateMachineArn+"'")
			return
		}
		arn := strings.Replace(machineARN, ":stateMachine:", ":execution:", 1) + ":" + in.Name
		if e, ok := f.execs[arn]; ok && (e.status != "RUNNING" || e.input != in.Input) {
			fail(400, "ExecutionAlreadyExists", "Execution Already Exists: '"+arn+"'")
			return
		} else if !ok {
			f.execs[arn] = &fakeExecution{input: in.Input, status: "RUNNING"}
		}
		fmt.Fprintf(w, `{"executionArn":%q,"startDate":1.7e9}`, arn)
	case "DescribeExecution":
		e, ok := f.execs[in.ExecutionArn]
		if !ok {
			fail(400, "ExecutionDoesNotExist", "Execution Does Not Exist: '"+in.ExecutionArn+"'")
			return
		}
		fmt.Fprintf(w, `{"executionArn":%q,"stateMachineArn":%q,"status":%q,"input":%q,"startDate":1.7e9}`,
			in.ExecutionArn, machineARN, e.status, e.input)
	default:
		fail(400, "UnknownOperationException", op)
	}
}

func (f *sfnFake) set(name, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[strings.Replace(machineARN, ":stateMachine:", ":execution:", 1)+":"+name].status = status
}

func TestExecutionsStartIsIdempotent(t *testing.T) {
	t.Parallel()
	f, x := newSFNFake(t)
	ctx := t.Context()

	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatal(err)
	}
	e := f.execs["arn:aws:states:us-east-1:123456789012:execution:herald-test-campaign:n_abc-g0"]
	if e == nil || e.input != `{"campaign_id":"n_abc","generation":0}` {
		t.Fatalf("executions %v, want n_abc-g0 started with the campaign id and generation 0", f.execs)
	}
	// A retried API call while it runs: same name, same input — Standard returns the same run.
	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatal(err)
	}
	// A redelivered fire after the run ended: ExecutionAlreadyExists, which means "started".
	f.set("n_abc-g0", "SUCCEEDED")
	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatalf("Start of an ended execution = %v, want nil (ExecutionAlreadyExists is success)", err)
	}
	if len(f.execs) != 1 {
		t.Fatalf("%d executions, want 1", len(f.execs))
	}
	if got := strings.Join(f.calls, ","); got != "StartExecution,StartExecution,StartExecution" {
		t.Fatalf("calls %s", got)
	}
}

func TestExecutionsStarted(t *testing.T) {
	t.Parallel()
	f, x := newSFNFake(t)
	ctx := t.Context()
	for g := range 3 {
		if err := x.Start(ctx, "n_abc", g); err != nil {
			t.Fatal(err)
		}
	}
	f.set("n_abc-g0", "SUCCEEDED")
	f.set("n_abc-g1", "ABORTED")
	for _, c := range []struct {
		gen               int
		started, runnning bool
	}{{0, true, false}, {1, true, false}, {2, true, true}, {3, false, false}} {
		started, running, err := x.Started(ctx, "n_abc", c.gen)
		if err != nil {
			t.Fatal(err)
		}
		if started != c.started || running != c.runnning {
			t.Errorf("generation %d: started %v running %v, want %v %v", c.gen, started, running, c.started, c.runnning)
		}
	}
	gen, running, err := campaign.LatestExecution(ctx, x, "n_abc")
	if err != nil || gen != 2 || !running {
		t.Fatalf("LatestExecution = %d %v %v, want 2 running", gen, running, err)
	}
}

func TestExecutionsErrors(t *testing.T) {
	t.Parallel()
	f, x := newSFNFake(t)
	f.throttle = true
	err := x.Start(t.Context(), "n_abc", 0)
	if !notify.IsCode(err, notify.ETHROTTLED) || !notify.IsRetryable(err) {
		t.Fatalf("Start while throttled = %v (code %s), want retryable ETHROTTLED", err, notify.ErrorCode(err))
	}
	if _, _, err := x.Started(t.Context(), "n_abc", 0); !notify.IsCode(err, notify.ETHROTTLED) {
		t.Fatalf("Started while throttled = %v, want ETHROTTLED", err)
	}
	if _, err := awsenv.NewExecutions(nil, "arn:aws:lambda:us-east-1:1:function:x"); err == nil {
		t.Fatal("NewExecutions accepted a Lambda ARN")
	}
}
