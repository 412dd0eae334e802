package ddb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

var _ notify.NotificationLister = (*Store)(nil)

// ListNotifications implements notify.NotificationLister with a Scan of the notifications table
// filtered to main items matching the filter (status, service, idempotency key and created_at
// in the filter expression; the category, kept in the item's document, checked here), at most
// scanPagesPerCall requests per call, like ListScheduledNotifications and with its cursor. It is
// an operator's listing (GET /v1/admin/notifications), rare and paged: no index is kept for it
// on every write. Entries come in scan order, not by time.
func (s *Store) ListNotifications(ctx context.Context, f notify.NotificationFilter, cursor string, limit int) ([]notify.NotificationSummary, string, error) {
	const op = "list notifications"
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	if f.User != "" {
		return s.listByUser(ctx, f, cursor, limit)
	}
	start, err := decodeScanCursor(cursor)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	e := newExpr()
	// A campaign's notification (its counters, pages and state live beside it) is the campaign's,
	// listed by ListCampaigns: campaign ids start c_.
	filter := e.n(attrSK) + " = " + e.s(skNotification) + " AND " + e.n("status") + " <> " + e.s(string(notify.StatusDispatching)) +
		" AND NOT begins_with(" + e.n("id") + ", " + e.s(notify.CampaignIDPrefix) + ")"

	for _, c := range []struct{ attr, v string }{{"service", f.Service}, {"idempotency_key", f.IdempotencyKey}} {
		if c.v != "" {
			filter += " AND " + e.n(c.attr) + " = " + e.s(c.v)
		}
	}
	if f.Status != "" {
		// An express notification whose batch recorded its verdicts is final only once they are
		// applied (resolveVerdicts): a PROCESSING one with an express attribute is a candidate
		// for every status, checked below.
		filter += " AND (" + e.n("status") + " = " + e.s(string(f.Status)) + " OR (" + e.n("status") + " = " +
			e.s(string(notify.StatusProcessing)) + " AND attribute_exists(" + e.n("x") + ")))"
	}
	if !f.From.IsZero() {
		filter += " AND " + e.n("created_at") + " >= " + e.i(nanos(f.From))
	}
	if !f.To.IsZero() {
		filter += " AND " + e.n("created_at") + " < " + e.i(nanos(f.To))
	}
	proj := e.n(attrPK) + ", " + e.n(attrSK) + ", " + e.n("id") + ", " + e.n("service") + ", " + e.n("idempotency_key") + ", " +
		e.n("status") + ", " + e.n("created_at") + ", " + e.n("doc") + ", " + e.n("x")
	var out []notify.NotificationSummary
	docs := verdictDocs{} // an ingest invocation's notifications share one batch item: read it once
	next, err := s.scanNotifications(ctx, start, limit, e, filter, proj, func(it notificationItem) (bool, error) {
		n, ok, err := s.summary(ctx, f, it, docs)
		if ok {
			out = append(out, n)
		}
		return ok, err
	})
	return out, next, wrapErr(op, err)
}

// summary is it as a listing's entry, and whether it passes f's status and category (the
// filters its item alone cannot answer: the category is in the doc, and an express
// notification's status may wait on its batch's verdicts).
func (s *Store) summary(ctx context.Context, f notify.NotificationFilter, it notificationItem, docs verdictDocs) (notify.NotificationSummary, bool, error) {
	var doc struct {
		Category notify.Category `json:"category"`
	}
	if err := json.Unmarshal([]byte(it.Doc), &doc); err != nil {
		return notify.NotificationSummary{}, false, fmt.Errorf("decode notification %s: %w", it.ID, err)
	}
	if f.Category != "" && doc.Category != f.Category {
		return notify.NotificationSummary{}, false, nil
	}
	status := notify.NotificationStatus(it.Status)
	if it.Express != "" && status == notify.StatusProcessing {
		var x notify.Express
		if err := json.Unmarshal([]byte(it.Express), &x); err != nil {
			return notify.NotificationSummary{}, false, fmt.Errorf("decode express deliveries of %s: %w", it.ID, err)
		}
		var err error
		if status, err = s.resolveVerdicts(ctx, it.ID, &x, status, docs); err != nil {
			return notify.NotificationSummary{}, false, err
		}
	}
	if f.Status != "" && status != f.Status {
		return notify.NotificationSummary{}, false, nil
	}
	return notify.NotificationSummary{ID: it.ID, Service: it.Service, IdempotencyKey: it.IdempotencyKey,
		Status: status, Category: doc.Category, CreatedAt: timeOf(it.CreatedAt)}, true, nil
}

// listByUser is ListNotifications with f.User: a Query of the by_user index, newest first (its
// created_at bounds in the key condition), at most scanPagesPerCall requests a call, and one
// BatchGetItem of each page's main items for what the keys-only index does not hold; the other
// filters are applied to those. The cursor is the index key of the last entry listed, or of the
// last one read when a call ends on its request bound.
func (s *Store) listByUser(ctx context.Context, f notify.NotificationFilter, cursor string, limit int) ([]notify.NotificationSummary, string, error) {
	const op = "list notifications by user"
	if !s.recipientIndex {
		return nil, "", fmt.Errorf("ddb: %s: %w", op, notify.ErrNoRecipientIndex)
	}
	start, err := decodeUserCursor(cursor, f.User)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	e := newExpr()
	cond := e.n(attrRecipientUser) + " = " + e.s(f.User)
	switch {
	case !f.From.IsZero() && !f.To.IsZero():
		cond += " AND " + e.n(attrCreatedAt) + " BETWEEN " + e.i(nanos(f.From)) + " AND " + e.i(nanos(f.To)-1)
	case !f.From.IsZero():
		cond += " AND " + e.n(attrCreatedAt) + " >= " + e.i(nanos(f.From))
	case !f.To.IsZero():
		cond += " AND " + e.n(attrCreatedAt) + " < " + e.i(nanos(f.To))
	}
	var out []notify.NotificationSummary
	docs := verdictDocs{}
	for range scanPagesPerCall {
		res, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.tables.Notifications),
			IndexName:                 aws.String(indexByUser),
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
			ScanIndexForward:          aws.Bool(false),
			ExclusiveStartKey:         start,
			Limit:                     aws.Int32(int32(min(limit, 100))),
		})
		if err != nil {
			return nil, "", wrapErr(op, err)
		}
		keys := make([]dynamo.Keyed, 0, len(res.Items))
		for _, k := range res.Items {
			var it notificationItem
			if err := dynamo.UnmarshalItem(k, &it); err != nil {
				return nil, "", wrapErr(op, fmt.Errorf("decode index key: %w", err))
			}
			keys = append(keys, dynamo.Keys{it.PK, it.SK})
		}
		items := map[string]notificationItem{}
		if len(keys) > 0 {
			rows, err := s.getNotificationItems(ctx, keys...)
			if err != nil {
				return nil, "", wrapErr(op, err)
			}
			for _, row := range rows {
				var it notificationItem
				if err := dynamo.UnmarshalItem(row, &it); err != nil {
					return nil, "", wrapErr(op, fmt.Errorf("decode notification: %w", err))
				}
				items[it.PK] = it
			}
		}
		for i, k := range res.Items {
			it, ok := items[keys[i].HashKey().(string)]
			if !ok || it.Status == string(notify.StatusDispatching) || notify.IsCampaignID(it.ID) ||
				(f.Service != "" && it.Service != f.Service) || (f.IdempotencyKey != "" && it.IdempotencyKey != f.IdempotencyKey) {
				continue
			}
			n, ok, err := s.summary(ctx, f, it, docs)
			if err != nil {
				return nil, "", wrapErr(op, err)
			}
			if !ok {
				continue
			}
			out = append(out, n)
			if len(out) == limit {
				next, err := encodeUserCursor(k)
				return out, next, wrapErr(op, err)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, "", nil
		}
		start = res.LastEvaluatedKey
	}
	next, err := encodeUserCursor(start)
	return out, next, wrapErr(op, err)
}

// userCursor is a by_user index key: the main item's pk and sk, the user and created_at.
type userCursor struct {
	PK, SK, U string
	C         string
}

func encodeUserCursor(key map[string]types.AttributeValue) (string, error) {
	var c userCursor
	for name, dst := range map[string]*string{attrPK: &c.PK, attrSK: &c.SK, attrRecipientUser: &c.U} {
		if v, ok := key[name].(*types.AttributeValueMemberS); ok {
			*dst = v.Value
		}
	}
	if v, ok := key[attrCreatedAt].(*types.AttributeValueMemberN); ok {
		c.C = v.Value
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeUserCursor reads a cursor of a listing by user; one of another user's listing is refused.
func decodeUserCursor(cursor, user string) (map[string]types.AttributeValue, error) {
	if cursor == "" {
		return nil, nil
	}
	var c userCursor
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if _, perr := strconv.ParseInt(c.C, 10, 64); err != nil || perr != nil || c.PK == "" || c.SK == "" || c.U != user {
		return nil, notify.FieldError("cursor", "not a cursor this listing returned")
	}
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: c.PK}, attrSK: &types.AttributeValueMemberS{Value: c.SK},
		attrRecipientUser: &types.AttributeValueMemberS{Value: c.U}, attrCreatedAt: &types.AttributeValueMemberN{Value: c.C},
	}, nil
}
