package sfn_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/sfn"
	"herald/internal/sfn/sfnfake"
)

const machineARN = "arn:aws:states:us-east-1:123456789012:stateMachine:herald-test-campaign"

func setup(t *testing.T) (*sfnfake.Fake, *sfn.Executions) {
	t.Helper()
	f := sfnfake.New(machineARN)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := awssfn.New(awssfn.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMaxAttempts: 1,
	})
	x, err := sfn.NewExecutions(client, machineARN)
	if err != nil {
		t.Fatal(err)
	}
	return f, x
}

func TestExecutionsStartIsIdempotent(t *testing.T) {
	t.Parallel()
	f, x := setup(t)
	ctx := t.Context()

	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatal(err)
	}
	e, ok := f.Executions()["n_abc-g0"]
	if !ok || e.Input != `{"campaign_id":"n_abc","generation":0}` {
		t.Fatalf("executions %v, want n_abc-g0 started with the campaign id and generation 0", f.Executions())
	}
	// A retried API call while it runs: same name, same input — Standard returns the same run.
	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatal(err)
	}
	// A redelivered fire after the run ended: ExecutionAlreadyExists, which means "started".
	f.SetStatus("n_abc-g0", "SUCCEEDED")
	if err := x.Start(ctx, "n_abc", 0); err != nil {
		t.Fatalf("Start of an ended execution = %v, want nil (ExecutionAlreadyExists is success)", err)
	}
	if n := len(f.Executions()); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	if got := strings.Join(f.Calls(), ","); got != "StartExecution,StartExecution,StartExecution" {
		t.Fatalf("calls %s", got)
	}
}

func TestExecutionsStarted(t *testing.T) {
	t.Parallel()
	f, x := setup(t)
	ctx := t.Context()
	for g := range 3 {
		if err := x.Start(ctx, "n_abc", g); err != nil {
			t.Fatal(err)
		}
	}
	f.SetStatus("n_abc-g0", "SUCCEEDED")
	f.SetStatus("n_abc-g1", "ABORTED")
	for _, c := range []struct {
		gen              int
		started, running bool
	}{{0, true, false}, {1, true, false}, {2, true, true}, {3, false, false}} {
		started, running, err := x.Started(ctx, "n_abc", c.gen)
		if err != nil {
			t.Fatal(err)
		}
		if started != c.started || running != c.running {
			t.Errorf("generation %d: started %v running %v, want %v %v", c.gen, started, running, c.started, c.running)
		}
	}
	gen, running, err := campaign.LatestExecution(ctx, x, "n_abc")
	if err != nil || gen != 2 || !running {
		t.Fatalf("LatestExecution = %d %v %v, want 2 running", gen, running, err)
	}
}

func TestExecutionsErrors(t *testing.T) {
	t.Parallel()
	f, x := setup(t)
	f.Throttle(true)
	err := x.Start(t.Context(), "n_abc", 0)
	if !notify.IsCode(err, notify.ETHROTTLED) || !notify.IsRetryable(err) {
		t.Fatalf("Start while throttled = %v (code %s), want retryable ETHROTTLED", err, notify.ErrorCode(err))
	}
	if _, _, err := x.Started(t.Context(), "n_abc", 0); !notify.IsCode(err, notify.ETHROTTLED) {
		t.Fatalf("Started while throttled = %v, want ETHROTTLED", err)
	}
	if _, err := sfn.NewExecutions(nil, "arn:aws:lambda:us-east-1:1:function:x"); err == nil {
		t.Fatal("NewExecutions accepted a Lambda ARN")
	}
}
