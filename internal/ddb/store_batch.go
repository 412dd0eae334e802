package ddb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// The bulk lane's records live in the notifications table beside the notification:
// chunk markers (pk N#<id>#C#<chunk>, the same ones CreateDeliveries writes) and one item per
// send batch (pk N#<id>#B#<batch>, sk B) with done, attempts and lease_until. A batch's
// completion and its counter ADD are one transaction, so a redelivered batch never counts twice.
const skBatch = "B"

func batchPK(id, batch string) string { return "N#" + id + "#B#" + batch }

// ChunkPrepared implements notify.BatchStore.
func (s *Store) ChunkPrepared(ctx context.Context, notificationID string, chunk int) (bool, error) {
	st, err := s.chunkState(ctx, notificationID, chunk)
	if err != nil {
		return false, wrapErr(fmt.Sprintf("chunk %d of %s", chunk, notificationID), err)
	}
	if !st.exists {
		return false, wrapErr(fmt.Sprintf("chunk %d of %s", chunk, notificationID), notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	return st.marked, nil
}

// AddChunk implements notify.BatchStore: the marker (attribute_not_exists) and the counter ADD
// on the chunk's shard are one transaction.
func (s *Store) AddChunk(ctx context.Context, notificationID string, chunk int, delta map[notify.Channel]notify.ChannelStats) (bool, error) {
	op := fmt.Sprintf("add chunk %d of %s", chunk, notificationID)
	st, err := s.chunkState(ctx, notificationID, chunk)
	if err != nil {
		return false, wrapErr(op, err)
	}
	if !st.exists {
		return false, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	if st.marked {
		return false, nil
	}
	w := chunkWrite{notificationID: notificationID, chunk: chunk, shard: chunkShard(chunk), now: s.now()}
	w.register = !slices.Contains(st.shards, w.shard)
	added, err := s.markChunkWith(ctx, &w, delta)
	if err != nil {
		return false, wrapErr(op, err)
	}
	return added, nil
}

// batchItem is one send batch's idempotency record.
type batchItem struct {
	Done       bool  `dynamo:"done"`
	Attempts   int   `dynamo:"attempts"`
	LeaseUntil int64 `dynamo:"lease_until"`
}

// ClaimBatch implements notify.BatchStore with one conditional UpdateItem: it takes a batch
// that does not exist, or is not done and whose lease ended; ALL_OLD on failure tells busy from
// done.
func (s *Store) ClaimBatch(ctx context.Context, notificationID, batchID string, now, leaseUntil time.Time) (notify.BatchClaim, error) {
	op := fmt.Sprintf("claim batch %s of %s", batchID, notificationID)
	var main notificationItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(notificationID)).Range(attrSK, dynamo.Equal, skNotification).
		Project(attrPK).Consistent(true).One(ctx, &main)
	if err != nil {
		return notify.BatchClaim{}, wrapErr(op, err) // dynamo.ErrNotFound classifies as ENOTFOUND
	}
	e := newExpr()
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.tables.Notifications),
		Key:       key2(batchPK(notificationID, batchID), skBatch),
		UpdateExpression: aws.String(updateExpr([]string{
			e.n("done") + " = " + e.v(&types.AttributeValueMemberBOOL{Value: false}),
			e.n("lease_until") + " = " + e.i(nanos(leaseUntil)),
			e.n("updated_at") + " = " + e.i(nanos(now)),
			e.n("ttl") + " = " + e.i(ttlOf(now.Add(deliveryRetention))),
		}, []string{e.n("attempts") + " " + e.i(1)}, nil)),
		ConditionExpression: aws.String("attribute_not_exists(" + e.n(attrPK) + ") OR (" +
			e.n("done") + " = " + e.v(&types.AttributeValueMemberBOOL{Value: false}) + " AND " +
			e.n("lease_until") + " <= " + e.i(nanos(now)) + ")"),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	out, err := s.updateItem(ctx, in)
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			var old batchItem
			if err := dynamo.UnmarshalItem(ccf.Item, &old); err != nil {
				return notify.BatchClaim{}, wrapErr(op, fmt.Errorf("decode batch: %w", err))
			}
			if old.Done {
				return notify.BatchClaim{State: notify.BatchDone, Attempts: old.Attempts}, nil
			}
			return notify.BatchClaim{State: notify.BatchBusy, Attempts: old.Attempts, LeaseUntil: timeOf(old.LeaseUntil)}, nil
		}
		return notify.BatchClaim{}, wrapErr(op, err)
	}
	attempts := 1
	if n, ok := out.Attributes["attempts"].(*types.AttributeValueMemberN); ok {
		if v, err := strconv.Atoi(n.Value); err == nil {
			attempts = v
		}
	}
	return notify.BatchClaim{State: notify.BatchClaimed, Attempts: attempts}, nil
}

// CompleteBatch implements notify.BatchStore: done = true (conditioned on done = false) and the
// counter ADD on a shard picked by the batch id, in one transaction.
func (s *Store) CompleteBatch(ctx context.Context, notificationID, batchID string, delta map[notify.Channel]notify.ChannelStats, at time.Time) (bool, error) {
	op := fmt.Sprintf("complete batch %s of %s", batchID, notificationID)
	shards, err := s.counterShards(ctx, notificationID)
	if err != nil {
		return false, wrapErr(op, err)
	}
	done, err := s.markBatchDone(ctx, notificationID, batchID, shards, delta, at)
	if err != nil {
		return false, wrapErr(op, err)
	}
	return done, nil
}

// counterShards reads the counter shards a notification has registered (a consistent read of
// its main item, projected); dynamo.ErrNotFound when it is unknown.
func (s *Store) counterShards(ctx context.Context, notificationID string) ([]int, error) {
	var main notificationItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(notificationID)).Range(attrSK, dynamo.Equal, skNotification).
		Project("shards").Consistent(true).One(ctx, &main)
	return main.Shards, err
}

// markBatchDone sets done = true on a batch not done, with the counter ADD of delta on a shard
// picked by the batch id (shards are those the notification has registered), in one
// transaction. It reports false when the batch was done already, or never claimed.
func (s *Store) markBatchDone(ctx context.Context, notificationID, batchID string, shards []int,
	delta map[notify.Channel]notify.ChannelStats, at time.Time) (bool, error) {
	w := chunkWrite{notificationID: notificationID, shard: shardOf(batchID, statsShards), now: at}
	w.register = !slices.Contains(shards, w.shard)
	e := newExpr()
	done := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.tables.Notifications),
		Key:       key2(batchPK(notificationID, batchID), skBatch),
		UpdateExpression: aws.String(updateExpr([]string{
			e.n("done") + " = " + e.v(&types.AttributeValueMemberBOOL{Value: true}),
			e.n("lease_until") + " = " + e.i(0),
			e.n("updated_at") + " = " + e.i(nanos(at)),
		}, nil, nil)),
		ConditionExpression:       aws.String(e.n("done") + " = " + e.v(&types.AttributeValueMemberBOOL{Value: false})),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	}}
	for retries := 0; ; {
		err := s.transact(ctx, append([]types.TransactWriteItem{done}, s.counters(&w, delta, 0)...))
		if err == nil {
			return true, nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			return false, nil // done already, or never claimed
		}
		if !worthRetry(err, reasons, canceled) || retries+1 >= txAttempts {
			return false, err
		}
		if err := s.pauseRetry(ctx, &retries); err != nil {
			return false, err
		}
	}
}

// RecordBatch implements notify.BatchStore. More deliveries than a transaction holds cannot be
// stored with the batch's completion in one step, and a transaction bills every item twice, so:
// a consistent read of the batch (a batch not SENDING changes nothing); then one conditional
// PutItem per delivery (one write unit), which stores it unless one with its id exists that is
// neither PENDING nor stored by this batch (its rbatch attribute); then markBatchDone with the
// outcomes of the deliveries stored. A crash before the completion leaves deliveries stored
// and uncounted; the batch re-run once its lease ends writes them again, as its own, and counts
// them then.
func (s *Store) RecordBatch(ctx context.Context, notificationID, batchID string, ds []notify.Delivery, at time.Time) (bool, error) {
	op := fmt.Sprintf("record batch %s of %s", batchID, notificationID)
	if err := notify.CheckRecorded(notificationID, ds); err != nil {
		return false, wrapErr(op, err)
	}
	shards, err := s.counterShards(ctx, notificationID)
	if err != nil {
		return false, wrapErr(op, err) // dynamo.ErrNotFound classifies as ENOTFOUND
	}
	var b batchItem
	err = s.db.Table(s.tables.Notifications).Get(attrPK, batchPK(notificationID, batchID)).Range(attrSK, dynamo.Equal, skBatch).
		Consistent(true).One(ctx, &b)
	if errors.Is(err, dynamo.ErrNotFound) {
		return false, nil // never claimed
	}
	if err != nil {
		return false, wrapErr(op, err)
	}
	if b.Done {
		return false, nil
	}

	stored, err := s.putRecorded(ctx, notificationID, batchID, ds, at)
	if err != nil {
		return false, wrapErr(op, fmt.Errorf("store deliveries: %w", err))
	}
	delta := map[notify.Channel]notify.ChannelStats{}
	for i, d := range ds {
		if stored[i] {
			notify.CountDelivery(delta, d.Channel, d.Status, d.Reason, false)
		}
	}
	done, err := s.markBatchDone(ctx, notificationID, batchID, shards, delta, at)
	if err != nil {
		return false, wrapErr(op, err)
	}
	return done, nil
}

// putRecorded is RecordBatch's first step: one conditional PutItem per delivery of ds, tagged
// with batchID. It reports which were stored; a failed condition (another outcome stands) is
// not an error.
func (s *Store) putRecorded(ctx context.Context, notificationID, batchID string, ds []notify.Delivery, at time.Time) ([]bool, error) {
	stored := make([]bool, len(ds))
	ttl := ttlOf(at.Add(deliveryRetention))
	sshard := shardOf(batchID, statsShards)
	err := forEach(ctx, len(ds), func(ctx context.Context, i int) error {
		d := ds[i]
		updated := d.UpdatedAt
		if updated.IsZero() {
			updated = at
		}
		// d.Address is deliberately not copied: only the masked form is persisted.
		av, err := dynamo.MarshalItem(deliveryItem{
			ID: d.ID, NotificationID: notificationID, Shard: deliveryShardKey(notificationID, shardOf(d.ID, deliveryShards)),
			UserID: d.UserID, Channel: string(d.Channel), Provider: string(d.Provider), App: d.App,
			AddressMasked: d.AddressMasked, Status: string(d.Status), Reason: d.Reason, Detail: d.Detail, Attempts: d.Attempts,
			ProviderMessageID: d.ProviderMessageID, UpdatedAt: nanos(updated), TTL: ttl, StatsShard: sshard, Batch: batchID,
			History: historyAttr(d.History),
		})
		if err != nil {
			return fmt.Errorf("encode delivery %s: %w", d.ID, err)
		}
		e := newExpr()
		_, err = s.putItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.tables.Deliveries),
			Item:      av,
			ConditionExpression: aws.String("attribute_not_exists(" + e.n(attrDeliveryID) + ") OR (" +
				e.n("notification_id") + " = " + e.s(notificationID) + " AND (" +
				e.n("status") + " = " + e.s(string(notify.DeliveryPending)) + " OR " + e.n("rbatch") + " = " + e.s(batchID) + "))"),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
		})
		if _, failed := condFailedItem(err); failed {
			return nil // another outcome stands: not this batch's to count
		}
		stored[i] = err == nil
		return err
	})
	return stored, err
}
