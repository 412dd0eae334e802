package awsenv

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// An SNS or S3 envelope delivered to a stage function fails the invocation, naming what it got,
// before any stage runs; an empty batch succeeds.
func TestSQSHandlerFailsForeignEnvelopes(t *testing.T) {
	t.Parallel()
	e := &Env{Log: slog.New(slog.DiscardHandler)}
	picked := 0
	h := lambda.NewHandler(e.SQSHandler(func(string) pipeline.Handler {
		picked++
		return func(context.Context, []notify.Message) []pipeline.ItemFailure { return nil }
	}))
	for file, want := range map[string]string{
		"../sqs/testdata/sns-envelope.json": `eventSource "aws:sns"`,
		"../sqs/testdata/s3-envelope.json":  `eventSource "aws:s3"`,
	} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Invoke(t.Context(), raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Invoke = %s, %v; want an error naming %s", file, out, err, want)
		}
	}
	for _, raw := range []string{`{}`, `[]`} {
		if out, err := h.Invoke(t.Context(), []byte(raw)); err == nil {
			t.Errorf("%s: Invoke = %s, want an error", raw, out)
		}
	}
	if picked != 0 {
		t.Fatalf("a stage was picked %d times for events that are not SQS batches", picked)
	}
	if out, err := h.Invoke(t.Context(), []byte(`{"Records":[]}`)); err != nil || string(out) != `{"batchItemFailures":[]}` {
		t.Fatalf("empty batch: %s, %v", out, err)
	}
}
