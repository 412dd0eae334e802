package cost

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// The arithmetic from counted usage to dollars per million recipients, on known inputs.
func TestBill(t *testing.T) {
	table := Table{
		DynamoDBWrite: Price{USD: 1, Per: 1e6}, DynamoDBRead: Price{USD: 0.25, Per: 1e6},
		SQSRequest: Price{USD: 0.40, Per: 1e6}, LambdaRequest: Price{USD: 0.20, Per: 1e6},
		LambdaCompute: Price{USD: 0.00001, Per: 1}, HTTPAPI: Price{USD: 1, Per: 1e6},
		Scheduler: Price{USD: 1, Per: 1e6}, StepFunctions: Price{USD: 0.025, Per: 1000},
		EventBridge: Price{USD: 1, Per: 1e6}, LogsIngested: Price{USD: 0.5, Per: 1},
	}
	u := Usage{
		Recipients: 1000,
		WriteUnits: 10000, ReadUnits: 4000, // 10 and 4 a recipient
		SQSRequests: map[string]int64{"SendMessageBatch": 100, "ReceiveMessage": 300, "DeleteMessageBatch": 300},
		Lambda: map[string]LambdaUsage{
			"send": {Invocations: 100, BilledMS: 20000, MemoryMB: 512},  // 20 s × 0.5 GB = 10 GB-s
			"api":  {Invocations: 1000, BilledMS: 8000, MemoryMB: 1024}, // 8 GB-s
		},
		HTTPAPIRequests: 1000, SchedulerInvocations: 10, StateTransitions: 400, Events: 2,
		LogBytes: 1 << 30, // 1 GB
	}
	lines, total := Bill(u, table)
	want := map[string]struct{ quantity, perRecipient, perMillion float64 }{
		"DynamoDB writes":       {10000, 10, 10},   // 10 WRU × $1/M × 1M recipients
		"DynamoDB reads":        {4000, 4, 1},      // 4 RRU × $0.25/M
		"SQS":                   {700, 0.7, 0.28},  // 0.7 × $0.40
		"Lambda requests":       {1100, 1.1, 0.22}, // 1.1 × $0.20
		"Lambda compute":        {18, 0.018, 0.18}, // 0.018 GB-s × $0.00001 × 1M
		"API Gateway":           {1000, 1, 1},      // 1 × $1
		"EventBridge Scheduler": {10, 0.01, 0.01},  // 0.01 × $1
		"Step Functions":        {400, 0.4, 10},    // 0.4 × $25/M
		"EventBridge":           {2, 0.002, 0.002}, // 0.002 × $1
		"CloudWatch Logs":       {1, 0.001, 500},   // 1 GB / 1000 × $0.50 × 1M
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	sum := 0.0
	for _, l := range lines {
		w, ok := want[l.Service]
		if !ok {
			t.Errorf("unexpected line %q", l.Service)
			continue
		}
		if !near(l.Quantity, w.quantity) || !near(l.PerRecipient, w.perRecipient) || !near(l.PerMillion, w.perMillion) {
			t.Errorf("%s: quantity %v, per recipient %v, $/M %v; want %v, %v, %v", l.Service, l.Quantity, l.PerRecipient, l.PerMillion, w.quantity, w.perRecipient, w.perMillion)
		}
		if !near(l.USD, l.PerMillion*float64(u.Recipients)/1e6) {
			t.Errorf("%s: $%v for the run, $%v per million recipients", l.Service, l.USD, l.PerMillion)
		}
		sum += w.perMillion
	}
	if !near(total, sum) {
		t.Errorf("total %v, want %v", total, sum)
	}
	if lines, total := Bill(Usage{}, table); lines != nil || total != 0 {
		t.Errorf("no recipients: %v %v", lines, total)
	}
	var out bytes.Buffer
	Print(&out, "scenario", u, table)
	if !strings.HasPrefix(out.String(), "scenario: $522.69 per million recipients (1000 recipients)\n") {
		t.Errorf("printed:\n%s", out.String())
	}
}

func TestPricesAreComplete(t *testing.T) {
	p := USEast1
	for name, price := range map[string]Price{"DynamoDBWrite": p.DynamoDBWrite, "DynamoDBRead": p.DynamoDBRead, "SQSRequest": p.SQSRequest,
		"LambdaRequest": p.LambdaRequest, "LambdaCompute": p.LambdaCompute, "HTTPAPI": p.HTTPAPI, "Scheduler": p.Scheduler,
		"StepFunctions": p.StepFunctions, "EventBridge": p.EventBridge, "LogsIngested": p.LogsIngested} {
		if price.USD <= 0 || price.Per <= 0 || price.Unit == "" || price.Page == "" {
			t.Errorf("%s: %+v needs a price, a quantity, a unit and its pricing page", name, price)
		}
	}
	if p.Date == "" || p.Region != "us-east-1" || p.Architecture == "" {
		t.Errorf("table %q %q %q", p.Date, p.Region, p.Architecture)
	}
}

func TestIdlePolling(t *testing.T) {
	// 2 mappings × 5 pollers × one 20 s poll each: 2 × 5 × 129,600 a month.
	req, usd := IdlePolling(2, Table{SQSRequest: Price{USD: 0.40, Per: 1e6}})
	if !near(req, 1296000) || !near(usd, 0.5184) {
		t.Errorf("%v requests, $%v", req, usd)
	}
}
