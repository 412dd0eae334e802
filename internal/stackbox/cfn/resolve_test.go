package cfn_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"herald/internal/stackbox/cfn"
)

const tmpl = `{
  "Parameters": {"BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/cdk-bootstrap/hnb659fds/version"}},
  "Resources": {
    "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "herald-dev-send-realtime"}},
    "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": {"Fn::Join": ["-", [{"Ref": "AWS::StackName"}, "deliveries"]]}}},
    "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
    "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": {"Fn::Sub": "${AWS::StackName}-send"}}},
    "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "Imports"}},
    "Machine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"StateMachineName": "herald-dev-campaign",
      "DefinitionString": {"Fn::Join": ["", ["{\"StartAt\":\"A\",\"States\":{\"A\":{\"Type\":\"Task\",\"Resource\":\"", {"Fn::GetAtt": ["Fn", "Arn"]}, "\",\"Parameters\":{\"QueueUrl\":\"", {"Ref": "Queue"}, "\"},\"End\":true}}}"]]}}}
  }
}`

func resolver(t *testing.T) (*cfn.Template, *cfn.Resolver) {
	t.Helper()
	tp, err := cfn.Parse([]byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfn.NewResolver(tp, cfn.Env{Region: "eu-west-1", AccountID: "111111111111", StackName: "herald-dev"})
	if err != nil {
		t.Fatal(err)
	}
	return tp, r
}

func TestResolve(t *testing.T) {
	_, r := resolver(t)
	cases := []struct {
		in   string
		want any
	}{
		{`{"Ref":"Queue"}`, "https://sqs.eu-west-1.amazonaws.com/111111111111/herald-dev-send-realtime"},
		{`{"Fn::GetAtt":["Queue","Arn"]}`, "arn:aws:sqs:eu-west-1:111111111111:herald-dev-send-realtime"},
		{`{"Fn::GetAtt":"Queue.QueueName"}`, "herald-dev-send-realtime"},
		{`{"Fn::GetAtt":["Table","Arn"]}`, "arn:aws:dynamodb:eu-west-1:111111111111:table/herald-dev-deliveries"},
		{`{"Fn::GetAtt":["Fn","Arn"]}`, "arn:aws:lambda:eu-west-1:111111111111:function:herald-dev-send"},
		{`{"Fn::GetAtt":["Bucket","Arn"]}`, "arn:aws:s3:::imports"},
		{`{"Ref":"Machine"}`, "arn:aws:states:eu-west-1:111111111111:stateMachine:herald-dev-campaign"},
		{`{"Fn::Join":[":",["arn",{"Ref":"AWS::Partition"},"states",{"Ref":"AWS::Region"},{"Ref":"AWS::AccountId"},"execution:x:*"]]}`,
			"arn:aws:states:eu-west-1:111111111111:execution:x:*"},
		{`{"Fn::Sub":"arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/${Queue.QueueName}:${!Literal}"}`,
			"arn:aws:logs:eu-west-1:111111111111:log-group:/aws/herald-dev-send-realtime:${Literal}"},
		{`{"Fn::Sub":["${A}-${B}",{"A":{"Ref":"AWS::StackName"},"B":"x"}]}`, "herald-dev-x"},
		{`{"Fn::Select":[1,{"Fn::Split":["/",{"Ref":"Queue"}]}]}`, ""},
		{`{"Fn::Select":[3,{"Fn::Split":["/",{"Ref":"Queue"}]}]}`, "111111111111"},
		{`{"Ref":"BootstrapVersion"}`, "/cdk-bootstrap/hnb659fds/version"},
		{`{"Statement":[{"Resource":[{"Fn::GetAtt":["Table","Arn"]},{"Ref":"AWS::NoValue"}]}]}`,
			map[string]any{"Statement": []any{map[string]any{"Resource": []any{"arn:aws:dynamodb:eu-west-1:111111111111:table/herald-dev-deliveries"}}}}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(c.in), &v); err != nil {
				t.Fatal(err)
			}
			got, err := r.Resolve(v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
	if got, _ := r.ResolveString(map[string]any{"Fn::GetAtt": []any{"Role", "Arn"}}); !strings.HasPrefix(got, "arn:aws:iam::111111111111:role/herald-dev-Role-") {
		t.Fatalf("generated role ARN %q", got)
	}
}

func TestResolveRefuses(t *testing.T) {
	_, r := resolver(t)
	for in, want := range map[string]string{
		`{"Ref":"Nope"}`:                  `"Nope" is not a known resource`,
		`{"Fn::GetAtt":["Queue","Nope"]}`: `no attribute "Nope"`,
		`{"Fn::ImportValue":"x"}`:         `Fn::ImportValue is not supported`,
		`{"Fn::Sub":"${Nope.Arn}"}`:       `"Nope" is not a known resource`,
		`{"Fn::If":["IsProd","a","b"]}`:   `condition "IsProd"`,
		`{"Fn::Select":[9,["a"]]}`:        `out of`,
	} {
		var v any
		_ = json.Unmarshal([]byte(in), &v)
		if _, err := r.Resolve(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %s", in, err, want)
		}
	}
}

func TestStateMachineDefinition(t *testing.T) {
	tp, r := resolver(t)
	def, err := tp.StateMachineDefinition("Machine", r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:lambda:eu-west-1:111111111111:function:herald-dev-send","Parameters":{"QueueUrl":"https://sqs.eu-west-1.amazonaws.com/111111111111/herald-dev-send-realtime"},"End":true}}}`
	if string(def) != want {
		t.Fatalf("definition\n%s\nwant\n%s", def, want)
	}
}
