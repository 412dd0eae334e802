package costbench

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"herald/internal/api"
	"herald/internal/cost"
)

// Meter counts what AWS bills, as requests pass through the SDK clients it is installed on
// (APIOption) and as Lambda handlers run (Invoke), and the bytes the functions log (Logs).
// Safe for concurrent use.
type Meter struct {
	mu sync.Mutex
	u  cost.Usage
}

// NewMeter returns a meter with nothing counted.
func NewMeter() *Meter {
	m := &Meter{}
	m.Reset()
	return m
}

// Reset forgets everything counted (setup is not part of a figure).
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u = cost.Usage{DynamoDBCalls: map[string]int64{}, SQSRequests: map[string]int64{}, Lambda: map[string]cost.LambdaUsage{}}
}

// Usage returns a copy of what was counted, for recipients recipients.
func (m *Meter) Usage(recipients int) cost.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	u.Recipients = recipients
	u.DynamoDBCalls, u.SQSRequests, u.Lambda = clone(m.u.DynamoDBCalls), clone(m.u.SQSRequests), clone(m.u.Lambda)
	return u
}

func clone[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (m *Meter) count(f func(u *cost.Usage)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.u)
}

// Invoke runs one invocation of function's handler and bills it: one request, and its wall time
// on this machine rounded up to the millisecond at the function's memory size.
func (m *Meter) Invoke(function string, handler func()) {
	start := time.Now()
	handler()
	d := time.Since(start)
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	m.count(func(u *cost.Usage) {
		l := u.Lambda[function]
		l.Invocations++
		l.BilledMS += max(ms, 1)
		l.MemoryMB = cost.MemoryMB(function)
		u.Lambda[function] = l
	})
}

// HTTPAPIRequest bills one API Gateway HTTP API request carrying size bytes, and the line it
// writes to the stage's access log.
func (m *Meter) HTTPAPIRequest(size int, accessLog []byte) {
	m.count(func(u *cost.Usage) {
		u.HTTPAPIRequests += chunks(size, cost.HTTPAPIChunk)
		u.AccessLogBytes += int64(len(accessLog))
	})
}

// AccessLogLine is the line API Gateway writes for one request to the access log of the stage
// infra deploys (api.GatewayAccessLogFormat), with the request's values.
func AccessLogLine(requestID, route, caller string, status, responseBytes int, latency time.Duration) []byte {
	ms := strconv.FormatInt(max(latency.Milliseconds(), 1), 10)
	line := strings.NewReplacer(
		"$context.requestId", requestID,
		"$context.requestTime", time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"),
		"$context.routeKey", route,
		"$context.status", strconv.Itoa(status),
		"$context.protocol", "HTTP/1.1",
		"$context.responseLength", strconv.Itoa(responseBytes),
		"$context.responseLatency", ms,
		"$context.integrationLatency", ms,
		"$context.integrationErrorMessage", "-",
		"$context.authorizer.error", "-",
		"$context.identity.userArn", caller,
	).Replace(api.GatewayAccessLogFormat())
	return append([]byte(line), '\n')
}

// StateTransitions bills n Step Functions Standard state transitions.
func (m *Meter) StateTransitions(n int) {
	m.count(func(u *cost.Usage) { u.StateTransitions += int64(n) })
}

// Logs is a writer that counts what the functions log (CloudWatch Logs ingests it) and keeps
// none of it.
func (m *Meter) Logs() *LogCounter { return &LogCounter{m: m} }

// LogCounter counts bytes written.
type LogCounter struct{ m *Meter }

func (l *LogCounter) Write(p []byte) (int, error) {
	l.m.count(func(u *cost.Usage) { u.LogBytes += int64(len(p)) })
	return len(p), nil
}

// chunks is how many billed units size bytes are, size-byte chunks each, at least one.
func chunks(size, chunk int) int64 {
	return max(1, int64((size+chunk-1)/chunk))
}

// APIOption installs the meter on an SDK client (aws.Config.APIOptions, or a client's
// APIOptions). DynamoDB requests that can return their consumed capacity are asked for it
// (ReturnConsumedCapacity TOTAL) and billed what DynamoDB answered; SQS requests are billed per
// 64 KB chunk of the payload they carry (messages sent, or received); PutEvents per event;
// one-time schedules created per the invocation they will make.
func (m *Meter) APIOption(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("HeraldCostMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			in.Parameters = askCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			m.bill(in.Parameters, out.Result, err)
			return out, md, err
		}), middleware.After)
}

// askCapacity returns a copy of a DynamoDB input that asks for its consumed capacity (the
// caller's input is left alone); other inputs as they are.
func askCapacity(params any) any {
	switch v := params.(type) {
	case *dynamodb.GetItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.PutItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.UpdateItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.DeleteItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.QueryInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.ScanInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.BatchGetItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.BatchWriteItemInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.TransactGetItemsInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	case *dynamodb.TransactWriteItemsInput:
		c := *v
		c.ReturnConsumedCapacity = orTotal(c.ReturnConsumedCapacity)
		return &c
	}
	return params
}

func orTotal(r ddbtypes.ReturnConsumedCapacity) ddbtypes.ReturnConsumedCapacity {
	if r == "" || r == ddbtypes.ReturnConsumedCapacityNone {
		return ddbtypes.ReturnConsumedCapacityTotal
	}
	return r
}

// bill counts one SDK call: its input, its result (nil when it failed) and its error.
func (m *Meter) bill(params, result any, err error) {
	switch v := params.(type) {
	case *dynamodb.GetItemInput, *dynamodb.QueryInput, *dynamodb.ScanInput, *dynamodb.BatchGetItemInput:
		m.dynamo(opName(v), result, err, 0, 0)
	case *dynamodb.TransactGetItemsInput:
		m.dynamo("TransactGetItems", result, err, 0, 2*float64(len(v.TransactItems)))
	case *dynamodb.PutItemInput:
		m.dynamo("PutItem", result, err, units(itemSize(v.Item)), 0)
	case *dynamodb.UpdateItemInput:
		m.dynamo("UpdateItem", result, err, 1, 0)
	case *dynamodb.DeleteItemInput:
		m.dynamo("DeleteItem", result, err, 1, 0)
	case *dynamodb.BatchWriteItemInput:
		m.dynamo("BatchWriteItem", result, err, 0, 0)
	case *dynamodb.TransactWriteItemsInput:
		// Each write is billed twice (prepare and commit), rounded up per item. A canceled
		// transaction returns no capacity and is billed all the same. Condition checks are
		// left out of the floor (they change nothing).
		est, floor := 0.0, 0.0
		for _, it := range v.TransactItems {
			switch {
			case it.Put != nil:
				est += 2 * units(itemSize(it.Put.Item))
				floor += 2 * units(itemSize(it.Put.Item))
			case it.Update != nil, it.Delete != nil:
				est += 2
				floor += 2
			}
		}
		m.dynamo("TransactWriteItems", result, err, est, floor)

	case *awssqs.SendMessageInput:
		m.sqs("SendMessage", chunks(len(deref(v.MessageBody))+attrSize(v.MessageAttributes), cost.SQSChunk))
	case *awssqs.SendMessageBatchInput:
		size := 0
		for _, e := range v.Entries {
			size += len(deref(e.MessageBody)) + attrSize(e.MessageAttributes)
		}
		m.sqs("SendMessageBatch", chunks(size, cost.SQSChunk))
	case *awssqs.ReceiveMessageInput:
		size, n := 0, 0
		if r, ok := result.(*awssqs.ReceiveMessageOutput); ok && r != nil {
			for _, msg := range r.Messages {
				size += len(deref(msg.Body)) + attrSize(msg.MessageAttributes)
			}
			n = len(r.Messages)
		}
		if n == 0 {
			// An empty poll: what an idle event source mapping makes whatever the traffic,
			// stated apart as a fixed cost, not per recipient.
			m.count(func(u *cost.Usage) { u.EmptyReceives++ })
			return
		}
		m.sqs("ReceiveMessage", chunks(size, cost.SQSChunk))
	case *awssqs.DeleteMessageInput:
		m.sqs("DeleteMessage", 1)
	case *awssqs.DeleteMessageBatchInput:
		m.sqs("DeleteMessageBatch", 1)
	case *awssqs.ChangeMessageVisibilityInput:
		m.sqs("ChangeMessageVisibility", 1)
	case *awssqs.ChangeMessageVisibilityBatchInput:
		m.sqs("ChangeMessageVisibilityBatch", 1)
	case *awssqs.GetQueueAttributesInput:
		m.sqs("GetQueueAttributes", 1)
	case *awssqs.GetQueueUrlInput:
		m.sqs("GetQueueUrl", 1)

	case *eventbridge.PutEventsInput:
		var n int64
		for _, e := range v.Entries {
			n += chunks(len(deref(e.Detail))+len(deref(e.DetailType))+len(deref(e.Source)), cost.EventChunk)
		}
		m.count(func(u *cost.Usage) { u.Events += n })
	case *scheduler.CreateScheduleInput:
		if err == nil {
			m.count(func(u *cost.Usage) { u.SchedulerInvocations++ })
		}
	}
}

func (m *Meter) sqs(op string, requests int64) {
	m.count(func(u *cost.Usage) { u.SQSRequests[op] += requests })
}

// dynamo bills a DynamoDB call from the capacity it returned, and at least floor units; a
// failed write that returned none is billed estimate write units (DynamoDB bills a write whose
// condition failed).
func (m *Meter) dynamo(op string, result any, err error, estimate, floor float64) {
	var consumed []ddbtypes.ConsumedCapacity
	switch r := result.(type) {
	case *dynamodb.GetItemOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		consumed = one(r.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		consumed = r.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		consumed = r.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		consumed = r.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		consumed = r.ConsumedCapacity
	}
	total := 0.0
	for _, c := range consumed {
		if c.CapacityUnits != nil {
			total += *c.CapacityUnits
		}
	}
	// DynamoDB bills each item of a transaction on its own, rounded up, twice: at least 2
	// units an item. DynamoDB Local reports the transaction's items together (two small items:
	// 2 units, not 4), so a transaction is billed at least that floor, and the difference is
	// counted as estimated.
	raised := 0.0
	if len(consumed) > 0 && total < floor {
		raised, total = floor-total, floor
	}
	write := isWrite(op)
	m.count(func(u *cost.Usage) {
		u.DynamoDBCalls[op]++
		switch {
		case len(consumed) > 0 && write:
			u.WriteUnits += total
			u.EstimatedWriteUnits += raised
		case len(consumed) > 0:
			u.ReadUnits += total
			u.EstimatedReadUnits += raised
		case err == nil:
			u.NoCapacity++
		case write && conditionFailed(err):
			u.WriteUnits += estimate
			u.EstimatedWriteUnits += estimate
		}
	})
}

// conditionFailed reports a write DynamoDB evaluated and refused, which it bills.
func conditionFailed(err error) bool {
	var cc *ddbtypes.ConditionalCheckFailedException
	var tc *ddbtypes.TransactionCanceledException
	return errors.As(err, &cc) || errors.As(err, &tc)
}

func isWrite(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

func opName(params any) string {
	switch params.(type) {
	case *dynamodb.GetItemInput:
		return "GetItem"
	case *dynamodb.QueryInput:
		return "Query"
	case *dynamodb.ScanInput:
		return "Scan"
	case *dynamodb.BatchGetItemInput:
		return "BatchGetItem"
	case *dynamodb.TransactGetItemsInput:
		return "TransactGetItems"
	}
	return "?"
}

func one(c *ddbtypes.ConsumedCapacity) []ddbtypes.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []ddbtypes.ConsumedCapacity{*c}
}

// units is the write units an item of size bytes takes: one per KB begun.
func units(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// itemSize is an item's size as DynamoDB counts it: attribute names plus values.
func itemSize(item map[string]ddbtypes.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v ddbtypes.AttributeValue) int {
	switch a := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return len(a.Value)
	case *ddbtypes.AttributeValueMemberN:
		return (len(a.Value)+1)/2 + 1
	case *ddbtypes.AttributeValueMemberB:
		return len(a.Value)
	case *ddbtypes.AttributeValueMemberBOOL, *ddbtypes.AttributeValueMemberNULL:
		return 1
	case *ddbtypes.AttributeValueMemberSS:
		n := 0
		for _, s := range a.Value {
			n += len(s)
		}
		return n
	case *ddbtypes.AttributeValueMemberNS:
		n := 0
		for _, s := range a.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *ddbtypes.AttributeValueMemberBS:
		n := 0
		for _, b := range a.Value {
			n += len(b)
		}
		return n
	case *ddbtypes.AttributeValueMemberL:
		n := 3
		for _, e := range a.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *ddbtypes.AttributeValueMemberM:
		n := 3
		for k, e := range a.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// attrSize is the size of SQS message attributes: names, types and values.
func attrSize(attrs map[string]sqstypes.MessageAttributeValue) int {
	n := 0
	for k, v := range attrs {
		n += len(k) + len(deref(v.DataType)) + len(deref(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
