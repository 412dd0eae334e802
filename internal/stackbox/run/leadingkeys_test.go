package run

import (
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"herald/internal/stackbox/cfn"
	"herald/internal/stackbox/iam"
)

// devTemplateBox is a box that is not started: the committed dev template, resolved as Start
// resolves it, for the parsers and the IAM evaluation.
func devTemplateBox(t *testing.T) *Box {
	t.Helper()
	raw, err := os.ReadFile("../testdata/herald-dev.template.json")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := cfn.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfn.NewResolver(tp, cfn.Env{Region: Region, AccountID: AccountID, StackName: "herald-dev"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := iam.FromTemplate(tp, r)
	if err != nil {
		t.Fatal(err)
	}
	return &Box{Template: tp, Resolver: r, IAM: s}
}

// dynamoCall is a DynamoDB JSON-protocol request for op.
func dynamoCall(op, body string) *http.Request {
	r := httptest.NewRequest("POST", "http://127.0.0.1/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	return r
}

func TestDynamoLeadingKeys(t *testing.T) {
	b := devTemplateBox(t)
	table := "arn:aws:dynamodb:" + Region + ":" + AccountID + ":table/"
	notifications, deliveries := table+"herald-dev-notifications", table+"herald-dev-deliveries"
	lk := func(v ...string) map[string][]string { return map[string][]string{"dynamodb:LeadingKeys": v} }
	for _, tc := range []struct {
		name, op, body string
		want           []authz
	}{
		{"GetItem: the key's partition key", "GetItem",
			`{"TableName":"herald-dev-notifications","Key":{"pk":{"S":"AUDIT#2026-01-01"},"sk":{"S":"x"}}}`,
			[]authz{{Action: "dynamodb:GetItem", Resource: notifications, Multi: lk("AUDIT#2026-01-01")}}},
		{"PutItem: the item's partition key", "PutItem",
			`{"TableName":"herald-dev-notifications","Item":{"pk":{"S":"EXPORT#e1"},"sk":{"S":"META"},"n":{"N":"3"}},"ConditionExpression":"attribute_not_exists(pk)"}`,
			[]authz{{Action: "dynamodb:PutItem", Resource: notifications, Multi: lk("EXPORT#e1")}}},
		{"UpdateItem", "UpdateItem",
			`{"TableName":"herald-dev-deliveries","Key":{"id":{"S":"d-1"}},"UpdateExpression":"SET #s = :s","ExpressionAttributeNames":{"#s":"status"},"ExpressionAttributeValues":{":s":{"S":"SENT"}}}`,
			[]authz{{Action: "dynamodb:UpdateItem", Resource: deliveries, Multi: lk("d-1")}}},
		{"DeleteItem: a number key is its text", "DeleteItem",
			`{"TableName":"herald-dev-ratelimit","Key":{"key":{"N":"42"}}}`,
			[]authz{{Action: "dynamodb:DeleteItem", Resource: table + "herald-dev-ratelimit", Multi: lk("42")}}},
		{"a binary key is its base64 text", "GetItem",
			`{"TableName":"herald-dev-ratelimit","Key":{"key":{"B":"AAEC"}}}`,
			[]authz{{Action: "dynamodb:GetItem", Resource: table + "herald-dev-ratelimit", Multi: lk("AAEC")}}},
		{"Query: the partition key through an alias", "Query",
			`{"TableName":"herald-dev-notifications","KeyConditionExpression":"#pk = :pk AND begins_with(#sk, :p)",
			  "ExpressionAttributeNames":{"#pk":"pk","#sk":"sk"},"ExpressionAttributeValues":{":pk":{"S":"USER#u1"},":p":{"S":"2026"}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: notifications, Multi: lk("USER#u1")}}},
		{"Query: the sort key's equality is not the partition key", "Query",
			`{"TableName":"herald-dev-notifications","KeyConditionExpression":"sk=:s and pk=:p","ExpressionAttributeValues":{":p":{"S":"AUDIT#1"},":s":{"S":"x"}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: notifications, Multi: lk("AUDIT#1")}}},
		{"Query: a range condition", "Query",
			`{"TableName":"herald-dev-notifications","KeyConditionExpression":"(pk = :p) AND sk BETWEEN :a AND :b","ExpressionAttributeValues":{":p":{"S":"N#1"},":a":{"S":"a"},":b":{"S":"b"}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: notifications, Multi: lk("N#1")}}},
		{"Query on a global index: the index's partition key", "Query",
			`{"TableName":"herald-dev-deliveries","IndexName":"by_notification","KeyConditionExpression":"nshard = :n AND id > :after",
			  "ExpressionAttributeValues":{":n":{"S":"n-1#3"},":after":{"S":"d-9"}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: deliveries + "/index/by_notification", Multi: lk("n-1#3")}}},
		{"Query on a global index names not the table's key", "Query",
			`{"TableName":"herald-dev-connections","IndexName":"by_user","KeyConditionExpression":"#u = :u","ExpressionAttributeNames":{"#u":"user"},"ExpressionAttributeValues":{":u":{"S":"u-7"}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: table + "herald-dev-connections/index/by_user", Multi: lk("u-7")}}},
		{"Query with the legacy KeyConditions", "Query",
			`{"TableName":"herald-dev-users","KeyConditions":{"pk":{"ComparisonOperator":"EQ","AttributeValueList":[{"S":"USER#u1"}]}}}`,
			[]authz{{Action: "dynamodb:Query", Resource: table + "herald-dev-users", Multi: lk("USER#u1")}}},
		{"Scan has no leading keys", "Scan", `{"TableName":"herald-dev-suppressions"}`,
			[]authz{{Action: "dynamodb:Scan", Resource: table + "herald-dev-suppressions"}}},
		{"BatchWriteItem: one set per table", "BatchWriteItem",
			`{"RequestItems":{
			  "herald-dev-notifications":[{"PutRequest":{"Item":{"pk":{"S":"USER#1"},"sk":{"S":"a"}}}},{"PutRequest":{"Item":{"pk":{"S":"AUDIT#1"},"sk":{"S":"b"}}}},
			                              {"DeleteRequest":{"Key":{"pk":{"S":"USER#1"},"sk":{"S":"c"}}}}],
			  "herald-dev-deliveries":[{"DeleteRequest":{"Key":{"id":{"S":"d-1"}}}}]}}`,
			[]authz{{Action: "dynamodb:BatchWriteItem", Resource: deliveries, Multi: lk("d-1")},
				{Action: "dynamodb:BatchWriteItem", Resource: notifications, Multi: lk("USER#1", "AUDIT#1")}}},
		{"BatchGetItem", "BatchGetItem",
			`{"RequestItems":{"herald-dev-users":{"Keys":[{"pk":{"S":"USER#1"},"sk":{"S":"P"}},{"pk":{"S":"USER#2"},"sk":{"S":"P"}}],"ProjectionExpression":"pk"}}}`,
			[]authz{{Action: "dynamodb:BatchGetItem", Resource: table + "herald-dev-users", Multi: lk("USER#1", "USER#2")}}},
		{"TransactWriteItems: one request per item", "TransactWriteItems",
			`{"TransactItems":[
			  {"Put":{"TableName":"herald-dev-notifications","Item":{"pk":{"S":"EXPORT#1"},"sk":{"S":"META"}}}},
			  {"Update":{"TableName":"herald-dev-deliveries","Key":{"id":{"S":"d-2"}},"UpdateExpression":"SET a = :a"}},
			  {"ConditionCheck":{"TableName":"herald-dev-users","Key":{"pk":{"S":"USER#3"},"sk":{"S":"P"}},"ConditionExpression":"attribute_exists(pk)"}},
			  {"Delete":{"TableName":"herald-dev-notifications","Key":{"pk":{"S":"AUDIT#9"},"sk":{"S":"x"}}}}]}`,
			[]authz{{Action: "dynamodb:PutItem", Resource: notifications, Multi: lk("EXPORT#1")},
				{Action: "dynamodb:UpdateItem", Resource: deliveries, Multi: lk("d-2")},
				{Action: "dynamodb:ConditionCheckItem", Resource: table + "herald-dev-users", Multi: lk("USER#3")},
				{Action: "dynamodb:DeleteItem", Resource: notifications, Multi: lk("AUDIT#9")}}},
		{"TransactGetItems", "TransactGetItems",
			`{"TransactItems":[{"Get":{"TableName":"herald-dev-deliveries","Key":{"id":{"S":"d-3"}}}}]}`,
			[]authz{{Action: "dynamodb:GetItem", Resource: deliveries, Multi: lk("d-3")}}},
		{"a table outside the template has no leading keys", "GetItem", `{"TableName":"other","Key":{"pk":{"S":"x"}}}`,
			[]authz{{Action: "dynamodb:GetItem", Resource: table + "other"}}},
		{"a key without the partition key has none", "GetItem", `{"TableName":"herald-dev-notifications","Key":{"sk":{"S":"x"}}}`,
			[]authz{{Action: "dynamodb:GetItem", Resource: notifications}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.dynamoRequests(dynamoCall(tc.op, tc.body), []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestExpressionTokens(t *testing.T) {
	got := expressionTokens("(#pk=:p)AND #sk<=:s OR a<>b, begins_with(x,:y) >= > <")
	want := []string{"(", "#pk", "=", ":p", ")", "AND", "#sk", "<=", ":s", "OR", "a", "<>", "b", ",", "begins_with", "(", "x", ",", ":y", ")", ">=", ">", "<"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestLeadingKeysDecide runs the parsed requests through the template's IAM: the export role
// may put only EXPORT# items into the notifications table (its ExportJobs statement).
func TestLeadingKeysDecide(t *testing.T) {
	b := devTemplateBox(t)
	role := b.IAM.Roles["FnExportRole467D6660"]
	if role == "" {
		t.Fatal("no export role in the template")
	}
	for _, tc := range []struct {
		pk      string
		allowed bool
		reason  string
	}{
		{"EXPORT#e-1", true, "ExportJobs"},
		{"AUDIT#2026-01-01", false, "implicit deny"},
	} {
		body := `{"TableName":"herald-dev-notifications","Item":{"pk":{"S":"` + tc.pk + `"},"sk":{"S":"META"}}}`
		reqs, err := b.dynamoRequests(dynamoCall("PutItem", body), []byte(body))
		if err != nil || len(reqs) != 1 {
			t.Fatalf("%v %+v", err, reqs)
		}
		a := reqs[0]
		d := b.IAM.Evaluate(iam.Request{Principal: role, Action: a.Action, Resource: a.Resource, Context: a.Context, Multi: a.Multi})
		if d.Allowed != tc.allowed || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("PutItem %s: allowed=%v %s; want %v with %q", tc.pk, d.Allowed, d.Reason, tc.allowed, tc.reason)
		}
	}
}
