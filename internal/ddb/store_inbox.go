package ddb

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// inboxItem is one inbox entry: pk user_id, sk id. ord (and unread, present only while the item
// is unread) is "<created_at as 20 digits>#<id>", the sort key of the newest and unread local
// indexes, so both walk the inbox newest first with the id as tie-break.
type inboxItem struct {
	UserID    string            `dynamo:"user_id"`
	ID        string            `dynamo:"id"`
	Ord       string            `dynamo:"ord"`
	Unread    string            `dynamo:"unread,omitempty"`
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

// PutInboxItems implements notify.InboxStore: one PutItem per item guarded by
// attribute_not_exists, up to 16 at once, so an existing item (read state included) stays as
// it is when a prepare step is redelivered.
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
		if it.ReadAt == nil {
			r.Unread = r.Ord
		}
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

// ListInbox implements notify.InboxStore: a consistent Query of the newest index, descending,
// filtered on expiry. The cursor is base64url of the last item's ord, from which the
// LastEvaluatedKey is rebuilt (with the caller's user id, so a cursor never crosses inboxes).
func (s *Store) ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) ([]notify.InboxItem, string, error) {
	op := "list inbox of " + userID
	limit = clampLimit(limit)
	var start dynamo.PagingKey
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		ord := string(b)
		_, id, ok := strings.Cut(ord, "#")
		if err != nil || !ok || id == "" {
			return nil, "", wrapErr(op, notify.FieldError("cursor", "malformed cursor"))
		}
		start = dynamo.PagingKey{attrInboxUser: strAttr(userID), attrInboxID: strAttr(id), attrInboxOrder: strAttr(ord)}
	}
	var rows []inboxItem
	// Each request reads at most what is still wanted (plus one to learn whether a next page
	// exists), so an inbox of thousands costs no more to page than a small one; expired items
	// make a request come back short, and the walk goes on from its LastEvaluatedKey.
	for {
		want := limit + 1 - len(rows)
		q := s.inbox().Get(attrInboxUser, userID).Index(indexNewest).Order(dynamo.Descending).Consistent(true).
			Filter(notExpired, attrInboxExpiry, attrInboxExpiry, nanos(now)).SearchLimit(max(want, 10))
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
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = base64.RawURLEncoding.EncodeToString([]byte(rows[limit-1].Ord))
	}
	items := make([]notify.InboxItem, len(rows))
	for i, r := range rows {
		items[i] = r.item()
	}
	return items, next, nil
}

// UnreadCount implements notify.InboxStore: a Select COUNT Query of the sparse unread index
// (only unread items have the unread attribute), filtered on expiry. It reads every unread item
// of the user, about 0.5 RCU per 4 KB of index entries (a few dozen bytes each): cheap for a
// normal inbox, proportional to the backlog for one with thousands unread.
func (s *Store) UnreadCount(ctx context.Context, userID string, now time.Time) (int, error) {
	n, err := s.inbox().Get(attrInboxUser, userID).Index(indexUnread).Consistent(true).
		Filter(notExpired, attrInboxExpiry, attrInboxExpiry, nanos(now)).Count(ctx)
	if err != nil {
		return 0, wrapErr("unread count of "+userID, err)
	}
	return n, nil
}

// markReadInput sets read_at and drops the item from the unread index, if it exists and is
// unread.
func (s *Store) markReadInput(userID, id string, at time.Time) *dynamodb.UpdateItemInput {
	e := newExpr()
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Inbox),
		Key:                                 map[string]types.AttributeValue{attrInboxUser: strAttr(userID), attrInboxID: strAttr(id)},
		UpdateExpression:                    aws.String(updateExpr([]string{e.n("read_at") + " = " + e.i(nanos(at))}, nil, []string{e.n(attrInboxUnread)})),
		ConditionExpression:                 aws.String("attribute_exists(" + e.n(attrInboxUser) + ") AND attribute_not_exists(" + e.n("read_at") + ")"),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// MarkRead implements notify.InboxStore. An item already read keeps its first ReadAt.
func (s *Store) MarkRead(ctx context.Context, userID, id string, at time.Time) error {
	op := fmt.Sprintf("mark inbox item %s read", id)
	_, err := s.updateItem(ctx, s.markReadInput(userID, id, s.nowOr(at)))
	if old, failed := condFailedItem(err); failed {
		if old == nil {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "inbox item not found"))
		}
		return nil // already read
	}
	return wrapErr(op, err)
}

// MarkAllRead implements notify.InboxStore. It pages through the sparse unread index (expired
// items are invisible, so neither marked nor counted), then marks each item read with a
// conditional update, up to 16 at once; an item marked by someone else meanwhile is not counted.
func (s *Store) MarkAllRead(ctx context.Context, userID string, at time.Time) (int, error) {
	op := "mark all read of " + userID
	at = s.nowOr(at)
	var keys []struct {
		ID string `dynamo:"id"`
	}
	err := s.inbox().Get(attrInboxUser, userID).Index(indexUnread).Consistent(true).
		Filter(notExpired, attrInboxExpiry, attrInboxExpiry, nanos(at)).Project(attrInboxID).All(ctx, &keys)
	if err != nil {
		return 0, wrapErr(op, err)
	}
	var changed atomic.Int64
	err = forEach(ctx, len(keys), func(ctx context.Context, i int) error {
		_, err := s.updateItem(ctx, s.markReadInput(userID, keys[i].ID, at))
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

// DeleteInboxItem implements notify.InboxStore.
func (s *Store) DeleteInboxItem(ctx context.Context, userID, id string) error {
	op := fmt.Sprintf("delete inbox item %s", id)
	err := s.inbox().Delete(attrInboxUser, userID).Range(attrInboxID, id).If("attribute_exists($)", attrInboxUser).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "inbox item not found"))
	}
	return wrapErr(op, err)
}
