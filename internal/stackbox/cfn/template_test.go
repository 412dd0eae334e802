package cfn_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"herald/internal/stackbox/cfn"
)

var update = flag.Bool("update", false, "rewrite ../asl/testdata/campaign.asl.json from ../testdata/herald-dev.template.json")

// DevEnv is the made-up account the stackbox fixtures are resolved in.
var devEnv = cfn.Env{Region: "eu-west-1", AccountID: "123456789012", StackName: "herald-dev"}

// TestDevTemplate resolves the whole synthesized dev template (a copy of
// infra/cdk.out/herald-dev.template.json after make synth ENV=dev): every resource gets its
// attributes, and the campaign state machine's definition is the checked-in ASL fixture.
func TestDevTemplate(t *testing.T) {
	b, err := os.ReadFile("../testdata/herald-dev.template.json")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := cfn.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfn.NewResolver(tp, devEnv)
	if err != nil {
		t.Fatal(err)
	}
	// Every property of every resource resolves: no intrinsic, resource or attribute the
	// resolver does not know.
	for _, id := range tp.LogicalIDs("") {
		if _, err := r.Resolve(tp.Resources[id].Properties); err != nil {
			t.Errorf("resource %s (%s): %v", id, tp.Resources[id].Type, err)
		}
	}
	machines := tp.LogicalIDs("AWS::StepFunctions::StateMachine")
	if len(machines) != 1 {
		t.Fatalf("state machines %v, want the campaign's", machines)
	}
	def, err := tp.StateMachineDefinition(machines[0], r)
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, def, "", "  "); err != nil {
		t.Fatalf("definition is not JSON: %v\n%s", err, def)
	}
	pretty.WriteByte('\n')
	const fixture = "../asl/testdata/campaign.asl.json"
	if *update {
		if err := os.WriteFile(fixture, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Fatalf("%s is not the template's campaign definition: go test ./internal/stackbox/cfn -run TestDevTemplate -update", fixture)
	}
}
