package awsenv_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/awsenv"
	"herald/internal/awsenv/awsenvtest"
	"herald/internal/pipeline"
)

// TestFunctionsRefuseLambdaSamples invokes every function's handler, as Lambda would, with
// each of aws-lambda-go's sample events (events/testdata, read from the module cache): Lambda's
// own envelopes of every event source, none of them the function's. Each invocation fails, or
// reports every record failed, or answers an HTTP error; none is acknowledged in silence.
func TestFunctionsRefuseLambdaSamples(t *testing.T) {
	w := awsenvtest.Setup(t)
	e := w.Env
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go in the module cache: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "*.json"))
	if len(files) < 50 {
		t.Fatalf("%d sample events, want aws-lambda-go's", len(files))
	}
	t.Setenv(awsenv.EnvAudienceBucket, "herald-test-lists")
	im, err := e.AudienceImporter()
	if err != nil {
		t.Fatal(err)
	}
	stage := func(h func() pipeline.Handler) func(string) pipeline.Handler {
		return func(string) pipeline.Handler { return h() }
	}
	functions := map[string]any{
		"ingest":   e.SQSHandler(e.IngestStage),
		"prepare":  e.SQSHandler(stage(e.Pipeline.Prepare)),
		"send":     e.SQSHandler(stage(e.Pipeline.Send)),
		"record":   e.SQSHandler(stage(e.Pipeline.Record)),
		"cleanup":  e.SQSHandler(stage(e.Pipeline.Cleanup)),
		"bounce":   e.SQSHandler(stage(e.Pipeline.Bounce)),
		"audience": e.AudienceHandler(im),
		"api":      e.APIHandler(nil),
		"admin":    e.AdminHandler(nil),
		"campaign": e.CampaignHandler(nil),
	}
	for name, fn := range functions {
		h := lambda.NewHandler(fn)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Invoke(context.Background(), raw)
			if err != nil {
				continue // the invocation failed: Lambda retries or reports it
			}
			if !refused(out) {
				t.Errorf("%s acknowledged %s: %s", name, filepath.Base(f), out)
			}
		}
	}
}

// refused reports whether a handler's answer refuses its event: an SQS batch with failures, or
// an HTTP answer of 400 or more.
func refused(out []byte) bool {
	var sqs events.SQSEventResponse
	if json.Unmarshal(out, &sqs) == nil && len(sqs.BatchItemFailures) > 0 {
		return true
	}
	var http events.APIGatewayV2HTTPResponse
	return json.Unmarshal(out, &http) == nil && http.StatusCode >= 400
}
