package cost

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Usage is what one scenario made AWS bill, counted as AWS bills it.
type Usage struct {
	Recipients int

	// DynamoDB request units, from the ConsumedCapacity DynamoDB returned; the Estimated parts
	// were computed from the items instead: writes that failed their condition return no
	// ConsumedCapacity and are billed all the same, and DynamoDB Local reports a transaction's
	// items together where DynamoDB bills each (2 units at least).
	WriteUnits, ReadUnits                   float64
	EstimatedWriteUnits, EstimatedReadUnits float64
	DynamoDBCalls                           map[string]int64 // operation → calls
	// NoCapacity are the calls that succeeded without returning their consumed capacity, and
	// are billed nothing above: none when DynamoDB (Local) answers as it should.
	NoCapacity int64

	// SQS billed requests (one per 64 KB chunk of a request's payload) by operation, and the
	// receives that found no message, which are not in SQSRequests: an event source mapping
	// polls an idle queue all the same (a fixed cost, see IdlePolling).
	SQSRequests   map[string]int64
	EmptyReceives int64

	Lambda map[string]LambdaUsage // function → invocations and billed duration

	HTTPAPIRequests      int64 // API Gateway HTTP API requests (512 KB chunks)
	SchedulerInvocations int64 // one per one-time schedule created: it fires once
	StateTransitions     int64 // Step Functions Standard
	Events               int64 // EventBridge PutEvents events (64 KB chunks)
	LogBytes             int64 // what the functions wrote to their logs
	AccessLogBytes       int64 // what API Gateway wrote to the stage's access log
}

// LambdaUsage is one function's invocations.
type LambdaUsage struct {
	Invocations int64
	BilledMS    int64 // the sum of every invocation's duration rounded up to 1 ms
	MemoryMB    int
}

// GBSeconds is the compute Lambda bills for u.
func (u LambdaUsage) GBSeconds() float64 {
	return float64(u.BilledMS) / 1000 * float64(u.MemoryMB) / 1024
}

// Line is one AWS service's share of a scenario's bill.
type Line struct {
	Service      string
	Quantity     float64 // in Unit
	Unit         string
	PerRecipient float64 // Quantity per recipient
	USD          float64 // what Quantity costs
	PerMillion   float64 // USD per million recipients
	Detail       string
}

// Bill prices u with t: one line per AWS service (those with no usage too, so every scenario
// shows the same rows), in a fixed order, and the total in dollars per million recipients.
func Bill(u Usage, t Table) ([]Line, float64) {
	if u.Recipients <= 0 {
		return nil, 0
	}
	n := float64(u.Recipients)
	var lines []Line
	add := func(service string, q float64, unit string, p Price, detail string) {
		usd := p.Of(q)
		lines = append(lines, Line{Service: service, Quantity: q, Unit: unit, PerRecipient: q / n, USD: usd, PerMillion: usd / n * 1e6, Detail: detail})
	}
	estimated := func(units float64) string {
		if units == 0 {
			return ""
		}
		return fmt.Sprintf(" (%.0f of the units from item sizes)", units)
	}
	if u.NoCapacity > 0 {
		estimated = func(units float64) string {
			return fmt.Sprintf(" (%.0f units from item sizes; %d calls returned no capacity and are not counted)", units, u.NoCapacity)
		}
	}
	add("DynamoDB writes", u.WriteUnits, "WRU", t.DynamoDBWrite, counts(u.DynamoDBCalls, isWriteOp)+estimated(u.EstimatedWriteUnits))
	add("DynamoDB reads", u.ReadUnits, "RRU", t.DynamoDBRead, counts(u.DynamoDBCalls, func(op string) bool { return !isWriteOp(op) })+estimated(u.EstimatedReadUnits))
	var sqs int64
	for _, v := range u.SQSRequests {
		sqs += v
	}
	sqsDetail := counts(u.SQSRequests, nil)
	if u.EmptyReceives > 0 {
		sqsDetail += fmt.Sprintf(" (and %d empty receives, not billed here)", u.EmptyReceives)
	}
	add("SQS", float64(sqs), "requests", t.SQSRequest, sqsDetail)
	var inv, billed int64
	var gbs float64
	var fns []string
	for name, l := range u.Lambda {
		inv += l.Invocations
		billed += l.BilledMS
		gbs += l.GBSeconds()
		fns = append(fns, name)
	}
	sort.Strings(fns)
	var per []string
	for _, name := range fns {
		l := u.Lambda[name]
		per = append(per, fmt.Sprintf("%s %d × %.1f ms @ %d MB", name, l.Invocations, float64(l.BilledMS)/math.Max(1, float64(l.Invocations)), l.MemoryMB))
	}
	add("Lambda requests", float64(inv), "invocations", t.LambdaRequest, strings.Join(per, ", "))
	add("Lambda compute", gbs, "GB-s", t.LambdaCompute, fmt.Sprintf("%d ms billed in all, %s", billed, t.Architecture))
	add("API Gateway", float64(u.HTTPAPIRequests), "requests", t.HTTPAPI, "HTTP API")
	add("EventBridge Scheduler", float64(u.SchedulerInvocations), "invocations", t.Scheduler, "")
	add("Step Functions", float64(u.StateTransitions), "transitions", t.StepFunctions, "Standard")
	add("EventBridge", float64(u.Events), "events", t.EventBridge, "PutEvents")
	logs := u.LogBytes + u.AccessLogBytes
	add("CloudWatch Logs", float64(logs)/(1<<30), "GB", t.LogsIngested, fmt.Sprintf("%d bytes: functions %d, API Gateway access log %d", logs, u.LogBytes, u.AccessLogBytes))
	total := 0.0
	for _, l := range lines {
		total += l.PerMillion
	}
	return lines, total
}

// isWriteOp reports whether a DynamoDB operation is billed in write units.
func isWriteOp(op string) bool {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// counts renders calls by operation, "Op n, Op n", sorted, keeping those keep accepts.
func counts(m map[string]int64, keep func(string) bool) string {
	var ks []string
	for k, v := range m {
		if v > 0 && (keep == nil || keep(k)) {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Print writes a scenario's bill: a line per service — quantity, per recipient, dollars per
// million recipients, how it splits — and the total.
func Print(w io.Writer, title string, u Usage, t Table) float64 {
	lines, total := Bill(u, t)
	fmt.Fprintf(w, "%s: $%.2f per million recipients (%d recipients)\n", title, total, u.Recipients)
	fmt.Fprintf(w, "    %-22s %14s %-12s %14s %12s\n", "service", "measured", "unit", "per recipient", "$/M recip.")
	for _, l := range lines {
		fmt.Fprintf(w, "    %-22s %14s %-12s %14s %12.2f", l.Service, quantity(l.Quantity), l.Unit, quantity(l.PerRecipient), l.PerMillion)
		if l.Detail != "" {
			fmt.Fprintf(w, "   %s", l.Detail)
		}
		fmt.Fprintln(w)
	}
	return total
}

// quantity prints a count as an integer and a fraction with enough digits to read.
func quantity(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v == math.Trunc(v) && v < 1e12:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.01:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// Idle polling: Lambda polls each SQS event source mapping's queue with long polls of up to
// 20 seconds from a handful of pollers (5 at rest, as AWS describes it) whether or not messages
// arrive, so empty receives cost a fixed amount per mapping and month, not per recipient.
const (
	IdlePollers  = 5
	LongPollSecs = 20
	monthSecs    = 30 * 24 * 3600
)

// IdlePolling is what mappings event source mappings cost a month in empty receives.
func IdlePolling(mappings int, t Table) (requests float64, usd float64) {
	requests = float64(mappings*IdlePollers) * monthSecs / LongPollSecs
	return requests, t.SQSRequest.Of(requests)
}
