package ddb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// deliveriesPerTx is how many delivery writes share one transaction with their counter ADD (and,
// the first time a shard is used, its registration on the notification).
const deliveriesPerTx = txMaxItems - 2

// deliveryItem is one delivery. There is deliberately no address attribute: only the masked
// form is stored.
type deliveryItem struct {
	ID                string `dynamo:"id"`
	NotificationID    string `dynamo:"notification_id"`
	Shard             string `dynamo:"nshard"` // <notification id>#<k>: the by_notification partition
	UserID            string `dynamo:"user_id,omitempty"`
	Channel           string `dynamo:"channel"`
	Provider          string `dynamo:"provider,omitempty"`
	App               string `dynamo:"app,omitempty"`
	AddressMasked     string `dynamo:"address_masked,omitempty"`
	Status            string `dynamo:"status"`
	Reason            string `dynamo:"reason,omitempty"`
	Detail            string `dynamo:"detail,omitempty"`
	Attempts          int    `dynamo:"attempts"`
	ProviderMessageID string `dynamo:"provider_message_id,omitempty"`
	LeaseUntil        int64  `dynamo:"lease_until"`
	UpdatedAt         int64  `dynamo:"updated_at"`
	TTL               int64  `dynamo:"ttl,omitempty"`
	// StatsShard is the counter shard of the delivery's chunk: verdicts count there too, so a
	// notification's counters live on no more shards than it has chunks.
	StatsShard int `dynamo:"sshard"`
	// Batch is the realtime send batch that stored the delivery with its outcome
	// (RecordBatch); empty for one created before its send.
	Batch string `dynamo:"rbatch,omitempty"`
	// History is the delivery's earlier attempts (notify.Delivery.History) as JSON; absent for
	// one decided on its first attempt.
	History string `dynamo:"hist,omitempty"`
}

// historyAttr is h as the hist attribute: "" (absent) when empty.
func historyAttr(h []notify.Attempt) string {
	if len(h) == 0 {
		return ""
	}
	b, err := json.Marshal(h)
	if err != nil { // times, strings and ints always encode
		return ""
	}
	return string(b)
}

func deliveryShardKey(notificationID string, k int) string {
	return fmt.Sprintf("%s#%02d", notificationID, k)
}

func (it deliveryItem) delivery() notify.Delivery {
	d := notify.Delivery{
		ID: it.ID, NotificationID: it.NotificationID, UserID: it.UserID, Channel: notify.Channel(it.Channel),
		Provider: notify.Provider(it.Provider), App: it.App, AddressMasked: it.AddressMasked,
		Status: notify.DeliveryStatus(it.Status), Reason: it.Reason, Detail: it.Detail, Attempts: it.Attempts,
		ProviderMessageID: it.ProviderMessageID, LeaseUntil: timeOf(it.LeaseUntil), UpdatedAt: timeOf(it.UpdatedAt),
	}
	if it.History != "" {
		// Diagnostic only: an attribute that does not decode is left out rather than failing a read.
		_ = json.Unmarshal([]byte(it.History), &d.History)
	}
	return d
}

// CreateDeliveries implements notify.DeliveryStore. A chunk is more deliveries than one
// transaction holds, so it is written as several: each inserts up to 98 deliveries
// (attribute_not_exists) together with an ADD of exactly those deliveries' counts on one
// counter shard, and the chunk marker (attribute_not_exists) with chunks_prepared+1 comes last.
// A crash midway leaves counted deliveries and no marker; the redelivered chunk then inserts and
// counts only the missing ones, and marks the chunk. A marked chunk changes nothing.
func (s *Store) CreateDeliveries(ctx context.Context, notificationID string, chunk int, ds []notify.Delivery) ([]string, error) {
	op := fmt.Sprintf("create deliveries of %s chunk %d", notificationID, chunk)
	for i := range ds {
		if ds[i].ID == "" {
			return nil, wrapErr(op, notify.FieldError(fmt.Sprintf("deliveries[%d].id", i), "delivery id is required"))
		}
		if ds[i].NotificationID != "" && ds[i].NotificationID != notificationID {
			return nil, wrapErr(op, notify.FieldError(fmt.Sprintf("deliveries[%d].notification_id", i), "belongs to another notification"))
		}
	}
	state, err := s.chunkState(ctx, notificationID, chunk)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	if !state.exists {
		return nil, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}

	// Duplicates would put one item twice into a transaction, which DynamoDB rejects.
	var uniq []notify.Delivery
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		if !seen[d.ID] {
			seen[d.ID] = true
			uniq = append(uniq, d)
		}
	}
	status := make(map[string]string, len(uniq))
	if !state.marked {
		w := chunkWrite{notificationID: notificationID, chunk: chunk, shard: chunkShard(chunk), now: s.now()}
		w.register = !slices.Contains(state.shards, w.shard)
		for _, group := range batchesOf(uniq, deliveriesPerTx) {
			if err := s.insertDeliveries(ctx, &w, group, status); err != nil {
				return nil, wrapErr(op, err)
			}
		}
		if chunk != notify.NoChunk { // NoChunk: the deliveries' own conditions keep it idempotent
			if err := s.markChunk(ctx, &w); err != nil {
				return nil, wrapErr(op, err)
			}
		}
	}
	// Deliveries of a marked chunk: their status now decides what is still to send.
	var unknown []string
	for _, d := range uniq {
		if _, ok := status[d.ID]; !ok {
			unknown = append(unknown, d.ID)
		}
	}
	if len(unknown) > 0 {
		found, err := s.readDeliveries(ctx, unknown, attrDeliveryID, "status")
		if err != nil {
			return nil, wrapErr(op, err)
		}
		for id, it := range found {
			status[id] = it.Status
		}
	}
	pending := make([]string, 0, len(uniq))
	for _, d := range uniq {
		if status[d.ID] == string(notify.DeliveryPending) {
			pending = append(pending, d.ID)
		}
	}
	return pending, nil
}

// chunkShard is the counter shard of a chunk: consecutive chunks, which the prepare stage
// writes concurrently, land on different shards, and a notification of one chunk on one.
func chunkShard(chunk int) int {
	return ((chunk % statsShards) + statsShards) % statsShards
}

// chunkStatus is what CreateDeliveries reads before writing.
type chunkStatus struct {
	exists, marked bool
	shards         []int // counter shards registered on the notification
}

// chunkState reads, in one consistent BatchGetItem, whether the notification exists, which
// counter shards it has, and whether chunk is already marked prepared.
func (s *Store) chunkState(ctx context.Context, notificationID string, chunk int) (chunkStatus, error) {
	var st chunkStatus
	var rows []dynamo.Item
	err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).
		Get(dynamo.Keys{notificationPK(notificationID), skNotification}, dynamo.Keys{chunkPK(notificationID, chunk), skChunk}).
		Project(attrPK, attrSK, "shards").Consistent(true).All(ctx, &rows)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return st, fmt.Errorf("read chunk state: %w", err)
	}
	for _, row := range rows {
		switch stringAttr(row, attrSK) {
		case skNotification:
			st.exists = true
			var main notificationItem
			if err := dynamo.UnmarshalItem(row, &main); err != nil {
				return st, fmt.Errorf("decode notification: %w", err)
			}
			st.shards = main.Shards
		case skChunk:
			st.marked = true
		}
	}
	return st, nil
}

// chunkWrite is one CreateDeliveries' progress through its transactions.
type chunkWrite struct {
	notificationID string
	chunk, shard   int
	now            time.Time
	register       bool // the shard is not known to be registered yet: the next transaction does it
}

// counters returns the transaction items that add delta (and chunks) on the chunk's shard, with
// the shard's registration while it is pending.
func (s *Store) counters(w *chunkWrite, delta map[notify.Channel]notify.ChannelStats, chunks int) []types.TransactWriteItem {
	up := s.statsUpdate(w.notificationID, w.shard, delta, chunks)
	if up == nil {
		return nil
	}
	items := []types.TransactWriteItem{{Update: up}}
	if w.register {
		items = append(items, types.TransactWriteItem{Update: s.registerShard(w.notificationID, w.shard)})
	}
	return items
}

// insertDeliveries writes group (≤ 98 deliveries) in one transaction with the counter delta of
// the ones it inserts. Deliveries that exist already fail their condition and cancel the
// transaction; they are taken out (their stored status, returned by ALL_OLD, goes into status)
// and the rest is tried again, so only what this call inserted is ever counted.
func (s *Store) insertDeliveries(ctx context.Context, w *chunkWrite, group []notify.Delivery, status map[string]string) error {
	ttl := ttlOf(w.now.Add(deliveryRetention))
	todo := make([]deliveryItem, len(group))
	for i, d := range group {
		st := d.Status
		if st == "" {
			st = notify.DeliveryPending
		}
		updated := d.UpdatedAt
		if updated.IsZero() {
			updated = w.now
		}
		// d.Address is deliberately not copied: only the masked form is persisted.
		todo[i] = deliveryItem{
			ID: d.ID, NotificationID: w.notificationID, Shard: deliveryShardKey(w.notificationID, shardOf(d.ID, deliveryShards)),
			UserID: d.UserID, Channel: string(d.Channel), Provider: string(d.Provider), App: d.App,
			AddressMasked: d.AddressMasked, Status: string(st), Reason: d.Reason, Detail: d.Detail, Attempts: d.Attempts,
			ProviderMessageID: d.ProviderMessageID, LeaseUntil: nanos(d.LeaseUntil), UpdatedAt: nanos(updated), TTL: ttl,
			StatsShard: w.shard,
		}
	}
	retries := 0
	for len(todo) > 0 {
		tx := make([]types.TransactWriteItem, 0, len(todo)+2)
		delta := map[notify.Channel]notify.ChannelStats{}
		for _, it := range todo {
			av, err := dynamo.MarshalItem(it)
			if err != nil {
				return fmt.Errorf("encode delivery %s: %w", it.ID, err)
			}
			tx = append(tx, types.TransactWriteItem{Put: &types.Put{
				TableName:                           aws.String(s.tables.Deliveries),
				Item:                                av,
				ConditionExpression:                 aws.String("attribute_not_exists(#id)"),
				ExpressionAttributeNames:            map[string]string{"#id": attrDeliveryID},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}})
			notify.CountDelivery(delta, notify.Channel(it.Channel), notify.DeliveryStatus(it.Status), it.Reason, true)
		}
		tx = append(tx, s.counters(w, delta, 0)...)

		err := s.transact(ctx, tx)
		if err == nil {
			for _, it := range todo {
				status[it.ID] = it.Status
			}
			w.register = false
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if !canceled {
			if !retryableAPI(err) || retries+1 >= txAttempts {
				return fmt.Errorf("insert deliveries: %w", err)
			}
			if err := s.pauseRetry(ctx, &retries); err != nil {
				return err
			}
			continue
		}
		keep := todo[:0:0]
		transientSeen := false
		for i := len(todo); i < len(tx); i++ {
			switch code := reasonCode(reasons, i); {
			case code == "ConditionalCheckFailed": // the registration: the notification is gone
				return notify.Errorf(notify.ENOTFOUND, "notification not found")
			case transient(code):
				transientSeen = true
			}
		}
		for i, it := range todo {
			switch code := reasonCode(reasons, i); {
			case code == "ConditionalCheckFailed":
				status[it.ID] = stringAttr(reasons[i].Item, "status")
			case code == "None":
				keep = append(keep, it)
			case transient(code):
				keep = append(keep, it)
				transientSeen = true
			default:
				return fmt.Errorf("insert deliveries: %w", err)
			}
		}
		if len(keep) == len(todo) {
			if !transientSeen || retries+1 >= txAttempts {
				return fmt.Errorf("insert deliveries: %w", err)
			}
			if err := s.pauseRetry(ctx, &retries); err != nil {
				return err
			}
		}
		todo = keep
	}
	return nil
}

// pauseRetry counts a retry and waits before it.
func (s *Store) pauseRetry(ctx context.Context, retries *int) error {
	err := pause(ctx, *retries)
	*retries++
	return err
}

// markChunk writes the chunk marker with chunks_prepared+1 in one transaction. A marker that
// exists means a concurrent attempt of the same chunk marked it first: nothing to do.
func (s *Store) markChunk(ctx context.Context, w *chunkWrite) error {
	_, err := s.markChunkWith(ctx, w, nil)
	return err
}

// markChunkWith is markChunk adding delta to the counters in the same transaction; it reports
// whether this call wrote the marker.
func (s *Store) markChunkWith(ctx context.Context, w *chunkWrite, delta map[notify.Channel]notify.ChannelStats) (bool, error) {
	marker, err := s.putIfAbsent(s.tables.Notifications, struct {
		PK  string `dynamo:"pk"`
		SK  string `dynamo:"sk"`
		TTL int64  `dynamo:"ttl"`
	}{chunkPK(w.notificationID, w.chunk), skChunk, ttlOf(w.now.Add(deliveryRetention))})
	if err != nil {
		return false, fmt.Errorf("mark chunk: %w", err)
	}
	for retries := 0; ; {
		tx := append([]types.TransactWriteItem{marker}, s.counters(w, delta, 1)...)
		err := s.transact(ctx, tx)
		if err == nil {
			w.register = false
			return true, nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			return false, nil
		}
		if canceled && reasonCode(reasons, 2) == "ConditionalCheckFailed" {
			return false, notify.Errorf(notify.ENOTFOUND, "notification not found")
		}
		if !worthRetry(err, reasons, canceled) || retries+1 >= txAttempts {
			return false, fmt.Errorf("mark chunk: %w", err)
		}
		if err := s.pauseRetry(ctx, &retries); err != nil {
			return false, err
		}
	}
}

// readDeliveries reads the listed deliveries (consistent BatchGetItem, 100 keys a request,
// unprocessed keys retried with backoff), projected to attrs when given.
func (s *Store) readDeliveries(ctx context.Context, ids []string, attrs ...string) (map[string]deliveryItem, error) {
	out := make(map[string]deliveryItem, len(ids))
	ids = unique(ids)
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]dynamo.Keyed, len(ids))
	for i, id := range ids {
		keys[i] = dynamo.Keys{id}
	}
	get := s.db.Table(s.tables.Deliveries).Batch(attrDeliveryID).Get(keys...).Consistent(true)
	if len(attrs) > 0 {
		get = get.Project(attrs...)
	}
	var items []deliveryItem
	if err := get.All(ctx, &items); err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	for _, it := range items {
		out[it.ID] = it
	}
	return out, nil
}

// ClaimDeliveries implements notify.DeliveryStore: one conditional UpdateItem per delivery
// (of notificationID, and PENDING or SENDING with an expired lease), up to 16 at once. ALL_NEW
// returns the claimed delivery; on a failed condition ALL_OLD tells a live lease (busy) from a
// terminal, unknown or other notification's delivery, as of the moment the condition failed.
// If a request fails for another reason the whole call fails; the deliveries it did claim stay
// SENDING until their lease ends.
func (s *Store) ClaimDeliveries(ctx context.Context, notificationID string, ids []string, now, leaseUntil time.Time) ([]notify.Delivery, []string, error) {
	ids = unique(ids)
	type result struct {
		claimed *notify.Delivery
		busy    bool
	}
	results := make([]result, len(ids))
	nowN := nanos(now)
	err := forEach(ctx, len(ids), func(ctx context.Context, i int) error {
		e := newExpr()
		st, lease := e.n("status"), e.n("lease_until")
		sending := e.s(string(notify.DeliverySending))
		nowV := e.i(nowN)
		nid := e.n("notification_id") + " = " + e.s(notificationID)
		out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.tables.Deliveries),
			Key:       map[string]types.AttributeValue{attrDeliveryID: strAttr(ids[i])},
			UpdateExpression: aws.String(updateExpr(
				[]string{st + " = " + sending, lease + " = " + e.i(nanos(leaseUntil)), e.n("updated_at") + " = " + nowV},
				[]string{e.n("attempts") + " " + e.i(1)}, nil)),
			ConditionExpression: aws.String("attribute_exists(" + e.n(attrDeliveryID) + ") AND " + nid + " AND (" +
				st + " = " + e.s(string(notify.DeliveryPending)) + " OR (" + st + " = " + sending + " AND " + lease + " < " + nowV + "))"),
			ExpressionAttributeNames:            e.nameMap(),
			ExpressionAttributeValues:           e.valueMap(),
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if old, failed := condFailedItem(err); failed {
			if old != nil {
				var it deliveryItem
				if err := dynamo.UnmarshalItem(old, &it); err != nil {
					return fmt.Errorf("decode delivery %s: %w", ids[i], err)
				}
				results[i].busy = it.NotificationID == notificationID && it.Status == string(notify.DeliverySending) && it.LeaseUntil >= nowN
			}
			return nil
		}
		if err != nil {
			return err
		}
		var it deliveryItem
		if err := dynamo.UnmarshalItem(out.Attributes, &it); err != nil {
			return fmt.Errorf("decode delivery %s: %w", ids[i], err)
		}
		d := it.delivery()
		results[i].claimed = &d
		return nil
	})
	if err != nil {
		return nil, nil, wrapErr("claim deliveries", err)
	}
	claimed := make([]notify.Delivery, 0, len(ids))
	var busy []string
	for i, r := range results {
		if r.claimed != nil {
			claimed = append(claimed, *r.claimed)
		} else if r.busy {
			busy = append(busy, ids[i])
		}
	}
	return claimed, busy, nil
}

// CompleteDeliveries implements notify.DeliveryStore. A consistent BatchGetItem first reads each
// delivery's channel (immutable, and needed for the counters) and status; those SENDING under
// this notification are then updated in transactions of up to 98 conditional updates
// (status = SENDING) plus one ADD of their terminal outcomes on a counter shard of their chunks. A condition
// that fails (another worker completed it meanwhile) takes that delivery out and the rest is
// tried again, so a verdict counts exactly when it is applied.
func (s *Store) CompleteDeliveries(ctx context.Context, notificationID string, updates []notify.DeliveryUpdate) (int, error) {
	op := "complete deliveries of " + notificationID
	for i, u := range updates {
		if !u.ValidVerdict() {
			return 0, wrapErr(op, notify.FieldError(fmt.Sprintf("updates[%d].status", i),
				"verdict must be SENT, FAILED, SKIPPED, EXPIRED, PENDING, or SENDING with a lease, not %q", u.Status))
		}
	}
	if len(updates) == 0 {
		return 0, nil
	}
	ids := make([]string, len(updates))
	for i, u := range updates {
		ids[i] = u.ID
	}
	current, err := s.readDeliveries(ctx, ids, attrDeliveryID, "notification_id", "channel", "status", "sshard")
	if err != nil {
		return 0, wrapErr(op, err)
	}
	// One verdict per delivery (the first), and only for deliveries that can take it now.
	var todo []notify.DeliveryUpdate
	seen := make(map[string]bool, len(updates))
	for _, u := range updates {
		it, ok := current[u.ID]
		if seen[u.ID] || !ok || it.NotificationID != notificationID || it.Status != string(notify.DeliverySending) {
			continue
		}
		seen[u.ID] = true
		todo = append(todo, u)
	}
	now := s.now()
	applied := 0
	for _, group := range batchesOf(todo, deliveriesPerTx) {
		n, err := s.applyVerdicts(ctx, notificationID, group, current, now)
		applied += n
		if err != nil {
			return applied, wrapErr(op, err)
		}
	}
	return applied, nil
}

// applyVerdicts writes one group of verdicts with their counter delta in one transaction.
func (s *Store) applyVerdicts(ctx context.Context, notificationID string, todo []notify.DeliveryUpdate,
	current map[string]deliveryItem, now time.Time) (int, error) {
	retries := 0
	for len(todo) > 0 {
		tx := make([]types.TransactWriteItem, 0, len(todo)+1)
		delta := map[notify.Channel]notify.ChannelStats{}
		for _, u := range todo {
			tx = append(tx, types.TransactWriteItem{Update: s.verdictUpdate(notificationID, u, now)})
			notify.CountDelivery(delta, notify.Channel(current[u.ID].Channel), u.Status, u.Reason, false)
		}
		// Any shard the group's deliveries count on is registered; a retry after a conflict
		// (likely on the shard) moves to the next delivery's.
		shard := current[todo[retries%len(todo)].ID].StatsShard
		if up := s.statsUpdate(notificationID, shard, delta, 0); up != nil {
			tx = append(tx, types.TransactWriteItem{Update: up})
		}

		err := s.transact(ctx, tx)
		if err == nil {
			return len(todo), nil
		}
		reasons, canceled := cancelReasons(err)
		if !canceled {
			if !retryableAPI(err) || retries+1 >= txAttempts {
				return 0, fmt.Errorf("apply verdicts: %w", err)
			}
			if err := s.pauseRetry(ctx, &retries); err != nil {
				return 0, err
			}
			continue
		}
		keep := todo[:0:0]
		transientSeen := transient(reasonCode(reasons, len(todo)))
		for i, u := range todo {
			switch code := reasonCode(reasons, i); {
			case code == "ConditionalCheckFailed":
				// No longer SENDING: someone else applied a verdict first.
			case code == "None":
				keep = append(keep, u)
			case transient(code):
				keep = append(keep, u)
				transientSeen = true
			default:
				return 0, fmt.Errorf("apply verdicts: %w", err)
			}
		}
		if len(keep) == len(todo) {
			if !transientSeen || retries+1 >= txAttempts {
				return 0, fmt.Errorf("apply verdicts: %w", err)
			}
			if err := s.pauseRetry(ctx, &retries); err != nil {
				return 0, err
			}
		}
		todo = keep
	}
	return 0, nil
}

// verdictUpdate moves one SENDING delivery of notificationID to u's status.
func (s *Store) verdictUpdate(notificationID string, u notify.DeliveryUpdate, now time.Time) *types.Update {
	at := u.At
	if at.IsZero() {
		at = now
	}
	e := newExpr()
	st := e.n("status")
	lease := int64(0) // a verdict ends the claim; SENDING (verdict to come) renews it
	if u.Status == notify.DeliverySending {
		lease = nanos(u.LeaseUntil)
	}
	set := []string{st + " = " + e.s(string(u.Status)), e.n("lease_until") + " = " + e.i(lease), e.n("updated_at") + " = " + e.i(nanos(at))}
	var remove []string
	for _, f := range []struct{ name, value string }{
		{"reason", u.Reason}, {"detail", u.Detail}, {"provider_message_id", u.ProviderMessageID},
	} {
		if f.value != "" {
			set = append(set, e.n(f.name)+" = "+e.s(f.value))
		} else {
			remove = append(remove, e.n(f.name))
		}
	}
	if h := historyAttr(u.History); h != "" { // no history leaves the earlier attempts as they are
		set = append(set, e.n("hist")+" = "+e.s(h))
	}
	return &types.Update{
		TableName:                 aws.String(s.tables.Deliveries),
		Key:                       map[string]types.AttributeValue{attrDeliveryID: strAttr(u.ID)},
		UpdateExpression:          aws.String(updateExpr(set, nil, remove)),
		ConditionExpression:       aws.String(st + " = " + e.s(string(notify.DeliverySending)) + " AND " + e.n("notification_id") + " = " + e.s(notificationID)),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	}
}

// ListDeliveries implements notify.DeliveryStore. The by_notification index is split into
// deliveryShards partitions per notification (so a large campaign's inserts do not all land on
// one index partition); a page asks each shard for the next limit+1 ids after the cursor,
// merges them in id order, and reads the page's deliveries with one consistent BatchGetItem.
// The index is eventually consistent: a delivery created a moment ago may be missing from a
// listing, never from a claim. The cursor is the last id returned, base64url encoded.
func (s *Store) ListDeliveries(ctx context.Context, notificationID, cursor string, limit int) ([]notify.Delivery, string, error) {
	op := "list deliveries of " + notificationID
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 {
			return nil, "", wrapErr(op, notify.FieldError("cursor", "malformed cursor"))
		}
		after = string(b)
	}
	limit = notify.PageLimit(limit)
	if xs, more, ok, err := s.listExpress(ctx, notificationID, after, limit); err != nil {
		return nil, "", wrapErr(op, err)
	} else if ok {
		next := ""
		if more {
			next = base64.RawURLEncoding.EncodeToString([]byte(xs[len(xs)-1].ID))
		}
		return xs, next, nil
	}
	perShard := make([][]string, deliveryShards)
	err := forEach(ctx, deliveryShards, func(ctx context.Context, k int) error {
		q := s.db.Table(s.tables.Deliveries).Get(attrDeliveryShard, deliveryShardKey(notificationID, k)).
			Index(indexByNotification).Limit(limit + 1)
		if after != "" {
			q = q.Range(attrDeliveryID, dynamo.Greater, after)
		}
		var keys []struct {
			ID string `dynamo:"id"`
		}
		if err := q.All(ctx, &keys); err != nil {
			return fmt.Errorf("query shard %d: %w", k, err)
		}
		for _, k2 := range keys {
			perShard[k] = append(perShard[k], k2.ID)
		}
		return nil
	})
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	var ids []string
	for _, sh := range perShard {
		ids = append(ids, sh...)
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(ids[limit-1]))
	}
	found, err := s.readDeliveries(ctx, ids)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	ds := make([]notify.Delivery, 0, len(ids))
	for _, id := range ids {
		if it, ok := found[id]; ok { // gone since the index was read (TTL)
			ds = append(ds, it.delivery())
		}
	}
	return ds, next, nil
}
