package run

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"herald/internal/stackbox/cfn"
	"herald/internal/stackbox/iam"
)

func newTestBox(t *testing.T) *Box {
	t.Helper()
	return &Box{Secrets: &Secrets{values: map[string]string{}}, creds: map[string]string{}, akids: map[string]string{}}
}

func request(method, target, path, body string) *http.Request {
	r := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	return r
}

func TestRequestsNameActionsAndResources(t *testing.T) {
	b := newTestBox(t)
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/"
	queue := "arn:aws:sqs:us-east-1:123456789012:"
	for _, tc := range []struct {
		name  string
		parse parser
		r     *http.Request
		want  []authz
	}{
		{"query on an index", b.dynamoRequests, request("POST", "DynamoDB_20120810.Query", "/", `{"TableName":"herald-dev-deliveries","IndexName":"by_notification"}`),
			[]authz{{Action: "dynamodb:Query", Resource: table + "herald-dev-deliveries/index/by_notification"}}},
		{"a transaction is its items' actions", b.dynamoRequests, request("POST", "DynamoDB_20120810.TransactWriteItems", "/",
			`{"TransactItems":[{"Put":{"TableName":"a"}},{"ConditionCheck":{"TableName":"b"}}]}`),
			[]authz{{Action: "dynamodb:PutItem", Resource: table + "a"}, {Action: "dynamodb:ConditionCheckItem", Resource: table + "b"}}},
		{"batch writes per table", b.dynamoRequests, request("POST", "DynamoDB_20120810.BatchWriteItem", "/", `{"RequestItems":{"b":[],"a":[]}}`),
			[]authz{{Action: "dynamodb:BatchWriteItem", Resource: table + "a"}, {Action: "dynamodb:BatchWriteItem", Resource: table + "b"}}},
		{"an SQS batch is its single action", b.sqsRequests, request("POST", "AmazonSQS.SendMessageBatch", "/",
			`{"QueueUrl":"https://sqs.us-east-1.amazonaws.com/123456789012/herald-dev-send-bulk","Entries":[]}`),
			[]authz{{Action: "sqs:SendMessage", Resource: queue + "herald-dev-send-bulk"}}},
		{"a move task reads the DLQ and sends to the destination", b.sqsRequests, request("POST", "AmazonSQS.StartMessageMoveTask", "/",
			`{"SourceArn":"`+queue+`q-dlq","DestinationArn":"`+queue+`q"}`),
			[]authz{{Action: "sqs:StartMessageMoveTask", Resource: queue + "q-dlq"}, {Action: "sqs:ReceiveMessage", Resource: queue + "q-dlq"},
				{Action: "sqs:DeleteMessage", Resource: queue + "q-dlq"}, {Action: "sqs:GetQueueAttributes", Resource: queue + "q-dlq"},
				{Action: "sqs:SendMessage", Resource: queue + "q"}}},
		{"CreateSchedule passes its role", b.schedulerRequests, request("POST", "", "/schedules/n_1", `{"GroupName":"herald-dev","Target":{"RoleArn":"arn:aws:iam::123456789012:role/s"}}`),
			[]authz{{Action: "scheduler:CreateSchedule", Resource: "arn:aws:scheduler:us-east-1:123456789012:schedule/herald-dev/n_1"},
				{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/s", Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}}}},
		{"DeleteSchedule names its group in the query", b.schedulerRequests, request("DELETE", "", "/schedules/n_1?groupName=herald-dev", ""),
			[]authz{{Action: "scheduler:DeleteSchedule", Resource: "arn:aws:scheduler:us-east-1:123456789012:schedule/herald-dev/n_1"}}},
		{"PutEvents per bus", b.eventsRequests, request("POST", "AWSEvents.PutEvents", "/", `{"Entries":[{"EventBusName":"x"},{"EventBusName":"x"},{}]}`),
			[]authz{{Action: "events:PutEvents", Resource: "arn:aws:events:us-east-1:123456789012:event-bus/x"},
				{Action: "events:PutEvents", Resource: "arn:aws:events:us-east-1:123456789012:event-bus/default"}}},
		{"GetObject with a version", b.s3Requests, request("GET", "", "/bucket/lists/orders/a.txt?versionId=3", ""),
			[]authz{{Action: "s3:GetObjectVersion", Resource: "arn:aws:s3:::bucket/lists/orders/a.txt"}}},
		{"SendEmail on the identity and the configuration set", b.sesRequests, request("POST", "", "/v2/email/outbound-emails",
			`{"FromEmailAddress":"Example <noreply@example.com>","ConfigurationSetName":"herald-dev"}`),
			[]authz{{Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:123456789012:identity/noreply@example.com"},
				{Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:123456789012:configuration-set/herald-dev"}}},
		{"a secret by name", b.secretsRequests, request("POST", "secretsmanager.GetSecretValue", "/", `{"SecretId":"herald/dev/contacts-key"}`),
			[]authz{{Action: "secretsmanager:GetSecretValue", Resource: "arn:aws:secretsmanager:us-east-1:123456789012:secret:herald/dev/contacts-key-Ab12Cd"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := io.ReadAll(tc.r.Body)
			got, err := tc.parse(tc.r, body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The SQS fake's account is rewritten in ARNs and URLs, never in message bodies: a body's MD5
// must still match what the sender computed.
func TestAccountRewriteLeavesBodiesAlone(t *testing.T) {
	body := `arn:aws:sqs:us-east-1:000000000000:x and /000000000000/ in a body`
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(in, &req)
		if req["SourceArn"] != "arn:aws:sqs:us-east-1:000000000000:q-dlq" {
			t.Errorf("the fake got SourceArn %v, want its own account", req["SourceArn"])
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Messages": []any{map[string]any{"Body": body}},
			"QueueUrl": "http://127.0.0.1:1/000000000000/q", "Attributes": map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:000000000000:q"}})
	})
	rec := httptest.NewRecorder()
	accountRewrite("000000000000", fake).ServeHTTP(rec, request("POST", "AmazonSQS.ReceiveMessage", "/", `{"SourceArn":"arn:aws:sqs:us-east-1:123456789012:q-dlq"}`))
	var out struct {
		Messages   []struct{ Body string }
		QueueUrl   string
		Attributes map[string]string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Messages[0].Body != body {
		t.Errorf("body rewritten to %q", out.Messages[0].Body)
	}
	if out.QueueUrl != "http://127.0.0.1:1/123456789012/q" || out.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:123456789012:q" {
		t.Errorf("ARNs and URLs not in the stack's account: %+v", out)
	}
}

func TestRoutesMatchLikeAPIGateway(t *testing.T) {
	a := &API{Routes: []Route{
		{Method: "ANY", Path: "/v1/{proxy+}"}, {Method: "ANY", Path: "/v1/users/{user}/inbox"},
		{Method: "ANY", Path: "/v1/users/{user}/inbox/{proxy+}"}, {Method: "GET", Path: "/healthz"},
	}}
	for i := range a.Routes {
		a.Routes[i].Key = a.Routes[i].Method + " " + a.Routes[i].Path
	}
	// Sorted as startAPI sorts them.
	sortRoutes(a.Routes)
	for _, tc := range []struct {
		method, path, route string
		params              map[string]string
	}{
		{"GET", "/v1/users/alice/inbox", "ANY /v1/users/{user}/inbox", map[string]string{"user": "alice"}},
		{"POST", "/v1/users/alice/inbox/i_1/read", "ANY /v1/users/{user}/inbox/{proxy+}", map[string]string{"user": "alice", "proxy": "i_1/read"}},
		{"GET", "/v1/users/alice/devices/t", "ANY /v1/{proxy+}", map[string]string{"proxy": "users/alice/devices/t"}},
		{"GET", "/healthz", "GET /healthz", map[string]string{}},
		{"POST", "/healthz", "", nil},
		{"GET", "/v2/x", "", nil},
	} {
		r, params := a.match(tc.method, tc.path)
		got := ""
		if r != nil {
			got = r.Key
		}
		if got != tc.route || (r != nil && !reflect.DeepEqual(params, tc.params)) {
			t.Errorf("%s %s: route %q %v, want %q %v", tc.method, tc.path, got, params, tc.route, tc.params)
		}
	}
}

func TestJWTAuthorizerChecksIssuerAudienceAndExpiry(t *testing.T) {
	j := &JWTConfig{Issuer: "https://issuer.example", Audiences: []string{"inbox"}}
	a := &API{Routes: []Route{{JWT: j}}}
	now := time.Now()
	claims, err := j.verify("Bearer "+a.Token("alice", time.Hour), now)
	if err != nil || claims["sub"] != "alice" {
		t.Fatalf("a good token: %v %v", claims, err)
	}
	if _, err := j.verify("Bearer "+a.Token("alice", -time.Minute), now); err == nil {
		t.Error("an expired token passed")
	}
	other := &API{Routes: []Route{{JWT: &JWTConfig{Issuer: "https://issuer.example", Audiences: []string{"other"}}}}}
	if _, err := j.verify("Bearer "+other.Token("alice", time.Hour), now); err == nil {
		t.Error("a token for another audience passed")
	}
	if _, err := j.verify("Bearer not-a-jwt", now); err == nil {
		t.Error("garbage passed")
	}
}

func TestS3KeyFilters(t *testing.T) {
	f := map[string]any{"S3Key": map[string]any{"Rules": []any{map[string]any{"Name": "prefix", "Value": "lists/"}, map[string]any{"Name": "Suffix", "Value": ".txt"}}}}
	for key, want := range map[string]bool{"lists/orders/a.txt": true, "lists/orders/a.csv": false, "other/a.txt": false} {
		if got := keyMatches(f, key); got != want {
			t.Errorf("%s: %v, want %v", key, got, want)
		}
	}
}

func TestStackNameFromFunctionNames(t *testing.T) {
	tmpl := &cfn.Template{Resources: map[string]cfn.Resource{"F": {Type: "AWS::Lambda::Function", Properties: map[string]any{"FunctionName": "herald-prod-send"}}}}
	if got := stackName(tmpl); got != "herald-prod" {
		t.Fatalf("stack name %q", got)
	}
}

// queueTemplate is two ingest queues; policies, when given, are each queue's policy statements.
func queueTemplate(t *testing.T, policies map[string]string) *Box {
	t.Helper()
	res := map[string]any{
		"Orders":    map[string]any{"Type": "AWS::SQS::Queue", "Properties": map[string]any{"QueueName": "herald-dev-ingest-orders"}},
		"Marketing": map[string]any{"Type": "AWS::SQS::Queue", "Properties": map[string]any{"QueueName": "herald-dev-ingest-marketing"}},
	}
	for q, stmts := range policies {
		var st []any
		if err := json.Unmarshal([]byte(stmts), &st); err != nil {
			t.Fatal(err)
		}
		res[q+"Policy"] = map[string]any{"Type": "AWS::SQS::QueuePolicy", "Properties": map[string]any{
			"Queues": []any{map[string]any{"Ref": q}}, "PolicyDocument": map[string]any{"Version": "2012-10-17", "Statement": st}}}
	}
	raw, _ := json.Marshal(map[string]any{"Resources": res})
	tmpl, err := cfn.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfn.NewResolver(tmpl, cfn.Env{Region: Region, AccountID: AccountID, StackName: "herald-dev"})
	if err != nil {
		t.Fatal(err)
	}
	stack, err := iam.FromTemplate(tmpl, r)
	if err != nil {
		t.Fatal(err)
	}
	b := newTestBox(t)
	b.Template, b.Resolver, b.IAM, b.recorder = tmpl, r, stack, newRecorder(stack)
	return b
}

const (
	ordersRole     = "arn:aws:iam::123456789012:role/orders-service"
	ordersQueue    = "arn:aws:sqs:us-east-1:123456789012:herald-dev-ingest-orders"
	marketingQueue = "arn:aws:sqs:us-east-1:123456789012:herald-dev-ingest-marketing"
)

// Per-service queue policies decide which queue a producer may send to; without them the
// producer's own grants do.
func TestProducersAgainstQueuePolicies(t *testing.T) {
	send := func(b *Box, queue string) bool {
		return b.recorder.check("producer", iam.Request{Principal: ordersRole, Action: "sqs:SendMessage", Resource: queue}).Allowed
	}
	old := queueTemplate(t, nil)
	old.AddProducer(ordersRole)
	if got := old.QueuePolicyProducers(ordersQueue); len(got) != 0 {
		t.Fatalf("no policy names %v", got)
	}
	if !send(old, ordersQueue) {
		t.Error("without per-service policies the producer's own grant lets it send")
	}

	byPrincipal := queueTemplate(t, map[string]string{
		"Orders":    `[{"Effect":"Allow","Principal":{"AWS":"` + ordersRole + `"},"Action":"sqs:SendMessage","Resource":"` + ordersQueue + `"}]`,
		"Marketing": `[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:role/marketing-service"},"Action":"sqs:SendMessage","Resource":"` + marketingQueue + `"}]`,
	})
	byPrincipal.AddProducer(ordersRole)
	if got := byPrincipal.QueuePolicyProducers(ordersQueue); !reflect.DeepEqual(got, []string{ordersRole}) {
		t.Fatalf("producers of the orders queue: %v", got)
	}
	if !send(byPrincipal, ordersQueue) || send(byPrincipal, marketingQueue) {
		t.Error("the orders producer must send to its queue only")
	}

	byCondition := queueTemplate(t, map[string]string{
		"Orders": `[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sqs:SendMessage","Resource":"` + ordersQueue + `",
			"Condition":{"ArnEquals":{"aws:PrincipalArn":"` + ordersRole + `"}}}]`,
	})
	if got := byCondition.QueuePolicyProducers(ordersQueue); !reflect.DeepEqual(got, []string{ordersRole}) {
		t.Fatalf("producers named by aws:PrincipalArn: %v", got)
	}
}
