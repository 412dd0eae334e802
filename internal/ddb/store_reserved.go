package ddb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Reserved sends: moving a SCHEDULED notification's send_at (notify.Rescheduler) and listing
// what waits for a fire (notify.ScheduledLister, notify.ReservedCampaignLister). See "Reserved
// sends" in the package documentation for why notifications are found by a scan.

var (
	_ notify.Rescheduler            = (*Store)(nil)
	_ notify.ScheduledLister        = (*Store)(nil)
	_ notify.ReservedCampaignLister = (*Store)(nil)
)

// scanPagesPerCall bounds the work of one ListScheduledNotifications call: at most this many
// Scan requests (each reads up to 1 MB), so a call fits in an API request's time however large
// the table is; the caller pages on.
const scanPagesPerCall = 4

// scanItemsPerRequest is the Limit of each of those Scan requests (0: DynamoDB's 1 MB page);
// a (non-parallel) test lowers it to cross page and call boundaries with a few items.
var scanItemsPerRequest int32

// RescheduleNotification implements notify.Rescheduler.
func (s *Store) RescheduleNotification(ctx context.Context, id string, at time.Time) error {
	return s.moveScheduled(ctx, "reschedule notification "+id, id, at, notify.StatusScheduled)
}

// FireScheduled implements notify.Rescheduler.
func (s *Store) FireScheduled(ctx context.Context, id string, at time.Time) error {
	return s.moveScheduled(ctx, "fire notification "+id, id, at, notify.StatusAccepted)
}

// moveScheduled rewrites a SCHEDULED notification's send_at (kept in its doc) and sets its
// status to `to`: a consistent read of the main item, then one UpdateItem conditioned on the
// status being SCHEDULED and the doc being the one read, so a concurrent fire, cancel or
// reschedule either wins (ECONFLICT, or read again) or loses whole.
func (s *Store) moveScheduled(ctx context.Context, op, id string, at time.Time, to notify.NotificationStatus) error {
	for attempt := 0; ; attempt++ {
		var main notificationItem
		err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).
			Consistent(true).One(ctx, &main)
		if errors.Is(err, dynamo.ErrNotFound) {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "notification not found"))
		}
		if err != nil {
			return wrapErr(op, err)
		}
		if main.Status != string(notify.StatusScheduled) {
			return wrapErr(op, notify.Errorf(notify.ECONFLICT, "notification is %s, no longer SCHEDULED", main.Status))
		}
		doc, err := docWithSendAt(main.Doc, at)
		if err != nil {
			return wrapErr(op, err)
		}
		e := newExpr()
		set := []string{e.n("status") + " = " + e.s(string(to)), e.n("updated_at") + " = " + e.i(nanos(s.now())),
			e.n("doc") + " = " + e.s(doc)}
		cond := e.n("status") + " = " + e.s(string(notify.StatusScheduled)) + " AND " + e.n("doc") + " = " + e.s(main.Doc)
		_, err = s.updateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.tables.Notifications),
			Key:                       key2(notificationPK(id), skNotification),
			UpdateExpression:          aws.String(updateExpr(set, nil, nil)),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
		})
		if _, failed := condFailedItem(err); failed && attempt+1 < txAttempts {
			continue // changed since read: decide again
		}
		return wrapErr(op, err)
	}
}

// ListScheduledNotifications implements notify.ScheduledLister with a Scan of the notifications
// table filtered to main items in status SCHEDULED, at most scanPagesPerCall requests per call.
// The cursor is the key to continue after (the last listed item's, or the scan's
// LastEvaluatedKey), base64url JSON.
func (s *Store) ListScheduledNotifications(ctx context.Context, cursor string, limit int) ([]notify.Reserved, string, error) {
	const op = "list scheduled notifications"
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	start, err := decodeScanCursor(cursor)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	e := newExpr()
	filter := e.n(attrSK) + " = " + e.s(skNotification) + " AND " + e.n("status") + " = " + e.s(string(notify.StatusScheduled))
	proj := e.n(attrPK) + ", " + e.n(attrSK) + ", " + e.n("id") + ", " + e.n("service") + ", " + e.n("doc")
	var out []notify.Reserved
	next, err := s.scanNotifications(ctx, start, limit, e, filter, proj, func(it notificationItem) (bool, error) {
		var doc struct {
			SendAt *time.Time `json:"send_at"`
		}
		if err := json.Unmarshal([]byte(it.Doc), &doc); err != nil {
			return false, fmt.Errorf("decode notification %s: %w", it.ID, err)
		}
		if doc.SendAt == nil {
			return false, nil
		}
		out = append(out, notify.Reserved{ID: it.ID, Service: it.Service, SendAt: doc.SendAt.UTC()})
		return true, nil
	})
	return out, next, wrapErr(op, err)
}

// scanNotifications pages the notifications table from start with filter and proj (names and
// values in e), at most scanPagesPerCall requests, handing each item to take, which reports
// whether it listed it. It stops once limit items were listed — whatever is left of that page:
// the cursor it returns continues after the last one — or at the table's end (cursor "").
func (s *Store) scanNotifications(ctx context.Context, start map[string]types.AttributeValue, limit int, e *expr,
	filter, proj string, take func(notificationItem) (bool, error)) (string, error) {
	listed := 0
	for range scanPagesPerCall {
		res, err := s.client.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 aws.String(s.tables.Notifications),
			FilterExpression:          aws.String(filter),
			ProjectionExpression:      aws.String(proj),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
			ExclusiveStartKey:         start,
			Limit:                     limitOrNil(scanItemsPerRequest),
		})
		if err != nil {
			return "", err
		}
		for _, row := range res.Items {
			var it notificationItem
			if err := dynamo.UnmarshalItem(row, &it); err != nil {
				return "", fmt.Errorf("decode notification: %w", err)
			}
			ok, err := take(it)
			if err != nil {
				return "", err
			}
			if ok {
				if listed++; listed == limit {
					return encodeScanCursor(key2(it.PK, it.SK))
				}
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return "", nil
		}
		start = res.LastEvaluatedKey
	}
	return encodeScanCursor(start)
}

func encodeScanCursor(key map[string]types.AttributeValue) (string, error) {
	var k struct{ PK, SK string }
	if pk, ok := key[attrPK].(*types.AttributeValueMemberS); ok {
		k.PK = pk.Value
	}
	if sk, ok := key[attrSK].(*types.AttributeValueMemberS); ok {
		k.SK = sk.Value
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeScanCursor(cursor string) (map[string]types.AttributeValue, error) {
	if cursor == "" {
		return nil, nil
	}
	var k struct{ PK, SK string }
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil || k.PK == "" || k.SK == "" {
		return nil, notify.FieldError("cursor", "not a cursor this listing returned")
	}
	return key2(k.PK, k.SK), nil
}

// ListReservedCampaigns implements notify.ReservedCampaignLister: a consistent Query of the
// campaign listing partition (one partition; campaigns are few) filtered to state SCHEDULED,
// after the cursor's listing key, then one BatchGetItem of those campaigns for their service and
// send_at. The cursor is the last listing key, base64url.
func (s *Store) ListReservedCampaigns(ctx context.Context, cursor string, limit int) ([]notify.Reserved, string, error) {
	const op = "list reserved campaigns"
	if limit < 1 || limit > notify.MaxReservedPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxReservedPage))
	}
	after, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, "", wrapErr(op, notify.FieldError("cursor", "not a cursor this listing returned"))
	}
	var entries []campaignListingItem
	q := s.db.Table(s.tables.Notifications).Get(attrPK, campaignListingPK)
	if len(after) > 0 {
		q = q.Range(attrSK, dynamo.Greater, string(after))
	}
	err = q.Filter("$ = ?", "state", string(notify.CampaignScheduled)).Consistent(true).Limit(limit).All(ctx, &entries)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	next := ""
	if len(entries) == limit {
		next = base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].SK))
	}
	if len(entries) == 0 {
		return nil, next, nil
	}
	keys := make([]dynamo.Keyed, len(entries))
	for i, e := range entries {
		keys[i] = dynamo.Keys{notificationPK(e.ID), skCampaign}
	}
	rows, err := s.getNotificationItems(ctx, keys...)
	if err != nil {
		return nil, "", wrapErr(op, err)
	}
	byID := map[string]notify.Reserved{}
	for _, row := range rows {
		var it campaignItem
		if err := dynamo.UnmarshalItem(row, &it); err != nil {
			return nil, "", wrapErr(op, fmt.Errorf("decode campaign: %w", err))
		}
		c, err := it.campaign()
		if err != nil {
			return nil, "", wrapErr(op, err)
		}
		if c.State == notify.CampaignScheduled && c.SendAt != nil {
			byID[c.ID] = notify.Reserved{ID: c.ID, Service: c.Service, SendAt: c.SendAt.UTC()}
		}
	}
	var out []notify.Reserved
	for _, e := range entries { // listing order
		if r, ok := byID[e.ID]; ok {
			out = append(out, r)
		}
	}
	return out, next, nil
}

func limitOrNil(n int32) *int32 {
	if n <= 0 {
		return nil
	}
	return aws.Int32(n)
}
