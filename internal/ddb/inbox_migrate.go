package ddb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2/dynamodbiface"
)

// LegacyInboxTable is the inbox table's name before inbox-items (behind the same prefix): keyed
// by user_id and id, with the local indexes newest and unread.
const LegacyInboxTable = "inbox"

// InboxCopy counts what CopyLegacyInbox did.
type InboxCopy struct {
	Scanned int // items read from the legacy table
	Copied  int // items written to the new one
	Kept    int // items the new table had already (written since the deploy, or a copy before)
}

// CopyLegacyInbox copies every item of the legacy inbox table from (user_id, id; package doc)
// into the inbox-items table to: an own item under its ord, a broadcast marker under its
// "B#<id>". Each put is conditioned on attribute_not_exists, so an item the new table has
// already — written by the pipeline since the deploy, read or deleted there, or copied by an
// earlier run — stays as it is, and the copy can be run again after a failure half-way. Expired
// items are copied too (TTL deletes them in the new table as it did in the old one).
func CopyLegacyInbox(ctx context.Context, client dynamodbiface.DynamoDBAPI, from, to string) (InboxCopy, error) {
	var res InboxCopy
	var copied, kept atomic.Int64
	var start map[string]types.AttributeValue
	for {
		page, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(from), ExclusiveStartKey: start, Limit: aws.Int32(500)})
		if err != nil {
			return res, fmt.Errorf("scan %s: %w", from, err)
		}
		res.Scanned += len(page.Items)
		err = forEach(ctx, len(page.Items), func(ctx context.Context, i int) error {
			item, err := newInboxItem(page.Items[i])
			if err != nil {
				return err
			}
			_, err = client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(to), Item: item,
				ConditionExpression:      aws.String("attribute_not_exists(#u)"),
				ExpressionAttributeNames: map[string]string{"#u": attrInboxUser},
			})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				copied.Add(1)
			case errors.As(err, &ccf):
				kept.Add(1)
			default:
				return fmt.Errorf("put into %s: %w", to, err)
			}
			return nil
		})
		res.Copied, res.Kept = int(copied.Load()), int(kept.Load())
		if err != nil {
			return res, err
		}
		if len(page.LastEvaluatedKey) == 0 {
			return res, nil
		}
		start = page.LastEvaluatedKey
	}
}

// newInboxItem is the inbox-items form of a legacy inbox item.
func newInboxItem(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	str := func(name string) string {
		if v, ok := old[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	user, id := str(attrInboxUser), str("id")
	if user == "" || id == "" {
		return nil, fmt.Errorf("legacy inbox item without user_id or id: %v", old)
	}
	item := make(map[string]types.AttributeValue, len(old))
	for k, v := range old {
		item[k] = v
	}
	delete(item, "ord")
	delete(item, "unread")
	if strings.HasPrefix(id, markerPfx) {
		delete(item, "id") // a broadcast marker is keyed by "B#<id>" and has no id attribute
		item[attrInboxOrder] = strAttr(id)
		return item, nil
	}
	ord := str("ord")
	if ord == "" || ord >= ownItemsBelow {
		return nil, fmt.Errorf("legacy inbox item %s of %s has no ord", id, user)
	}
	item[attrInboxOrder] = strAttr(ord)
	return item, nil
}
