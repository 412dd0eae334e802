package ddb

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// WriteCounter counts the items a DynamoDB client asks to write — each PutItem, UpdateItem and
// DeleteItem, each write of a TransactWriteItems (condition checks are reads), each request of a
// BatchWriteItem — which is what DynamoDB bills write units for. A conditional write that fails
// still counts: it is billed too. SDK retries of one call count once; a write the store repeats
// itself (a transaction conflict) counts again, as it is billed again.
type WriteCounter struct{ n atomic.Int64 }

// Writes returns the items written so far.
func (w *WriteCounter) Writes() int64 { return w.n.Load() }

// Option installs the counter on a client: dynamo.New(cfg, counter.Option).
func (w *WriteCounter) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("HeraldWriteCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				w.n.Add(int64(writesIn(in.Parameters)))
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
}

// writesIn is how many item writes one operation's input asks for.
func writesIn(params any) int {
	switch v := params.(type) {
	case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
		return 1
	case *dynamodb.TransactWriteItemsInput:
		n := 0
		for _, it := range v.TransactItems {
			if it.ConditionCheck == nil {
				n++
			}
		}
		return n
	case *dynamodb.BatchWriteItemInput:
		n := 0
		for _, reqs := range v.RequestItems {
			n += len(reqs)
		}
		return n
	}
	return 0
}
