package ddb

import (
	"context"
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

// Batch verdicts (CompleteExpressBatch). The express notifications of one ingest invocation
// name one batch (notify.Express.Verdicts) when they are created; once they are sent, their
// verdicts are one item of the notifications table,
//
//	pk XV#<batch>   sk XV   doc: {"<notification id>": [verdict, …], …} (compact JSON)
//
// written once (a conditional put), instead of one update of each notification's main item: a
// write is billed per item and per KB, and a batch's verdicts are a few dozen bytes each. Every
// read of an express notification that names a batch and is not final applies them
// (resolveVerdicts): GetNotification, ListDeliveries, ListNotifications, and the express writes,
// which fold them into the main item when they write it. The item has no TTL: the main items it
// completes do not expire either.
const (
	skVerdicts = "XV"
	// maxVerdictsDoc keeps a batch's item far under DynamoDB's 400 KB.
	maxVerdictsDoc = 300 << 10
)

func verdictsPK(batch string) string { return "XV#" + batch }

type verdictsItem struct {
	PK  string `dynamo:"pk"`
	SK  string `dynamo:"sk"`
	Doc string `dynamo:"doc"`
}

// verdict is a notify.DeliveryUpdate in the batch item's doc, with short keys.
type verdict struct {
	ID     string                `json:"i"`
	Status notify.DeliveryStatus `json:"s"`
	Reason string                `json:"r,omitempty"`
	Detail string                `json:"x,omitempty"`
	MsgID  string                `json:"pm,omitempty"`
	At     int64                 `json:"t,omitempty"` // unix ms
}

// CompleteExpressBatch implements notify.ExpressStore: one conditional PutItem of the batch's
// item. A put that finds the item written already (the SDK retried one that had succeeded) is
// done. ETOOLARGE past maxVerdictsDoc: the caller completes them one by one instead.
func (s *Store) CompleteExpressBatch(ctx context.Context, batch string, done []notify.ExpressDone) error {
	op := "complete express batch " + batch
	doc := make(map[string][]verdict, len(done))
	for _, d := range done {
		vs := make([]verdict, 0, len(d.Updates))
		for _, u := range d.Updates {
			v := verdict{ID: u.ID, Status: u.Status, Reason: u.Reason, Detail: u.Detail, MsgID: u.ProviderMessageID}
			if !u.At.IsZero() {
				v.At = u.At.UnixMilli()
			}
			vs = append(vs, v)
		}
		doc[d.ID] = vs
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return wrapErr(op, fmt.Errorf("encode verdicts: %w", err))
	}
	if len(b) > maxVerdictsDoc {
		return wrapErr(op, notify.Errorf(notify.ETOOLARGE, "%d bytes of verdicts; at most %d in one batch", len(b), maxVerdictsDoc))
	}
	item, err := dynamo.MarshalItem(verdictsItem{PK: verdictsPK(batch), SK: skVerdicts, Doc: string(b)})
	if err != nil {
		return wrapErr(op, err)
	}
	_, err = s.putItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.tables.Notifications), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK}})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return wrapErr(op, err)
}

// verdictDocs holds the batch items one call has read (batch → doc; an empty doc for a batch not
// written), so a listing of many notifications of one ingest invocation reads its item once.
type verdictDocs map[string]map[string][]verdict

// resolveVerdicts applies to x — notification id's express state, stored with status — the
// verdicts its batch recorded for it, if it names a batch, is not final, and the batch is
// written; it returns the status they give (notify.Express.ResolveVerdicts). A consistent
// GetItem of the batch's item, unless docs (nil: none) holds it already.
func (s *Store) resolveVerdicts(ctx context.Context, id string, x *notify.Express, status notify.NotificationStatus, docs verdictDocs) (notify.NotificationStatus, error) {
	if x == nil || x.Verdicts == "" || (!x.Pending() && status != notify.StatusProcessing) {
		return status, nil
	}
	doc, ok := docs[x.Verdicts]
	if !ok {
		var err error
		if doc, err = s.readVerdicts(ctx, x.Verdicts); err != nil {
			return status, err
		}
		if docs != nil {
			docs[x.Verdicts] = doc
		}
	}
	vs, ok := doc[id]
	if !ok {
		return status, nil
	}
	updates := make([]notify.DeliveryUpdate, len(vs))
	for i, v := range vs {
		updates[i] = notify.DeliveryUpdate{ID: v.ID, Status: v.Status, Reason: v.Reason, Detail: v.Detail, ProviderMessageID: v.MsgID}
		if v.At != 0 {
			updates[i].At = time.UnixMilli(v.At).UTC()
		}
	}
	return x.ResolveVerdicts(status, updates), nil
}

// readVerdicts reads batch's item: an empty doc when it is not written.
func (s *Store) readVerdicts(ctx context.Context, batch string) (map[string][]verdict, error) {
	var it verdictsItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, verdictsPK(batch)).Range(attrSK, dynamo.Equal, skVerdicts).
		Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return map[string][]verdict{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read verdicts of batch %s: %w", batch, err)
	}
	var doc map[string][]verdict
	if err := json.Unmarshal([]byte(it.Doc), &doc); err != nil {
		return nil, fmt.Errorf("decode verdicts of batch %s: %w", batch, err)
	}
	return doc, nil
}
