package pipeline_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// lambdaTestdata reads every event file of aws-lambda-go's events/testdata from the module
// cache: Lambda's own samples of every event source, none of them a Herald message.
func lambdaTestdata(t *testing.T) map[string][]byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go in the module cache: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "events", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 50 {
		t.Fatalf("%d event files in %s (%v), want aws-lambda-go's samples", len(files), dir, err)
	}
	got := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(f)] = b
	}
	return got
}

// TestStagesRefuseForeignBodies feeds every stage each of aws-lambda-go's sample events as a
// message body, and JSON that is no stage's message ({}, null, another stage's message without
// its fields): each is refused with a permanent error — dead-lettered with its reason —, never
// acknowledged as work done, and never retried as if it could succeed later.
func TestStagesRefuseForeignBodies(t *testing.T) {
	t.Parallel()
	p, _ := setup(t)
	stages := map[string]pipeline.Handler{
		"ingest": p.Ingest("orders", nil), "prepare": p.Prepare(), "send": p.Send(), "record": p.Record(),
		"cleanup": p.Cleanup(), "bounce": p.Bounce(),
	}
	bodies := lambdaTestdata(t)
	for name, b := range map[string]string{
		"empty object": `{}`, "null": `null`, "array": `[]`, "string": `"x"`, "text": `Test message.`,
		"prepare without id": `{"notification_id": "", "chunk": 0}`, "record without id": `{"notification_id": ""}`,
		"send without items":         `{"notification_id": "n_1", "provider": "fcm", "items": []}`,
		"send to no provider":        `{"notification_id": "n_1", "provider": "pigeon", "items": [{"id": "d_1", "address": "a"}]}`,
		"send item without address":  `{"notification_id": "n_1", "provider": "fcm", "items": [{"id": "d_1"}]}`,
		"verdict without message id": `{"kind": "verdict_check", "notification_id": "n_1", "provider": "alimtalk", "check": 1, "items": [{"id": "d_1", "address": "a"}]}`,
	} {
		bodies[name] = []byte(b)
	}
	for stage, h := range stages {
		for name, body := range bodies {
			fails := h(context.Background(), []notify.Message{{ID: "m1", Body: body, ReceiveCount: 1}})
			switch {
			case len(fails) != 1:
				t.Errorf("%s acknowledged %s", stage, name)
			case notify.IsRetryable(fails[0].Err):
				t.Errorf("%s: %s is retried (%v), want a permanent refusal", stage, name, fails[0].Err)
			}
		}
	}
}
