package run

import (
	"strings"
	"testing"

	"herald/internal/stackbox/iam"
)

func TestAllowlist(t *testing.T) {
	allow, err := ParseAllowlist(strings.NewReader(`# a comment

herald-*-cleanup dynamodb:* *:table/herald-*-users* -- the box does not run cleanup
herald-*-send sqs:ChangeMessageVisibility *:herald-*-send-bulk -- a retry's backoff
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(allow) != 2 || allow[0].Line != 3 || allow[1].Why != "a retry's backoff" {
		t.Fatalf("parsed %+v", allow)
	}
	for _, c := range []struct {
		who  string
		u    iam.Unused
		want bool
	}{
		{"herald-dev-cleanup", iam.Unused{Action: "dynamodb:Query", Resources: []string{"arn:aws:dynamodb:us-east-1:1:table/herald-dev-users", "arn:aws:dynamodb:us-east-1:1:table/herald-dev-users/index/*"}}, true},
		{"herald-dev-cleanup", iam.Unused{Action: "dynamodb:Query", Resources: []string{"arn:aws:dynamodb:us-east-1:1:table/herald-dev-suppressions"}}, false},
		{"herald-dev-send", iam.Unused{Action: "sqs:changemessagevisibility", Resources: []string{"arn:aws:sqs:us-east-1:1:herald-dev-send-bulk"}}, true},
		{"herald-dev-send", iam.Unused{Action: "sqs:ChangeMessageVisibility", Resources: []string{"arn:aws:sqs:us-east-1:1:herald-dev-send-bulk", "arn:aws:sqs:us-east-1:1:herald-dev-send-realtime"}}, false},
		{"herald-dev-prepare", iam.Unused{Action: "sqs:ChangeMessageVisibility", Resources: []string{"arn:aws:sqs:us-east-1:1:herald-dev-send-bulk"}}, false},
	} {
		got := false
		for _, e := range allow {
			got = got || e.matches(c.who, c.u)
		}
		if got != c.want {
			t.Errorf("%s %v: allowlisted %v, want %v", c.who, c.u, got, c.want)
		}
	}
	for _, bad := range []string{"herald-*-send sqs:SendMessage *", "herald-*-send sqs:SendMessage -- why", "a b c --   "} {
		if _, err := ParseAllowlist(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
