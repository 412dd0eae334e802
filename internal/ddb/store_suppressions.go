package ddb

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// ListSuppressions implements notify.SuppressionStore with a Scan of the suppressions table,
// the filter (channel, reason, created_at) in its filter expression, at most scanPagesPerCall
// requests per call. It feeds the operator's suppressions export, rare and paged: the table is
// keyed by address hash for the hot lookups of prepare and no index is kept for an export on
// every suppression. Entries come in scan order, not by time. The cursor is the address key to
// continue after (the last listed one's, or the scan's LastEvaluatedKey), base64url.
func (s *Store) ListSuppressions(ctx context.Context, f notify.SuppressionFilter, cursor string, limit int) ([]notify.Suppression, string, error) {
	const op = "list suppressions"
	if limit < 1 || limit > notify.MaxSuppressionPage {
		return nil, "", wrapErr(op, notify.FieldError("limit", "must be 1–%d", notify.MaxSuppressionPage))
	}
	var start map[string]types.AttributeValue
	if cursor != "" {
		k, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(k) == 0 {
			return nil, "", wrapErr(op, notify.FieldError("cursor", "not a cursor this listing returned"))
		}
		start = map[string]types.AttributeValue{attrSuppressionKey: &types.AttributeValueMemberS{Value: string(k)}}
	}
	e := newExpr()
	var conds []string
	if f.Channel != "" {
		conds = append(conds, e.n("channel")+" = "+e.s(string(f.Channel)))
	}
	if f.Reason != "" {
		conds = append(conds, e.n("reason")+" = "+e.s(f.Reason))
	}
	if !f.From.IsZero() {
		conds = append(conds, e.n("created_at")+" >= "+e.i(nanos(f.From)))
	}
	if !f.To.IsZero() {
		conds = append(conds, e.n("created_at")+" < "+e.i(nanos(f.To)))
	}
	var filter *string
	for i, c := range conds {
		if i == 0 {
			filter = aws.String(c)
		} else {
			*filter += " AND " + c
		}
	}
	encode := func(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }
	var out []notify.Suppression
	for range scanPagesPerCall {
		res, err := s.client.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 aws.String(s.tables.Suppressions),
			FilterExpression:          filter,
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap(),
			ExclusiveStartKey:         start,
			Limit:                     limitOrNil(scanItemsPerRequest),
		})
		if err != nil {
			return nil, "", wrapErr(op, err)
		}
		for _, row := range res.Items {
			var it suppressionItem
			if err := dynamo.UnmarshalItem(row, &it); err != nil {
				return nil, "", wrapErr(op, fmt.Errorf("decode suppression: %w", err))
			}
			out = append(out, notify.Suppression{AddressKey: it.AddressKey, Masked: it.Masked,
				Channel: notify.Channel(it.Channel), Reason: it.Reason, CreatedAt: timeOf(it.CreatedAt)})
			if len(out) == limit {
				return out, encode(it.AddressKey), nil
			}
		}
		k, _ := res.LastEvaluatedKey[attrSuppressionKey].(*types.AttributeValueMemberS)
		if k == nil {
			return out, "", nil
		}
		start = res.LastEvaluatedKey
	}
	k := start[attrSuppressionKey].(*types.AttributeValueMemberS)
	return out, encode(k.Value), nil
}
