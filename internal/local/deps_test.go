package local

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The local runtime links no AWS adapter: nothing of DynamoDB, SQS, Step Functions, EventBridge,
// S3, Secrets Manager or Lambda, and none of Herald's packages wrapping them. (The SES sender is
// a provider, like FCM and APNs, and talks to the sandbox through the real SDK.)
func TestLocalRuntimeLinksNoAWSAdapter(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to list the imports with")
		}
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"herald/internal/awsenv", "herald/internal/awserr", "herald/internal/ddb", "herald/internal/sqs",
		"herald/internal/sfn", "herald/internal/scheduler", "herald/internal/eventbus",
		"github.com/guregu/dynamo", "github.com/aws/aws-lambda-go",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/aws/aws-sdk-go-v2/service/sqs",
		"github.com/aws/aws-sdk-go-v2/service/sfn", "github.com/aws/aws-sdk-go-v2/service/scheduler",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge", "github.com/aws/aws-sdk-go-v2/service/s3",
		"github.com/aws/aws-sdk-go-v2/service/secretsmanager",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("internal/local depends on %s", d)
			}
		}
	}
}
