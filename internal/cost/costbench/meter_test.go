package costbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
)

// The meter asks DynamoDB (here DynamoDB Local) for the consumed capacity and bills what it
// returns — one unit per KB written, half a unit per 4 KB read eventually consistent —,
// transactions at least 2 units an item, and a write whose condition failed from its item's size.
func TestMeterDynamoDBCapacity(t *testing.T) {
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("set HERALD_DYNAMODB_ENDPOINT (make test starts DynamoDB Local) to run the DynamoDB tests")
	}
	ctx := context.Background()
	m := NewMeter()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		APIOptions:  []func(*middleware.Stack) error{m.APIOption}})
	table := fmt.Sprintf("costmeter-%d", time.Now().UnixNano())
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}) })
	item := func(pk string, size int) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "v": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", size)}}
	}
	m.Reset()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 10)}))               // 1
	must(db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("b", 2500)}))             // 3
	must(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{ // 2 + 2
		{Put: &ddbtypes.Put{TableName: aws.String(table), Item: item("c", 10)}},
		{Put: &ddbtypes.Put{TableName: aws.String(table), Item: item("d", 10)}},
	}}))
	u := m.Usage(1)
	if u.WriteUnits != 8 {
		t.Fatalf("write units %v (estimated %v), want 8", u.WriteUnits, u.EstimatedWriteUnits)
	}
	est0 := u.EstimatedWriteUnits // 0 on DynamoDB, 2 on DynamoDB Local (it reports the two puts as 2 units)
	// A conditional put that fails returns no capacity: billed from its size (2 KB: 2 units).
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1500),
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err == nil {
		t.Fatal("the conditional put succeeded")
	}
	must(db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}}}))
	must(db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}}}))
	u = m.Usage(1)
	if u.WriteUnits != 10 || u.EstimatedWriteUnits != est0+2 {
		t.Fatalf("write units %v (estimated %v), want 10 (2 estimated)", u.WriteUnits, u.EstimatedWriteUnits)
	}
	if u.ReadUnits != 1.5 {
		t.Fatalf("read units %v, want 0.5 + 1", u.ReadUnits)
	}
	if u.DynamoDBCalls["PutItem"] != 3 || u.DynamoDBCalls["TransactWriteItems"] != 1 || u.DynamoDBCalls["GetItem"] != 2 {
		t.Fatalf("calls %v", u.DynamoDBCalls)
	}
}

// SQS is billed per 64 KB chunk of a request's payload, body and attributes; a receive that
// finds nothing is kept apart; PutEvents per 64 KB chunk of each event; a schedule created is the
// invocation it will make.
func TestMeterBillsAsAWSDoes(t *testing.T) {
	m := NewMeter()
	body := func(n int) *string { return aws.String(strings.Repeat("b", n)) }
	m.bill(&awssqs.SendMessageInput{MessageBody: body(100)}, &awssqs.SendMessageOutput{}, nil)       // 1
	m.bill(&awssqs.SendMessageInput{MessageBody: body(64 * 1024)}, &awssqs.SendMessageOutput{}, nil) // 1: exactly one chunk
	m.bill(&awssqs.SendMessageInput{MessageBody: body(64*1024 - 10), MessageAttributes: map[string]sqstypes.MessageAttributeValue{
		"herald-error": {DataType: aws.String("String"), StringValue: aws.String("retries")}}}, &awssqs.SendMessageOutput{}, nil) // 2: the attribute tips it over
	m.bill(&awssqs.SendMessageBatchInput{Entries: []sqstypes.SendMessageBatchRequestEntry{
		{MessageBody: body(40 * 1024)}, {MessageBody: body(40 * 1024)}, {MessageBody: body(40 * 1024)}}}, &awssqs.SendMessageBatchOutput{}, nil) // 2: 120 KB
	m.bill(&awssqs.ReceiveMessageInput{}, &awssqs.ReceiveMessageOutput{Messages: []sqstypes.Message{{Body: body(70 * 1024)}, {Body: body(10)}}}, nil) // 2
	m.bill(&awssqs.ReceiveMessageInput{}, &awssqs.ReceiveMessageOutput{}, nil)                                                                        // empty: apart
	m.bill(&awssqs.DeleteMessageBatchInput{}, &awssqs.DeleteMessageBatchOutput{}, nil)
	m.bill(&eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Detail: body(100)}, {Detail: body(65 * 1024)}}}, &eventbridge.PutEventsOutput{}, nil) // 1 + 2
	m.bill(&scheduler.CreateScheduleInput{}, &scheduler.CreateScheduleOutput{}, nil)
	m.bill(&scheduler.CreateScheduleInput{}, nil, errors.New("ConflictException")) // not created: never fires
	m.HTTPAPIRequest(600*1024, nil)                                                // 2 chunks of 512 KB
	line := AccessLogLine("req-1", "ANY /v1/{proxy+}", "arn:aws:iam::123456789012:role/orders", 202, 58, 7*time.Millisecond)
	var fields map[string]string
	if err := json.Unmarshal(line, &fields); err != nil || fields["status"] != "202" || fields["caller"] != "arn:aws:iam::123456789012:role/orders" || fields["latencyMs"] != "7" {
		t.Errorf("access log line %s: %v", line, err)
	}
	m.HTTPAPIRequest(100, line)
	u := m.Usage(1)
	if u.AccessLogBytes != int64(len(line)) {
		t.Errorf("access log bytes %d, want %d", u.AccessLogBytes, len(line))
	}
	want := map[string]int64{"SendMessage": 4, "SendMessageBatch": 2, "ReceiveMessage": 2, "DeleteMessageBatch": 1}
	for op, n := range want {
		if u.SQSRequests[op] != n {
			t.Errorf("%s: %d requests billed, want %d (all: %v)", op, u.SQSRequests[op], n, u.SQSRequests)
		}
	}
	if u.EmptyReceives != 1 || u.Events != 3 || u.SchedulerInvocations != 1 || u.HTTPAPIRequests != 3 {
		t.Errorf("empty receives %d, events %d, schedules %d, API requests %d; want 1, 3, 1, 3", u.EmptyReceives, u.Events, u.SchedulerInvocations, u.HTTPAPIRequests)
	}
	m.Invoke("send", func() { time.Sleep(3 * time.Millisecond) })
	m.Invoke("send", func() {})
	if l := m.Usage(1).Lambda["send"]; l.Invocations != 2 || l.BilledMS < 4 || l.MemoryMB != 512 {
		t.Errorf("send: %+v, want 2 invocations, ≥ 3 + 1 ms billed, 512 MB", l)
	}
	m.Reset()
	if u := m.Usage(1); len(u.SQSRequests) != 0 || u.Events != 0 || len(u.Lambda) != 0 {
		t.Errorf("after Reset: %+v", u)
	}
}
