package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/ddb"
	"herald/internal/seal"
)

// TestInboxMigrate runs `herald inbox migrate` on DynamoDB Local: an item of the legacy table
// shows in the new one's inbox through the store.
func TestInboxMigrate(t *testing.T) {
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("HERALD_DYNAMODB_ENDPOINT not set: `make test` starts DynamoDB Local and sets it")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "heraldtest")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "heraldtest")
	t.Setenv("AWS_REGION", "us-east-1")
	ctx := context.Background()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("heraldtest", "heraldtest", "")}
	db := dynamo.New(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep) })
	prefix := "migrate" + time.Now().Format("150405.000000") + "-"
	tables := ddb.TablesWithPrefix(prefix)
	if err := ddb.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	legacy := prefix + ddb.LegacyInboxTable
	_, err := db.Client().CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(legacy), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("user_id"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("id"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("user_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, spec := range ddb.TableSpecs(tables) {
			_ = db.Table(spec.Name).DeleteTable().Run(context.Background())
		}
		_ = db.Table(legacy).DeleteTable().Run(context.Background())
	})
	created := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	// The legacy table's ord: created_at in nanoseconds with the sign bit flipped, 20 digits.
	ord := fmt.Sprintf("%020d#%s", uint64(created.UnixNano())^(1<<63), "n_1")
	item := map[string]types.AttributeValue{
		"user_id": &types.AttributeValueMemberS{Value: "alice"}, "id": &types.AttributeValueMemberS{Value: "n_1"},
		"ord":        &types.AttributeValueMemberS{Value: ord},
		"created_at": &types.AttributeValueMemberN{Value: strconv.FormatInt(created.UnixNano(), 10)},
		"title":      &types.AttributeValueMemberS{Value: "Your order shipped"},
	}
	if _, err := db.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(legacy), Item: item}); err != nil {
		t.Fatal(err)
	}

	var out, errOut strings.Builder
	if code := run([]string{"inbox", "migrate", "--table-prefix", prefix, "--dynamodb-endpoint", ep}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "1 items read, 1 copied, 0 there already") {
		t.Fatalf("output %q", out.String())
	}
	key := make([]byte, 32)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ddb.New(db, tables, box, nil)
	if err != nil {
		t.Fatal(err)
	}
	items, _, err := s.ListInbox(ctx, "alice", "", 10, created.Add(time.Hour))
	if err != nil || len(items) != 1 || items[0].Title != "Your order shipped" || !items[0].CreatedAt.Equal(created) {
		t.Fatalf("alice's inbox after the copy = %+v, %v", items, err)
	}
}
