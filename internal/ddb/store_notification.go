package ddb

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Sort keys and key prefixes of the notifications table.
const (
	skNotification = "N"
	skRecipients   = "R#" // R#<version>#<k>
	skKeyClaim     = "K"
	skStats        = "S"
	skChunk        = "C"

	// recipientsPerChunk bounds a recipient chunk item; recipientChunkBytes keeps one well under
	// the 400 KB item limit even when its recipients compress badly.
	recipientsPerChunk  = 500
	recipientChunkBytes = 300 << 10

	attrChunksPrepared = "chunks_prepared"
)

func notificationPK(id string) string { return "N#" + id }

// statsPK is a counter shard. Each shard is its own partition key, so the writes of a large
// campaign spread over up to statsShards partitions instead of one.
func statsPK(id string, shard int) string { return fmt.Sprintf("N#%s#S#%02d", id, shard) }

// chunkPK is the marker of a prepared chunk.
func chunkPK(id string, chunk int) string { return "N#" + id + "#C#" + strconv.Itoa(chunk) }

// keyClaimPK is the claim of a (service, idempotency key) pair: hashed, so any key fits.
func keyClaimPK(service, key string) string {
	h := sha256.Sum256([]byte(service + "\x00" + key))
	return "K#" + hex.EncodeToString(h[:])
}

// notificationItem is the main item of a notification: pk N#<id>, sk N.
type notificationItem struct {
	PK             string `dynamo:"pk"`
	SK             string `dynamo:"sk"`
	ID             string `dynamo:"id"`
	Service        string `dynamo:"service"`
	IdempotencyKey string `dynamo:"idempotency_key,omitempty"`
	Status         string `dynamo:"status"`
	ChunksTotal    int    `dynamo:"chunks_total"`
	CreatedAt      int64  `dynamo:"created_at"`
	UpdatedAt      int64  `dynamo:"updated_at"`
	// Doc is the notification as JSON without Recipients, Status and Stats: the attributes here
	// and the recipient and counter items are the truth for those.
	Doc            string `dynamo:"doc"`
	RecipientCount int    `dynamo:"rcpt_count"`
	// RecipientsVersion names this write's recipient chunks (sk R#<version>#<k>), so chunks left
	// by a write that lost a race can never be mistaken for the stored notification's.
	RecipientsVersion string `dynamo:"rcpt_ver,omitempty"`
	// RecipientStarts[k] is the offset of chunk k's first recipient.
	RecipientStarts []int `dynamo:"rcpt_starts,omitempty"`
	// Shards is the set of counter shards in use, registered by the first transaction that
	// writes to each, so a read fetches only those (one, for most notifications).
	Shards []int `dynamo:"shards,set,omitempty"`
	// Express is an express notification's deliveries (notify.Express, compact JSON),
	// Inline its few recipients as JSON, and ChunksPrepared its one chunk, prepared by ingest
	// (see store_express.go); all empty for every other notification.
	Express        string `dynamo:"x,omitempty"`
	Inline         string `dynamo:"rcpt,omitempty"`
	ChunksPrepared int    `dynamo:"chunks_prepared,omitempty"`
	// RecipientUser is notify.IndexedUser of the notification where the store keeps the
	// recipient index (the by_user index's key); empty otherwise.
	RecipientUser string `dynamo:"ruser,omitempty"`
}

// recipientsItem holds up to recipientsPerChunk recipients as gzipped JSON.
type recipientsItem struct {
	PK    string `dynamo:"pk"`
	SK    string `dynamo:"sk"`
	Count int    `dynamo:"count"`
	Data  []byte `dynamo:"data"`
}

// keyClaimItem records which notification owns a (service, idempotency key).
type keyClaimItem struct {
	PK             string `dynamo:"pk"`
	SK             string `dynamo:"sk"`
	NotificationID string `dynamo:"notification_id"`
	Service        string `dynamo:"service"`
	IdempotencyKey string `dynamo:"idempotency_key"`
}

// CreateNotification implements notify.NotificationStore. The main item (attribute_not_exists),
// the key claim (attribute_not_exists) and the recipient chunks are one TransactWriteItems, so
// the notification becomes visible whole or not at all and two racing requests with the same
// key cannot both win; the cancellation reasons say which condition lost.
func (s *Store) CreateNotification(ctx context.Context, n *notify.Notification) (*notify.Notification, bool, error) {
	if n == nil || n.ID == "" {
		return nil, false, wrapErr("create notification", notify.Errorf(notify.EINVALID, "notification id is required"))
	}
	op := "create notification " + n.ID
	c := *n
	c.RecipientCount = len(c.Recipients)
	c.CreatedAt = s.nowOr(c.CreatedAt)
	c.UpdatedAt = s.nowOr(c.UpdatedAt)
	if c.SendAt != nil {
		t := c.SendAt.UTC()
		c.SendAt = &t
	}
	body, err := notificationDoc(&c)
	if err != nil {
		return nil, false, wrapErr(op, fmt.Errorf("encode: %w", err))
	}
	if c.Express != nil {
		return s.createExpress(ctx, &c, body)
	}
	chunks, err := encodeRecipients(c.Recipients)
	if err != nil {
		return nil, false, wrapErr(op, err)
	}

	main := notificationItem{
		PK: notificationPK(c.ID), SK: skNotification, ID: c.ID, Service: c.Service, IdempotencyKey: c.IdempotencyKey,
		Status: string(c.Status), ChunksTotal: c.Stats.ChunksTotal, CreatedAt: nanos(c.CreatedAt),
		UpdatedAt: nanos(c.UpdatedAt), Doc: body, RecipientCount: c.RecipientCount, RecipientUser: s.indexedUser(&c),
	}
	initial := s.statsUpdate(c.ID, 0, c.Stats.Channels, c.Stats.ChunksPrepared)
	if initial != nil {
		main.Shards = []int{0}
	}
	if len(chunks) > 0 {
		main.RecipientsVersion = randomToken()[:12]
		start := 0
		for _, ch := range chunks {
			main.RecipientStarts = append(main.RecipientStarts, start)
			start += ch.count
		}
	}
	version := main.RecipientsVersion
	head := make([]types.TransactWriteItem, 0, 3)
	put, err := s.putIfAbsent(s.tables.Notifications, main)
	if err != nil {
		return nil, false, wrapErr(op, err)
	}
	head = append(head, put)
	if c.IdempotencyKey != "" {
		put, err := s.putIfAbsent(s.tables.Notifications, keyClaimItem{PK: keyClaimPK(c.Service, c.IdempotencyKey),
			SK: skKeyClaim, NotificationID: c.ID, Service: c.Service, IdempotencyKey: c.IdempotencyKey})
		if err != nil {
			return nil, false, wrapErr(op, err)
		}
		head = append(head, put)
	}
	if initial != nil {
		head = append(head, types.TransactWriteItem{Update: initial})
	}

	rows := make([]recipientsItem, len(chunks))
	size := len(body)
	for k, ch := range chunks {
		rows[k] = recipientsItem{PK: main.PK, SK: recipientsSK(version, k), Count: ch.count, Data: ch.data}
		size += len(ch.data) + 128
	}
	// Normally everything is one transaction. A notification whose recipients do not fit in one
	// (4 MB, 100 items) has its chunks written first: under a version only the main item names,
	// they are invisible until the transaction makes them the notification's.
	prewrite := size > s.txBudget || len(head)+len(rows) > txMaxItems
	items := head
	if prewrite {
		if err := s.writeRecipients(ctx, rows); err != nil {
			return nil, false, wrapErr(op, err)
		}
	} else {
		for _, r := range rows {
			item, err := dynamo.MarshalItem(r)
			if err != nil {
				return nil, false, wrapErr(op, err)
			}
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Notifications), Item: item}})
		}
	}

	for attempt := 0; ; attempt++ {
		err = s.transact(ctx, items)
		if err == nil {
			stored := c
			return &stored, true, nil
		}
		reasons, canceled := cancelReasons(err)
		mainLost := canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed"
		keyLost := canceled && c.IdempotencyKey != "" && reasonCode(reasons, 1) == "ConditionalCheckFailed"
		if mainLost || keyLost {
			if prewrite {
				s.deleteRecipients(context.WithoutCancel(ctx), rows)
			}
			stored, err := s.existingNotification(ctx, c, keyLost)
			if err != nil {
				return nil, false, wrapErr(op, err)
			}
			return stored, false, nil
		}
		if !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			break
		}
		if err := pause(ctx, attempt); err != nil {
			return nil, false, wrapErr(op, err)
		}
	}
	if prewrite {
		s.deleteRecipients(context.WithoutCancel(ctx), rows)
	}
	return nil, false, wrapErr(op, err)
}

// docOmits are the fields of a notification the main item keeps as attributes of their own
// (or in recipient chunks and counter shards), left out of its doc: a write is billed per KB of
// the whole item, and a single send's item stays under one.
var docOmits = []string{"id", "service", "idempotency_key", "status", "stats", "recipients", "recipient_count",
	"created_at", "updated_at"}

// notificationDoc is the main item's doc of n: its JSON without docOmits.
func notificationDoc(n *notify.Notification) (string, error) {
	full, err := json.Marshal(n)
	if err != nil {
		return "", err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(full, &fields); err != nil {
		return "", err
	}
	for _, k := range docOmits {
		delete(fields, k)
	}
	b, err := json.Marshal(fields)
	return string(b), err
}

// existingNotification returns the notification that made c's create lose: the owner of c's key
// when the key claim failed, else the one with c's id.
func (s *Store) existingNotification(ctx context.Context, c notify.Notification, byKey bool) (*notify.Notification, error) {
	id := c.ID
	if byKey {
		var claim keyClaimItem
		err := s.db.Table(s.tables.Notifications).Get(attrPK, keyClaimPK(c.Service, c.IdempotencyKey)).
			Range(attrSK, dynamo.Equal, skKeyClaim).Consistent(true).One(ctx, &claim)
		if err != nil {
			return nil, fmt.Errorf("read idempotency key claim: %w", err)
		}
		id = claim.NotificationID
	}
	stored, err := s.readNotification(ctx, id)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return nil, notify.Wrap(notify.ECONFLICT, err, "a notification with this id or idempotency key exists but could not be read")
	}
	return stored, err
}

// putIfAbsent is a transactional put of item guarded by attribute_not_exists(pk).
func (s *Store) putIfAbsent(table string, item any) (types.TransactWriteItem, error) {
	av, err := dynamo.MarshalItem(item)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                aws.String(table),
		Item:                     av,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	}}, nil
}

func recipientsSK(version string, k int) string {
	return fmt.Sprintf("%s%s#%06d", skRecipients, version, k)
}

func (s *Store) writeRecipients(ctx context.Context, rows []recipientsItem) error {
	if len(rows) == 0 {
		return nil
	}
	items := make([]any, len(rows))
	for i := range rows {
		items[i] = rows[i]
	}
	if _, err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Write().Put(items...).Run(ctx); err != nil {
		return fmt.Errorf("write recipient chunks: %w", err)
	}
	return nil
}

// deleteRecipients removes chunks written ahead of a transaction that did not commit. It is
// best effort: leftovers are unreachable, since no main item names their version.
func (s *Store) deleteRecipients(ctx context.Context, rows []recipientsItem) {
	if len(rows) == 0 {
		return
	}
	keys := make([]dynamo.Keyed, len(rows))
	for i, r := range rows {
		keys[i] = dynamo.Keys{r.PK, r.SK}
	}
	_, _ = s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Write().Delete(keys...).Run(ctx)
}

// recipientChunk is one encoded chunk.
type recipientChunk struct {
	count int
	data  []byte
}

// encodeRecipients splits rs into gzipped JSON chunks of at most recipientsPerChunk recipients
// and recipientChunkBytes bytes.
func encodeRecipients(rs []notify.Recipient) ([]recipientChunk, error) {
	var out []recipientChunk
	var add func(part []notify.Recipient) error
	add = func(part []notify.Recipient) error {
		data, err := gzipJSON(part)
		if err != nil {
			return err
		}
		if len(data) > recipientChunkBytes {
			if len(part) == 1 {
				return notify.Errorf(notify.ETOOLARGE, "a recipient is larger than %d bytes", recipientChunkBytes)
			}
			if err := add(part[:len(part)/2]); err != nil {
				return err
			}
			return add(part[len(part)/2:])
		}
		out = append(out, recipientChunk{count: len(part), data: data})
		return nil
	}
	for _, part := range batchesOf(rs, recipientsPerChunk) {
		if err := add(part); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func gzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, fmt.Errorf("encode recipients: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode recipients: %w", err)
	}
	return buf.Bytes(), nil
}

func gunzipRecipients(data []byte) ([]notify.Recipient, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode recipients: %w", err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("decode recipients: %w", err)
	}
	rs, err := notify.DecodeRecipients(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("decode recipients: %w", err)
	}
	return rs, nil
}

// GetNotification implements notify.NotificationStore.
func (s *Store) GetNotification(ctx context.Context, id string) (*notify.Notification, error) {
	n, err := s.readNotification(ctx, id)
	if err != nil {
		return nil, wrapErr("get notification "+id, err)
	}
	return n, nil
}

// readNotification reads the main item and counter shard 0 in one consistent BatchGetItem, then
// any other shard the main item lists: one round trip and 2 RCU for most notifications, two
// round trips for a campaign spread over more shards. No recipient chunk is read
// (GetRecipients pages those).
func (s *Store) readNotification(ctx context.Context, id string) (*notify.Notification, error) {
	rows, err := s.getNotificationItems(ctx, dynamo.Keys{notificationPK(id), skNotification}, dynamo.Keys{statsPK(id, 0), skStats})
	if err != nil {
		return nil, fmt.Errorf("read notification: %w", err)
	}
	var (
		main   *notificationItem
		shards []dynamo.Item
	)
	for _, row := range rows {
		switch stringAttr(row, attrSK) {
		case skNotification:
			main = new(notificationItem)
			if err := dynamo.UnmarshalItem(row, main); err != nil {
				return nil, fmt.Errorf("decode notification: %w", err)
			}
		case skStats:
			shards = append(shards, row)
		}
	}
	if main == nil {
		return nil, notify.Errorf(notify.ENOTFOUND, "notification not found")
	}
	var more []dynamo.Keyed
	for _, k := range main.Shards {
		if k != 0 {
			more = append(more, dynamo.Keys{statsPK(id, k), skStats})
		}
	}
	if len(more) > 0 {
		rest, err := s.getNotificationItems(ctx, more...)
		if err != nil {
			return nil, fmt.Errorf("read notification counters: %w", err)
		}
		shards = append(shards, rest...)
	}
	var n notify.Notification
	if err := json.Unmarshal([]byte(main.Doc), &n); err != nil {
		return nil, fmt.Errorf("decode notification: %w", err)
	}
	n.ID, n.Service, n.IdempotencyKey = main.ID, main.Service, main.IdempotencyKey
	n.Status = notify.NotificationStatus(main.Status)
	n.CreatedAt, n.UpdatedAt = timeOf(main.CreatedAt), timeOf(main.UpdatedAt)
	n.Recipients, n.RecipientCount = nil, main.RecipientCount
	n.Stats = sumShards(shards)
	n.Stats.ChunksTotal = main.ChunksTotal
	n.Stats.ChunksPrepared += main.ChunksPrepared
	if main.Express != "" {
		n.Express = new(notify.Express)
		if err := json.Unmarshal([]byte(main.Express), n.Express); err != nil {
			return nil, fmt.Errorf("decode express deliveries: %w", err)
		}
		st, err := s.resolveVerdicts(ctx, n.ID, n.Express, n.Status, nil)
		if err != nil {
			return nil, err
		}
		n.Status = st
		n.Stats.AddCounts(n.Express.Counts())
	}
	return &n, nil
}

// getNotificationItems is a consistent BatchGetItem on the notifications table.
func (s *Store) getNotificationItems(ctx context.Context, keys ...dynamo.Keyed) ([]dynamo.Item, error) {
	var rows []dynamo.Item
	err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Get(keys...).Consistent(true).All(ctx, &rows)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, err
	}
	return rows, nil
}

// GetRecipients implements notify.NotificationStore: a consistent GetItem of the main item's
// chunk index, then one consistent Query for the chunks the page overlaps.
func (s *Store) GetRecipients(ctx context.Context, id string, offset, limit int) ([]notify.Recipient, error) {
	op := "get recipients of " + id
	if offset < 0 || limit < 0 {
		return nil, wrapErr(op, notify.Errorf(notify.EINVALID, "offset and limit must not be negative"))
	}
	var main notificationItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).
		Project("rcpt_count", "rcpt_ver", "rcpt_starts", "rcpt").Consistent(true).One(ctx, &main)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	if err != nil {
		return nil, wrapErr(op, err)
	}
	out := []notify.Recipient{}
	if main.Inline != "" { // an express notification's few recipients are in its main item
		rs, err := notify.DecodeRecipients([]byte(main.Inline), nil)
		if err != nil {
			return nil, wrapErr(op, fmt.Errorf("decode recipients: %w", err))
		}
		lo, hi := min(offset, len(rs)), min(offset+limit, len(rs))
		return append(out, rs[lo:hi]...), nil
	}
	end := min(offset+limit, main.RecipientCount)
	if offset >= end || len(main.RecipientStarts) == 0 {
		return out, nil
	}
	// The chunks holding offset and end-1: the last ones starting at or before each.
	first := sort.SearchInts(main.RecipientStarts, offset+1) - 1
	last := sort.SearchInts(main.RecipientStarts, end) - 1
	var rows []recipientsItem
	err = s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).
		Range(attrSK, dynamo.Between, recipientsSK(main.RecipientsVersion, first), recipientsSK(main.RecipientsVersion, last)).
		Consistent(true).All(ctx, &rows)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	if len(rows) != last-first+1 {
		return nil, wrapErr(op, fmt.Errorf("found %d of recipient chunks %d..%d", len(rows), first, last))
	}
	for k, r := range rows {
		rs, err := gunzipRecipients(r.Data)
		if err != nil {
			return nil, wrapErr(op, err)
		}
		base := main.RecipientStarts[first+k]
		lo, hi := max(offset-base, 0), min(end-base, len(rs))
		if lo < hi {
			out = append(out, rs[lo:hi]...)
		}
	}
	return out, nil
}

func stringAttr(item dynamo.Item, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// Counter attribute names on a stats shard: <outcome>_<channel>, plus chunks_prepared.
var counterPrefixes = [...]string{"total_", "sent_", "failed_", "skipped_"}

// counterFields returns the four counters of cs in counterPrefixes' order.
func counterFields(cs *notify.ChannelStats) [4]*int {
	return [4]*int{&cs.Total, &cs.Sent, &cs.Failed, &cs.Skipped}
}

// sumShards adds up the counter shards of one notification.
func sumShards(shards []dynamo.Item) notify.Stats {
	var st notify.Stats
	for _, sh := range shards {
		for name, v := range sh {
			num, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			k, err := strconv.Atoi(num.Value)
			if err != nil {
				continue
			}
			if name == attrChunksPrepared {
				st.ChunksPrepared += k
				continue
			}
			for i, p := range counterPrefixes {
				ch, ok := strings.CutPrefix(name, p)
				if !ok {
					continue
				}
				if st.Channels == nil {
					st.Channels = map[notify.Channel]notify.ChannelStats{}
				}
				cs := st.Channels[notify.Channel(ch)]
				*counterFields(&cs)[i] += k
				st.Channels[notify.Channel(ch)] = cs
				break
			}
		}
	}
	st.SplitReasons()
	return st
}

// statsUpdate is an ADD of delta (and chunks prepared chunks) to counter shard `shard` of
// notification id, or nil when there is nothing to add. ADD creates the shard on first use.
func (s *Store) statsUpdate(id string, shard int, delta map[notify.Channel]notify.ChannelStats, chunks int) *types.Update {
	e := newExpr()
	var add []string
	for ch, cs := range delta {
		for i, f := range counterFields(&cs) {
			if *f != 0 {
				add = append(add, e.n(counterPrefixes[i]+string(ch))+" "+e.i(int64(*f)))
			}
		}
	}
	if chunks != 0 {
		add = append(add, e.n(attrChunksPrepared)+" "+e.i(int64(chunks)))
	}
	if len(add) == 0 {
		return nil
	}
	return &types.Update{
		TableName:                 aws.String(s.tables.Notifications),
		Key:                       key2(statsPK(id, shard), skStats),
		UpdateExpression:          aws.String(updateExpr(nil, add, nil)),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	}
}

// registerShard adds shard to the main item's set of counter shards. It goes into the first
// transaction that writes to a shard the caller did not see registered, so readers always know
// every shard holding counts; ADD to a set is idempotent, so racing writers do no harm.
func (s *Store) registerShard(id string, shard int) *types.Update {
	e := newExpr()
	return &types.Update{
		TableName:                 aws.String(s.tables.Notifications),
		Key:                       key2(notificationPK(id), skNotification),
		UpdateExpression:          aws.String(updateExpr(nil, []string{e.n("shards") + " " + e.v(&types.AttributeValueMemberNS{Value: []string{strconv.Itoa(shard)}})}, nil)),
		ConditionExpression:       aws.String("attribute_exists(" + e.n(attrPK) + ")"),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	}
}

// SetNotificationStatus implements notify.NotificationStore: one conditional UpdateItem whose
// ALL_OLD on failure tells a missing notification from one in another status.
func (s *Store) SetNotificationStatus(ctx context.Context, id string, to notify.NotificationStatus, from ...notify.NotificationStatus) error {
	op := fmt.Sprintf("set notification %s status %s", id, to)
	e := newExpr()
	cond := "attribute_exists(" + e.n(attrPK) + ")"
	if len(from) > 0 {
		vals := make([]string, len(from))
		for i, f := range from {
			vals[i] = e.s(string(f))
		}
		cond += " AND " + e.n("status") + " IN (" + strings.Join(vals, ", ") + ")"
	}
	set := []string{e.n("status") + " = " + e.s(string(to)), e.n("updated_at") + " = " + e.i(nanos(s.now()))}
	_, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Notifications),
		Key:                                 key2(notificationPK(id), skNotification),
		UpdateExpression:                    aws.String(updateExpr(set, nil, nil)),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, failed := condFailedItem(err); failed {
		if old == nil {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
		}
		return wrapErr(op, notify.Errorf(notify.ECONFLICT, "notification is %s, not %v", stringAttr(old, "status"), from))
	}
	return wrapErr(op, err)
}

// SetChunksTotal implements notify.NotificationStore. Setting a value overwrites: the prepare
// stage is the only writer and always computes the same split for a notification.
func (s *Store) SetChunksTotal(ctx context.Context, id string, chunks int) error {
	op := "set chunks total of " + id
	e := newExpr()
	_, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.Notifications),
		Key:                       key2(notificationPK(id), skNotification),
		UpdateExpression:          aws.String(updateExpr([]string{e.n("chunks_total") + " = " + e.i(int64(chunks))}, nil, nil)),
		ConditionExpression:       aws.String("attribute_exists(" + e.n(attrPK) + ")"),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	})
	if _, failed := condFailedItem(err); failed {
		return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
	}
	return wrapErr(op, err)
}
