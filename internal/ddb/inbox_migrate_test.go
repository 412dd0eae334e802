package ddb

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"herald/internal/notify"
)

func TestCopyLegacyInbox(t *testing.T) {
	db := testClient(t)
	s, tables := newTestStoreOn(t, db)
	ctx := context.Background()
	legacy := tables.Inbox[:len(tables.Inbox)-len("inbox-items")] + LegacyInboxTable
	spec := TableSpec{Name: legacy, PartitionKey: KeyAttribute{Name: attrInboxUser, Type: TypeString},
		SortKey: &KeyAttribute{Name: "id", Type: TypeString}}
	if _, err := db.Client().CreateTable(ctx, spec.createInput()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Table(legacy).DeleteTable().Run(context.Background()) })

	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	n := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	old := func(user, id string, created time.Time, read bool) map[string]types.AttributeValue {
		ord := inboxOrd(created, id)
		it := map[string]types.AttributeValue{attrInboxUser: strAttr(user), "id": strAttr(id), "ord": strAttr(ord),
			"created_at": n(nanos(created)), "title": strAttr("title of " + id)}
		if read {
			it["read_at"] = n(nanos(created.Add(time.Minute)))
		} else {
			it["unread"] = strAttr(ord)
		}
		return it
	}
	for _, it := range []map[string]types.AttributeValue{
		old("u1", "n_1", t0, false),
		old("u1", "n_2", t0.Add(time.Second), true),
		old("u1", "n_3", t0.Add(2*time.Second), false), // also written to the new table since
		old("u2", "n_1", t0, false),
		{attrInboxUser: strAttr("u1"), "id": strAttr("B#c_1"), "read_at": n(nanos(t0))}, // a broadcast marker
	} {
		if _, err := db.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(legacy), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	// Since the deploy, the pipeline wrote n_3 again and the user read it in the new table.
	if err := s.PutInboxItems(ctx, []notify.InboxItem{{UserID: "u1", ID: "n_3", Title: "title of n_3", CreatedAt: t0.Add(2 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	readAt := t0.Add(time.Hour)
	if err := s.MarkRead(ctx, "u1", "n_3", readAt); err != nil {
		t.Fatal(err)
	}

	got, err := CopyLegacyInbox(ctx, db.Client(), legacy, tables.Inbox)
	if err != nil {
		t.Fatal(err)
	}
	if got != (InboxCopy{Scanned: 5, Copied: 4, Kept: 1}) {
		t.Fatalf("copy = %+v, want 5 scanned, 4 copied, 1 kept", got)
	}
	items, _, err := s.ListInbox(ctx, "u1", "", 10, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 || items[0].ID != "n_3" || items[1].ID != "n_2" || items[2].ID != "n_1" {
		t.Fatalf("u1 inbox = %+v, want n_3, n_2, n_1", items)
	}
	if items[0].ReadAt == nil || !items[0].ReadAt.Equal(readAt) || items[1].ReadAt == nil || items[2].ReadAt != nil {
		t.Fatalf("read states = %v %v %v, want n_3 read in the new table, n_2 read, n_1 unread", items[0].ReadAt, items[1].ReadAt, items[2].ReadAt)
	}
	if c, err := s.UnreadCount(ctx, "u1", t0.Add(2*time.Hour)); err != nil || c != 1 {
		t.Fatalf("UnreadCount = %d, %v; want 1", c, err)
	}
	// The copied item is found by its id like any other.
	if err := s.MarkRead(ctx, "u1", "n_1", readAt); err != nil {
		t.Fatal(err)
	}
	out, err := db.Client().GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tables.Inbox),
		Key: map[string]types.AttributeValue{attrInboxUser: strAttr("u1"), attrInboxOrder: strAttr("B#c_1")}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	marker := out.Item
	if marker == nil || marker["read_at"] == nil || marker["id"] != nil {
		t.Fatalf("broadcast marker in the new table = %v, want sk B#c_1 with read_at and no id", marker)
	}

	// Run again (after a failure half-way, say): nothing changes.
	again, err := CopyLegacyInbox(ctx, db.Client(), legacy, tables.Inbox)
	if err != nil {
		t.Fatal(err)
	}
	if again != (InboxCopy{Scanned: 5, Copied: 0, Kept: 5}) {
		t.Fatalf("second copy = %+v, want 5 kept", again)
	}
	var all []map[string]any
	if err := db.Table(tables.Inbox).Scan().Consistent(true).All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("new table holds %d items, want 5", len(all))
	}
}
