package ddb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// inboxItem is one inbox entry: pk user_id, sk ord = "<created_at as 20 digits>#<id>", so the
// table itself walks an inbox newest first with the id as tie-break, and an item costs one write
// unit (no index to keep). The id is an attribute; finding an item by id is inboxKey.
type inboxItem struct {
	UserID    string            `dynamo:"user_id"`
	Ord       string            `dynamo:"sk"`
	ID        string            `dynamo:"id"`
	CreatedAt int64             `dynamo:"created_at"`
	ReadAt    *int64            `dynamo:"read_at,omitempty"`
	ExpiresAt *int64            `dynamo:"expires_at,omitempty"` // exact; reads filter on it
	TTL       *int64            `dynamo:"ttl,omitempty"`        // DynamoDB TTL (seconds), deletes lazily
	Service   string            `dynamo:"service,omitempty"`
	Category  string            `dynamo:"category,omitempty"`
	Title     string            `dynamo:"title,omitempty"`
	Body      string            `dynamo:"body,omitempty"`
	Data      map[string]string `dynamo:"data,omitempty"`
	Link      string            `dynamo:"link,omitempty"`
	ImageURL  string            `dynamo:"image_url,omitempty"`
}

// inboxOrd orders by creation time, then id; the sign bit is flipped so that times before 1970
// sort first too.
func inboxOrd(createdAt time.Time, id string) string {
	return fmt.Sprintf("%020d#%s", uint64(createdAt.UnixNano())^(1<<63), id)
}

func (it inboxItem) item() notify.InboxItem {
	return notify.InboxItem{UserID: it.UserID, ID: it.ID, Service: it.Service, Category: notify.Category(it.Category),
		Title: it.Title, Body: it.Body, Data: it.Data, Link: it.Link, ImageURL: it.ImageURL,
		CreatedAt: timeOf(it.CreatedAt), ReadAt: timePtr(it.ReadAt), ExpiresAt: timePtr(it.ExpiresAt)}
}

func (s *Store) inbox() dynamo.Table { return s.db.Table(s.tables.Inbox) }

// notExpired is the filter every inbox read applies: TTL deletion is lazy (up to days late), so
// an item past its ExpiresAt may still be stored.
const notExpired = "(attribute_not_exists($) OR $ > ?)"

// ownItems is the key condition that keeps a query to the user's own items: ords start with a
// digit, broadcast markers ("B#<id>") sort after them.
const ownItemsBelow = ":"

// PutInboxItems implements notify.InboxStore: one PutItem per item guarded by
// attribute_not_exists, up to 16 at once, so an existing item (read state included) stays as
// it is when a prepare step is redelivered. A repeated put carries the item's CreatedAt (its
// notification's), which is part of its key.
func (s *Store) PutInboxItems(ctx context.Context, items []notify.InboxItem) error {
	rows := make([]inboxItem, len(items))
	for i, it := range items {
		if it.UserID == "" || it.ID == "" {
			return wrapErr("put inbox items", notify.FieldError(fmt.Sprintf("items[%d]", i), "user id and id are required"))
		}
		created := s.nowOr(it.CreatedAt)
		r := inboxItem{UserID: it.UserID, ID: it.ID, Ord: inboxOrd(created, it.ID), CreatedAt: nanos(created),
			ReadAt: nanosPtr(it.ReadAt), ExpiresAt: nanosPtr(it.ExpiresAt), Service: it.Service,
			Category: string(it.Category), Title: it.Title, Body: it.Body, Data: it.Data, Link: it.Link, ImageURL: it.ImageURL}
		if it.ExpiresAt != nil {
			ttl := ttlOf(*it.ExpiresAt)
			r.TTL = &ttl
		}
		rows[i] = r
	}
	err := forEach(ctx, len(rows), func(ctx context.Context, i int) error {
		err := s.inbox().Put(rows[i]).If("attribute_not_exists($)", attrInboxUser).Run(ctx)
		if dynamo.IsCondCheckFailed(err) {
			return nil
		}
		return err
	})
	return wrapErr("put inbox items", err)
}

// ownQuery is a consistent Query of userID's own items (not their broadcast markers) that are
// unexpired at now, newest first.
func (s *Store) ownQuery(userID string, now time.Time) *dynamo.Query {
	return s.inbox().Get(attrInboxUser, userID).Range(attrInboxOrder, dynamo.Less, ownItemsBelow).
		Order(dynamo.Descending).Consistent(true).Filter(notExpired, attrInboxExpiry, attrInboxExpiry, nanos(now))
}

// ListInbox implements notify.InboxStore: a consistent Query of the table, descending, filtered
// on expiry. The cursor is base64url of the last item's ord, which is also the start key (with
// the caller's user id, so a cursor never crosses inboxes).
func (s *Store) ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) ([]notify.InboxItem, string, error) {
	op := "list inbox of " + userID
	limit = notify.PageLimit(limit)
	var (
		start     dynamo.PagingKey
		cursorOrd string
	)
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		cursorOrd = string(b)
		_, id, ok := strings.Cut(cursorOrd, "#")
		if err != nil || !ok || id == "" || cursorOrd >= ownItemsBelow {
			return nil, "", wrapErr(op, notify.FieldError("cursor", "malformed cursor"))
		}
		// The last item of the previous page may have been a broadcast, which has no item in
		// the table: the start key is only a position, so that works the same.
		start = dynamo.PagingKey{attrInboxUser: strAttr(userID), attrInboxOrder: strAttr(cursorOrd)}
	}
	var rows []inboxItem
	// Each request reads at most what is still wanted (plus one to learn whether a next page
	// exists), so an inbox of thousands costs no more to page than a small one; expired items
	// make a request come back short, and the walk goes on from its LastEvaluatedKey.
	for {
		want := limit + 1 - len(rows)
		q := s.ownQuery(userID, now).SearchLimit(max(want, 10))
		if start != nil {
			q = q.StartFrom(start)
		}
		var page []inboxItem
		lek, err := q.AllWithLastEvaluatedKey(ctx, &page)
		if err != nil {
			return nil, "", wrapErr(op, err)
		}
		rows = append(rows, page...)
		if len(rows) > limit || lek == nil {
			break
		}
		start = lek
	}
	own := make([]notify.InboxItem, len(rows))
	for i, r := range rows {
		own[i] = r.item()
	}
	bs, err := s.visibleBroadcasts(ctx, userID, now)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	var after []notify.InboxItem
	for _, b := range bs {
		if cursor == "" || inboxOrd(b.CreatedAt, b.ID) < cursorOrd {
			after = append(after, b)
		}
	}
	items, more := notify.MergeInbox(own, after, limit)
	next := ""
	if more {
		last := items[limit-1]
		next = base64.RawURLEncoding.EncodeToString([]byte(inboxOrd(last.CreatedAt, last.ID)))
	}
	return items, next, nil
}

// unreadFilter keeps unread items among the unexpired ones.
const unreadFilter = "attribute_not_exists($)"

// UnreadCount implements notify.InboxStore: a Select COUNT Query of the user's own unexpired
// unread items. There is no index of unread items (an index would bill every item written
// twice more, docs/design.md §10), so it reads the user's whole inbox, consistently: 1 RCU per
// 4 KB — 5 RCU for 40 items of 500 bytes — and inbox items expire (30 days by default).
func (s *Store) UnreadCount(ctx context.Context, userID string, now time.Time) (int, error) {
	n, err := s.ownQuery(userID, now).Filter(unreadFilter, "read_at").Count(ctx)
	if err != nil {
		return 0, wrapErr("unread count of "+userID, err)
	}
	bs, err := s.visibleBroadcasts(ctx, userID, now)
	if err != nil {
		return 0, wrapErr("unread count of "+userID, err)
	}
	for _, b := range bs {
		if b.ReadAt == nil {
			n++
		}
	}
	return n, nil
}

// inboxKey finds the ord of userID's own item id: a descending Query filtered on the id, in
// requests of growing size (16, 64, 256, … items), so the recent items people open cost one
// small request and an old one at most a walk of the inbox. "" if there is none.
func (s *Store) inboxKey(ctx context.Context, userID, id string) (string, error) {
	var start dynamo.PagingKey
	for size := 16; ; size = min(size*4, 1024) {
		q := s.inbox().Get(attrInboxUser, userID).Range(attrInboxOrder, dynamo.Less, ownItemsBelow).
			Order(dynamo.Descending).Consistent(true).Filter("$ = ?", attrInboxID, id).
			Project(attrInboxOrder).SearchLimit(size)
		if start != nil {
			q = q.StartFrom(start)
		}
		var found []struct {
			Ord string `dynamo:"sk"`
		}
		lek, err := q.AllWithLastEvaluatedKey(ctx, &found)
		if err != nil {
			return "", err
		}
		if len(found) > 0 {
			return found[0].Ord, nil
		}
		if lek == nil {
			return "", nil
		}
		start = lek
	}
}

// markReadInput sets read_at on the item at ord, if it exists and is unread.
func (s *Store) markReadInput(userID, ord string, at time.Time) *dynamodb.UpdateItemInput {
	e := newExpr()
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Inbox),
		Key:                                 map[string]types.AttributeValue{attrInboxUser: strAttr(userID), attrInboxOrder: strAttr(ord)},
		UpdateExpression:                    aws.String(updateExpr([]string{e.n("read_at") + " = " + e.i(nanos(at))}, nil, nil)),
		ConditionExpression:                 aws.String("attribute_exists(" + e.n(attrInboxUser) + ") AND attribute_not_exists(" + e.n("read_at") + ")"),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// MarkRead implements notify.InboxStore. An item already read keeps its first ReadAt; an id
// with no own item is the user's broadcast, if one is visible.
func (s *Store) MarkRead(ctx context.Context, userID, id string, at time.Time) error {
	op := fmt.Sprintf("mark inbox item %s read", id)
	at = s.nowOr(at)
	ord, err := s.inboxKey(ctx, userID, id)
	if err != nil {
		return wrapErr(op, err)
	}
	if ord == "" {
		return wrapErr(op, s.markBroadcast(ctx, userID, id, at, false))
	}
	_, err = s.updateItem(ctx, s.markReadInput(userID, ord, at))
	if old, failed := condFailedItem(err); failed {
		if old == nil {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "inbox item not found")) // deleted meanwhile
		}
		return nil // already read
	}
	return wrapErr(op, err)
}

// MarkAllRead implements notify.InboxStore. It reads the user's unexpired unread items (expired
// ones are invisible, so neither marked nor counted), then marks each read with a conditional
// update, up to 16 at once; an item marked by someone else meanwhile is not counted.
func (s *Store) MarkAllRead(ctx context.Context, userID string, at time.Time) (int, error) {
	op := "mark all read of " + userID
	at = s.nowOr(at)
	var keys []struct {
		Ord string `dynamo:"sk"`
	}
	err := s.ownQuery(userID, at).Filter(unreadFilter, "read_at").Project(attrInboxOrder).All(ctx, &keys)
	if err != nil {
		return 0, wrapErr(op, err)
	}
	var changed atomic.Int64
	err = forEach(ctx, len(keys), func(ctx context.Context, i int) error {
		_, err := s.updateItem(ctx, s.markReadInput(userID, keys[i].Ord, at))
		if _, failed := condFailedItem(err); failed {
			return nil
		}
		if err == nil {
			changed.Add(1)
		}
		return err
	})
	if err != nil {
		return int(changed.Load()), wrapErr(op, err)
	}
	bs, err := s.visibleBroadcasts(ctx, userID, at)
	if err != nil {
		return int(changed.Load()), wrapErr(op, err)
	}
	var unread []notify.InboxItem
	for _, b := range bs {
		if b.ReadAt == nil {
			unread = append(unread, b)
		}
	}
	err = forEach(ctx, len(unread), func(ctx context.Context, i int) error {
		// Counted only if this call wrote the read mark (not a concurrent MarkRead).
		_, err := s.updateItem(ctx, s.markInput(userID, unread[i], at, false))
		if _, failed := condFailedItem(err); failed {
			return nil
		}
		if err == nil {
			changed.Add(1)
		}
		return err
	})
	if err != nil {
		return int(changed.Load()), wrapErr(op, err)
	}
	return int(changed.Load()), nil
}

// DeleteInboxItem implements notify.InboxStore: an own item is deleted; a broadcast gets the
// user's deleted marker.
func (s *Store) DeleteInboxItem(ctx context.Context, userID, id string) error {
	op := fmt.Sprintf("delete inbox item %s", id)
	ord, err := s.inboxKey(ctx, userID, id)
	if err != nil {
		return wrapErr(op, err)
	}
	if ord == "" {
		return wrapErr(op, s.markBroadcast(ctx, userID, id, s.now(), true))
	}
	err = s.inbox().Delete(attrInboxUser, userID).Range(attrInboxOrder, ord).If("attribute_exists($)", attrInboxUser).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "inbox item not found")) // deleted meanwhile
	}
	return wrapErr(op, err)
}

// Broadcast items (fan-out on read; see the package doc). In the notifications table:
//
//	pk B#<id>                sk B                      the broadcast's claim: what makes PutBroadcast
//	                                                   idempotent by id
//	pk BA#<app>#<shard>      sk <expiry, 20 digits>#<id> a copy of the broadcast (doc) for the
//	                                                   readers of one shard of the app
//
// and in the inbox table, beside a user's own items, the user's marker of a broadcast:
//
//	user_id <user>  sk B#<id>  read_at, deleted, ttl (after every ord: a query of own items
//	                           stops before the markers)
//
// The expiry leads the index sort key, so a read asks only for unexpired broadcasts (sk >
// now) and never pays for expired ones TTL has not deleted yet. Every inbox read of an app's
// users reads that app's broadcast partition: broadcastShards copies spread those reads (a user
// always reads shard hash(user) mod broadcastShards) so a popular app's inbox traffic is not
// held to one partition's 3,000 RCU.
const (
	skBroadcast     = "B"
	broadcastShards = 8
	// broadcastMaxApps keeps the claim and every app's copies in one transaction (≤ 100 items).
	broadcastMaxApps = (txMaxItems - 1) / broadcastShards
	markerPfx        = "B#"
)

func broadcastPK(id string) string { return "B#" + id }

func broadcastIndexPK(app string, shard int) string { return fmt.Sprintf("BA#%s#%02d", app, shard) }

// broadcastExpirySK orders by expiry (sign bit flipped, as inboxOrd); never expiring sorts last.
func broadcastExpirySK(expires *time.Time, id string) string {
	return broadcastExpiryKey(expires) + "#" + id
}

func broadcastExpiryKey(expires *time.Time) string {
	if expires == nil {
		return fmt.Sprintf("%020d", ^uint64(0))
	}
	return fmt.Sprintf("%020d", uint64(expires.UnixNano())^(1<<63))
}

// broadcastItem is the claim and each index copy.
type broadcastItem struct {
	PK        string `dynamo:"pk"`
	SK        string `dynamo:"sk"`
	ID        string `dynamo:"id"`
	CreatedAt int64  `dynamo:"created_at"`
	ExpiresAt *int64 `dynamo:"expires_at,omitempty"`
	TTL       *int64 `dynamo:"ttl,omitempty"`
	Doc       []byte `dynamo:"doc"` // notify.Broadcast as JSON; created_at and expires_at win
	// WithdrawnAt is set on the claim item only (WithdrawBroadcast): reads check it there.
	WithdrawnAt *int64 `dynamo:"withdrawn_at,omitempty"`
}

// markerItem is a user's read or deleted marker of a broadcast.
type markerItem struct {
	UserID  string `dynamo:"user_id"`
	SK      string `dynamo:"sk"`
	ID      string `dynamo:"id"` // an own item's (a marker has none)
	ReadAt  *int64 `dynamo:"read_at,omitempty"`
	Deleted bool   `dynamo:"deleted,omitempty"`
}

// PutBroadcast implements notify.InboxStore: one TransactWriteItems of the claim (guarded by
// attribute_not_exists) and broadcastShards copies per target app — 1 + 8·apps items, whatever
// the audience. A claim that exists cancels the whole transaction, so a stored broadcast (and
// every marker of it) stays as it is. ETOOLARGE for more than broadcastMaxApps apps.
func (s *Store) PutBroadcast(ctx context.Context, b notify.Broadcast) error {
	if err := b.Validate(); err != nil {
		return wrapErr("put broadcast", err)
	}
	op := "put broadcast " + b.ID
	apps := b.Apps()
	if len(apps) > broadcastMaxApps {
		return wrapErr(op, notify.Errorf(notify.ETOOLARGE, "%d target apps; at most %d", len(apps), broadcastMaxApps))
	}
	b.CreatedAt = s.nowOr(b.CreatedAt)
	doc, err := json.Marshal(&b)
	if err != nil {
		return wrapErr(op, fmt.Errorf("encode: %w", err))
	}
	base := broadcastItem{ID: b.ID, CreatedAt: nanos(b.CreatedAt), ExpiresAt: nanosPtr(b.ExpiresAt), Doc: doc}
	if b.ExpiresAt != nil {
		ttl := ttlOf(*b.ExpiresAt)
		base.TTL = &ttl
	}
	claim := base
	claim.PK, claim.SK = broadcastPK(b.ID), skBroadcast
	claimPut, err := s.putIfAbsent(s.tables.Notifications, claim)
	if err != nil {
		return wrapErr(op, err)
	}
	items := []types.TransactWriteItem{claimPut}
	for _, app := range apps {
		for shard := range broadcastShards {
			c := base
			c.PK, c.SK = broadcastIndexPK(app, shard), broadcastExpirySK(b.ExpiresAt, b.ID)
			av, err := dynamo.MarshalItem(c)
			if err != nil {
				return wrapErr(op, err)
			}
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Notifications), Item: av}})
		}
	}
	for attempt := 0; ; attempt++ {
		err = s.transact(ctx, items)
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			return nil // stored before: left as it is
		}
		if err == nil || !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			return wrapErr(op, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return wrapErr(op, err)
		}
	}
}

// visibleBroadcasts returns the broadcasts userID sees at now as inbox items (ReadAt from their
// marker), in no particular order. Its reads, each only when the one before found something: a
// consistent Query of the user's devices; per app of those devices, an eventually consistent
// Query of the user's shard of the app's unexpired broadcasts (each broadcast is a few hundred
// bytes: one request, 0.5 RCU per 4 KB); a GetItem of the preferences; one consistent
// BatchGetItem of the user's marker and own item of every candidate (1 RCU each). A user
// without devices costs one Query; one with a handful of broadcasts about 3 + 2·n RCU.
// Eventually consistent: a broadcast can take a moment (typically under a second) to appear,
// which is far less than its campaign takes to send.
func (s *Store) visibleBroadcasts(ctx context.Context, userID string, now time.Time) ([]notify.InboxItem, error) {
	devices, err := s.ListDevices(ctx, []string{userID})
	if err != nil {
		return nil, err
	}
	ds := devices[userID]
	apps := notify.AppsOf(ds)
	if len(apps) == 0 {
		return nil, nil
	}
	shard := shardOf(userID, broadcastShards)
	found := make([][]broadcastItem, len(apps))
	err = forEach(ctx, len(apps), func(ctx context.Context, i int) error {
		err := s.db.Table(s.tables.Notifications).Get(attrPK, broadcastIndexPK(apps[i], shard)).
			Range(attrSK, dynamo.Greater, broadcastExpiryKey(&now)+"$").All(ctx, &found[i])
		if err != nil {
			return fmt.Errorf("query broadcasts of %s: %w", apps[i], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var bs []notify.Broadcast
	for _, items := range found {
		for _, it := range items {
			if seen[it.ID] {
				continue // targets two of the user's apps
			}
			seen[it.ID] = true
			var b notify.Broadcast
			if err := json.Unmarshal(it.Doc, &b); err != nil {
				return nil, fmt.Errorf("decode broadcast %s: %w", it.ID, err)
			}
			b.CreatedAt, b.ExpiresAt = timeOf(it.CreatedAt), timePtr(it.ExpiresAt)
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return nil, nil
	}
	prefs, err := s.GetPreferences(ctx, []string{userID})
	if err != nil {
		return nil, err
	}
	bs = slices.DeleteFunc(bs, func(b notify.Broadcast) bool { return !b.Reaches(ds, prefs[userID]) })
	if len(bs) == 0 {
		return nil, nil
	}
	// Withdrawn ones (canceled campaigns): the claim item says so.
	claimKeys := make([]dynamo.Keyed, len(bs))
	for i, b := range bs {
		claimKeys[i] = dynamo.Keys{broadcastPK(b.ID), skBroadcast}
	}
	var claims []broadcastItem
	err = s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Get(claimKeys...).Project("id", "withdrawn_at").All(ctx, &claims)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, fmt.Errorf("read broadcast claims: %w", err)
	}
	withdrawn := map[string]bool{}
	for _, c := range claims {
		withdrawn[c.ID] = c.WithdrawnAt != nil && *c.WithdrawnAt <= nanos(now)
	}
	bs = slices.DeleteFunc(bs, func(b notify.Broadcast) bool { return withdrawn[b.ID] })
	if len(bs) == 0 {
		return nil, nil
	}
	// The user's marker of each candidate, and any own item of the same notification: an own
	// item (the campaign also reached the user through a user list) shadows the broadcast. Both
	// carry the campaign notification's CreatedAt, so the own item's key is known.
	keys := make([]dynamo.Keyed, 0, 2*len(bs))
	for _, b := range bs {
		keys = append(keys, dynamo.Keys{userID, markerPfx + b.ID}, dynamo.Keys{userID, inboxOrd(b.CreatedAt, b.ID)})
	}
	var got []markerItem
	err = s.inbox().Batch(attrInboxUser, attrInboxOrder).Get(keys...).Consistent(true).Project(attrInboxOrder, "id", "read_at", "deleted").All(ctx, &got)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, fmt.Errorf("read inbox markers: %w", err)
	}
	marks := make(map[string]markerItem, len(got))
	hidden := map[string]bool{}
	for _, m := range got {
		if id, ok := strings.CutPrefix(m.SK, markerPfx); ok {
			marks[id] = m
			hidden[id] = hidden[id] || m.Deleted
		} else {
			hidden[m.ID] = true
		}
	}
	out := make([]notify.InboxItem, 0, len(bs))
	for _, b := range bs {
		if !hidden[b.ID] {
			out = append(out, b.Item(userID, timePtr(marks[b.ID].ReadAt)))
		}
	}
	return out, nil
}

// markInput writes userID's marker of broadcast b — read at `at` unless read already, or
// deleted — unless the user deleted it already. The marker expires with the broadcast.
func (s *Store) markInput(userID string, b notify.InboxItem, at time.Time, deleted bool) *dynamodb.UpdateItemInput {
	e := newExpr()
	cond := "attribute_not_exists(" + e.n("deleted") + ")"
	var set []string
	if deleted {
		set = append(set, e.n("deleted")+" = "+e.v(&types.AttributeValueMemberBOOL{Value: true}))
	} else {
		set = append(set, e.n("read_at")+" = "+e.i(nanos(at)))
		cond += " AND attribute_not_exists(" + e.n("read_at") + ")"
	}
	if b.ExpiresAt != nil {
		set = append(set, e.n(attrTTL)+" = "+e.i(ttlOf(*b.ExpiresAt)))
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Inbox),
		Key:                                 map[string]types.AttributeValue{attrInboxUser: strAttr(userID), attrInboxOrder: strAttr(markerPfx + b.ID)},
		UpdateExpression:                    aws.String(updateExpr(set, nil, nil)),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// markBroadcast writes userID's marker of broadcast id if the broadcast is visible to them at
// `at`; ENOTFOUND if it is not, or if they deleted it meanwhile. A read marker keeps the first
// read_at.
func (s *Store) markBroadcast(ctx context.Context, userID, id string, at time.Time, deleted bool) error {
	bs, err := s.visibleBroadcasts(ctx, userID, at)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(bs, func(it notify.InboxItem) bool { return it.ID == id })
	if i < 0 {
		return notify.Errorf(notify.ENOTFOUND, "inbox item not found")
	}
	if !deleted && bs[i].ReadAt != nil {
		return nil
	}
	_, err = s.updateItem(ctx, s.markInput(userID, bs[i], at, deleted))
	if old, failed := condFailedItem(err); failed {
		var m markerItem
		if old != nil {
			if err := dynamo.UnmarshalItem(old, &m); err != nil {
				return err
			}
		}
		if m.Deleted || deleted {
			return notify.Errorf(notify.ENOTFOUND, "inbox item not found")
		}
		return nil // read meanwhile: the first read_at stays
	}
	return err
}

// WithdrawBroadcast implements notify.InboxStore: withdrawn_at on the broadcast's claim item,
// which every read checks for its candidates (one BatchGetItem), so the per-app copies stay as
// they are and expire by TTL.
func (s *Store) WithdrawBroadcast(ctx context.Context, id string, at time.Time) error {
	e := newExpr()
	_, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.tables.Notifications),
		Key:              key2(broadcastPK(id), skBroadcast),
		UpdateExpression: aws.String(updateExpr([]string{e.n("withdrawn_at") + " = " + e.i(nanos(at))}, nil, nil)),
		ConditionExpression: aws.String("attribute_exists(" + e.n(attrPK) + ") AND (attribute_not_exists(" + e.n("withdrawn_at") +
			") OR " + e.n("withdrawn_at") + " > " + e.i(nanos(at)) + ")"),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // unknown, or withdrawn already
	}
	if err != nil {
		return wrapErr("withdraw broadcast "+id, err)
	}
	return nil
}
