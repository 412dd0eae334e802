package ddb

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// skAPIKeyClaim is the sort key of the HTTP API's claim of an idempotency key, beside ingest's
// (skKeyClaim) under the same hashed partition key: the API claims a key before it queues the
// request, ingest when it stores the notification.
const skAPIKeyClaim = "A"

// apiKeyClaimItem is notify.KeyClaim as stored.
type apiKeyClaimItem struct {
	PK             string `dynamo:"pk"`
	SK             string `dynamo:"sk"`
	Service        string `dynamo:"service"`
	IdempotencyKey string `dynamo:"idempotency_key"`
	NotificationID string `dynamo:"notification_id"`
	Fingerprint    string `dynamo:"fingerprint"`
	CreatedAt      int64  `dynamo:"created_at"`
}

// ClaimKey implements notify.NotificationStore: one conditional PutItem, which returns the item
// that holds the key when it fails (a consistent read of it where the old item is not returned).
func (s *Store) ClaimKey(ctx context.Context, k notify.KeyClaim) (notify.KeyClaim, bool, error) {
	op := "claim key of service " + k.Service
	if err := k.Check(); err != nil {
		return notify.KeyClaim{}, false, wrapErr(op, err)
	}
	k.At = s.nowOr(k.At)
	pk := keyClaimPK(k.Service, k.Key)
	item, err := dynamo.MarshalItem(apiKeyClaimItem{PK: pk, SK: skAPIKeyClaim, Service: k.Service, IdempotencyKey: k.Key,
		NotificationID: k.NotificationID, Fingerprint: k.Fingerprint, CreatedAt: nanos(k.At)})
	if err != nil {
		return notify.KeyClaim{}, false, wrapErr(op, err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.tables.Notifications),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return k, true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return notify.KeyClaim{}, false, wrapErr(op, err)
	}
	var held apiKeyClaimItem
	if ccf.Item != nil {
		err = dynamo.UnmarshalItem(ccf.Item, &held)
	} else {
		err = s.db.Table(s.tables.Notifications).Get(attrPK, pk).Range(attrSK, dynamo.Equal, skAPIKeyClaim).
			Consistent(true).One(ctx, &held)
	}
	if err != nil {
		return notify.KeyClaim{}, false, wrapErr(op, err)
	}
	return notify.KeyClaim{Service: held.Service, Key: held.IdempotencyKey, NotificationID: held.NotificationID,
		Fingerprint: held.Fingerprint, At: timeOf(held.CreatedAt)}, false, nil
}
