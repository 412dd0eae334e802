package costbench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
