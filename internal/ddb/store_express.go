package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Express notifications (notify.Express, docs/design.md §3) are one item: the main item carries
// the deliveries (x; their counts derive from them), the few recipients (rcpt) and the prepared chunk
// (chunks_prepared). Creating one is a single conditional PutItem — no transaction, no
// recipient chunk, no counter shard — and recording its verdicts a single conditional UpdateItem,
// so a single send costs two item writes here, each billed at the item's size.

// expressAttempts bounds the optimistic read-modify-write loops below.
const expressAttempts = 8

// createExpress stores c as one item. The id of a notification sent with an idempotency key is
// derived from the key (notify.NotificationIDFor), so the item's own condition dedupes; only an
// id that is not derived needs the key claimed as well, in a transaction as CreateNotification
// does.
func (s *Store) createExpress(ctx context.Context, c *notify.Notification, body string) (*notify.Notification, bool, error) {
	op := "create notification " + c.ID
	x, err := json.Marshal(c.Express)
	if err != nil {
		return nil, false, wrapErr(op, fmt.Errorf("encode express deliveries: %w", err))
	}
	rs := c.Recipients
	if rs == nil {
		rs = []notify.Recipient{}
	}
	inline, err := json.Marshal(rs)
	if err != nil {
		return nil, false, wrapErr(op, fmt.Errorf("encode recipients: %w", err))
	}
	main := notificationItem{
		PK: notificationPK(c.ID), SK: skNotification, ID: c.ID, Service: c.Service, IdempotencyKey: c.IdempotencyKey,
		Status: string(c.Status), ChunksTotal: c.Stats.ChunksTotal, CreatedAt: nanos(c.CreatedAt),
		UpdatedAt: nanos(c.UpdatedAt), Doc: body, RecipientCount: c.RecipientCount,
		Express: string(x), Inline: string(inline), ChunksPrepared: c.Stats.ChunksPrepared, RecipientUser: s.indexedUser(c),
	}
	put, err := s.putIfAbsent(s.tables.Notifications, main)
	if err != nil {
		return nil, false, wrapErr(op, err)
	}
	claim := c.IdempotencyKey != "" && c.ID != notify.NotificationIDFor(c.Service, c.IdempotencyKey, c.CreatedAt)
	keyLost := false
	if claim {
		kput, kerr := s.putIfAbsent(s.tables.Notifications, keyClaimItem{PK: keyClaimPK(c.Service, c.IdempotencyKey),
			SK: skKeyClaim, NotificationID: c.ID, Service: c.Service, IdempotencyKey: c.IdempotencyKey})
		if kerr != nil {
			return nil, false, wrapErr(op, kerr)
		}
		err = s.transact(ctx, []types.TransactWriteItem{put, kput})
		if reasons, canceled := cancelReasons(err); canceled {
			keyLost = reasonCode(reasons, 1) == "ConditionalCheckFailed"
			if keyLost || reasonCode(reasons, 0) == "ConditionalCheckFailed" {
				err = &types.ConditionalCheckFailedException{}
			}
		}
	} else {
		_, err = s.putItem(ctx, &dynamodb.PutItemInput{TableName: put.Put.TableName, Item: put.Put.Item,
			ConditionExpression: put.Put.ConditionExpression, ExpressionAttributeNames: put.Put.ExpressionAttributeNames})
	}
	if _, failed := condFailedItem(err); failed {
		stored, err := s.existingNotification(ctx, *c, keyLost)
		if err != nil {
			return nil, false, wrapErr(op, err)
		}
		return stored, false, nil
	}
	if err != nil {
		return nil, false, wrapErr(op, err)
	}
	return notify.ExpressView(c), true, nil
}

// readExpressItem reads the main item (consistent) and decodes its express attribute; x is nil
// for a notification that is not (or no longer) express.
func (s *Store) readExpressItem(ctx context.Context, id string) (main *notificationItem, x *notify.Express, err error) {
	main = new(notificationItem)
	err = s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).
		Project(attrPK, attrSK, "status", "x", "shards").Consistent(true).One(ctx, main)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, nil, notify.Errorf(notify.ENOTFOUND, "notification not found")
	}
	if err != nil {
		return nil, nil, err
	}
	if main.Express == "" {
		return main, nil, nil
	}
	x = new(notify.Express)
	if err := json.Unmarshal([]byte(main.Express), x); err != nil {
		return nil, nil, fmt.Errorf("decode express deliveries: %w", err)
	}
	// Its batch's verdicts, if recorded, are applied to x (not to main, whose express attribute
	// and status the writes are conditioned on): a write of x folds them into the item.
	if _, err := s.resolveVerdicts(ctx, id, x, notify.NotificationStatus(main.Status), nil); err != nil {
		return nil, nil, err
	}
	return main, x, nil
}

// CompleteExpress implements notify.ExpressStore: a consistent read of the main item, then one
// UpdateItem conditioned on the express attribute and status it read (a racing writer makes it
// read again). The ingest path records verdicts with CompleteExpressBatch; this is its fallback.
func (s *Store) CompleteExpress(ctx context.Context, id string, updates []notify.DeliveryUpdate) (int, error) {
	op := "complete express " + id
	for attempt := 0; attempt < expressAttempts; attempt++ {
		main, x, err := s.readExpressItem(ctx, id)
		if err != nil {
			return 0, wrapErr(op, err)
		}
		if x == nil {
			return 0, wrapErr(op, notify.Errorf(notify.EINVALID, "notification is not express"))
		}
		applied := x.Apply(updates)
		status := notify.NotificationStatus(main.Status)
		finish := !x.Pending() && status == notify.StatusProcessing
		if applied == 0 && !finish {
			return 0, nil
		}
		b, err := json.Marshal(x)
		if err != nil {
			return 0, wrapErr(op, fmt.Errorf("encode express deliveries: %w", err))
		}
		if finish {
			status = x.FinalStatus()
		}
		e := newExpr()
		_, err = s.updateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.tables.Notifications),
			Key:       key2(notificationPK(id), skNotification),
			UpdateExpression: aws.String(updateExpr([]string{e.n("x") + " = " + e.s(string(b)),
				e.n("status") + " = " + e.s(string(status)), e.n("updated_at") + " = " + e.i(nanos(s.now()))}, nil, nil)),
			ConditionExpression:       aws.String(e.n("x") + " = " + e.s(main.Express) + " AND " + e.n("status") + " = " + e.s(main.Status)),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
		})
		if _, failed := condFailedItem(err); failed {
			continue
		}
		if err != nil {
			return 0, wrapErr(op, err)
		}
		return applied, nil
	}
	return 0, wrapErr(op, notify.Errorf(notify.ECONFLICT, "the notification kept changing"))
}

// HandOverExpress implements notify.ExpressStore: one transaction puts the deliveries, adds
// their counts on counter shard 0 and removes the express attribute (registering shard 0 and, to
// reprepare, removing the prepared chunk) from the main item, conditioned on the express
// attribute it read. No delivery record of an express notification exists before this commits,
// so the puts cannot collide.
func (s *Store) HandOverExpress(ctx context.Context, id string, updates []notify.DeliveryUpdate, reprepare bool) error {
	op := "hand over express " + id
	for attempt := 0; attempt < expressAttempts; attempt++ {
		main, x, err := s.readExpressItem(ctx, id)
		if err != nil {
			return wrapErr(op, err)
		}
		if x == nil {
			return nil
		}
		if x.Verdicts != "" && !x.Pending() && notify.NotificationStatus(main.Status) == notify.StatusProcessing {
			// Its batch decided every delivery: nothing to hand over, its verdicts are folded
			// into the item and its status made final, as CompleteExpress does.
			_, err := s.CompleteExpress(ctx, id, updates)
			return wrapErr(op, err)
		}
		x.Apply(updates)
		x.Release()
		now := s.now()
		ttl := ttlOf(now.Add(deliveryRetention))
		items := make([]types.TransactWriteItem, 0, len(x.Deliveries)+2)
		for _, d := range x.Deliveries {
			av, err := dynamo.MarshalItem(deliveryItem{
				ID: d.ID, NotificationID: id, Shard: deliveryShardKey(id, shardOf(d.ID, deliveryShards)),
				UserID: d.UserID, Channel: string(d.Channel), Provider: string(d.Provider), App: d.App,
				AddressMasked: d.AddressMasked, Status: string(d.Status), Reason: d.Reason, Detail: d.Detail,
				Attempts: d.Attempts, ProviderMessageID: d.ProviderMessageID, UpdatedAt: nanos(d.UpdatedAt), TTL: ttl,
			})
			if err != nil {
				return wrapErr(op, fmt.Errorf("encode delivery %s: %w", d.ID, err))
			}
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Deliveries), Item: av}})
		}
		if up := s.statsUpdate(id, 0, x.Counts(), 0); up != nil {
			items = append(items, types.TransactWriteItem{Update: up})
		}
		e := newExpr()
		remove := []string{e.n("x")}
		if reprepare {
			remove = append(remove, e.n(attrChunksPrepared))
		}
		var add []string
		if !slices.Contains(main.Shards, 0) {
			add = append(add, e.n("shards")+" "+e.v(&types.AttributeValueMemberNS{Value: []string{strconv.Itoa(0)}}))
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(s.tables.Notifications),
			Key:                       key2(notificationPK(id), skNotification),
			UpdateExpression:          aws.String(updateExpr([]string{e.n("updated_at") + " = " + e.i(nanos(now))}, add, remove)),
			ConditionExpression:       aws.String(e.n("x") + " = " + e.s(main.Express)),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
		}})
		err = s.transact(ctx, items)
		if reasons, canceled := cancelReasons(err); canceled && reasonCode(reasons, len(items)-1) == "ConditionalCheckFailed" {
			continue // changed since it was read: read again
		}
		if err != nil {
			return wrapErr(op, err)
		}
		return nil
	}
	return wrapErr(op, notify.Errorf(notify.ECONFLICT, "the notification kept changing"))
}

// listExpress serves ListDeliveries while the deliveries are in the main item; ok is false for
// any other notification.
func (s *Store) listExpress(ctx context.Context, id, after string, limit int) (ds []notify.Delivery, more, ok bool, err error) {
	_, x, err := s.readExpressItem(ctx, id)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return nil, false, false, nil
	}
	if err != nil || x == nil {
		return nil, false, false, err
	}
	ds, more = x.Page(after, limit)
	for i := range ds {
		ds[i].NotificationID = id
	}
	return ds, more, true, nil
}
