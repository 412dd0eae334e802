// Package cost turns counted AWS requests into dollars: the one dated price table Herald's cost
// figures use (us-east-1 list prices), the Lambda memory sizes the stack deploys with, and the
// arithmetic from usage to dollars per million recipients. It imports no SDK: the meter that
// counts the requests is internal/cost/costbench, and infra/ checks its function defaults
// against FunctionMemoryMB.
package cost

// Price is one list price: USD for Per units of Unit, from the public pricing page named Page.
type Price struct {
	USD  float64
	Per  float64
	Unit string
	Page string
}

// Of is what quantity units cost.
func (p Price) Of(quantity float64) float64 {
	if p.Per == 0 {
		return 0
	}
	return quantity * p.USD / p.Per
}

// Table is every price the meter bills with. Free tiers are ignored: they are per account and
// month, not per recipient.
type Table struct {
	Date         string // the day the prices were read off the pricing pages
	Region       string
	Architecture string // the Lambda architecture the GB-second price is for

	DynamoDBWrite Price // on-demand write request unit
	DynamoDBRead  Price // on-demand read request unit
	SQSRequest    Price // standard queue request, each 64 KB chunk of payload one request
	LambdaRequest Price
	LambdaCompute Price // GB-second
	HTTPAPI       Price // API Gateway HTTP API request, each 512 KB chunk one request
	Scheduler     Price // EventBridge Scheduler invocation
	StepFunctions Price // Standard workflow state transition
	EventBridge   Price // PutEvents custom event, each 64 KB chunk one event
	LogsIngested  Price // CloudWatch Logs data ingested, per GB (Lambda logs: the first tier)
}

// SQSChunk, EventChunk and HTTPAPIChunk are the payload sizes one billed request or event covers.
const (
	SQSChunk     = 64 * 1024
	EventChunk   = 64 * 1024
	HTTPAPIChunk = 512 * 1024
)

// USEast1 are the us-east-1 list prices the figures use (arm64 Lambda, as infra/ deploys). Not
// fetched: change the date with the figures.
var USEast1 = Table{
	Date:         "2025-06-01",
	Region:       "us-east-1",
	Architecture: "arm64",

	DynamoDBWrite: Price{USD: 0.625, Per: 1e6, Unit: "write request unit", Page: "Amazon DynamoDB pricing for on-demand capacity"},
	DynamoDBRead:  Price{USD: 0.125, Per: 1e6, Unit: "read request unit", Page: "Amazon DynamoDB pricing for on-demand capacity"},
	SQSRequest:    Price{USD: 0.40, Per: 1e6, Unit: "request (64 KB chunk), standard queue", Page: "Amazon SQS pricing"},
	LambdaRequest: Price{USD: 0.20, Per: 1e6, Unit: "request", Page: "AWS Lambda pricing"},
	LambdaCompute: Price{USD: 0.0000133334, Per: 1, Unit: "GB-second, Arm, first tier", Page: "AWS Lambda pricing"},
	HTTPAPI:       Price{USD: 1.00, Per: 1e6, Unit: "HTTP API request (512 KB chunk), first 300 million", Page: "Amazon API Gateway pricing"},
	Scheduler:     Price{USD: 1.00, Per: 1e6, Unit: "scheduled invocation", Page: "Amazon EventBridge pricing (Scheduler)"},
	StepFunctions: Price{USD: 0.025, Per: 1000, Unit: "state transition, Standard workflows", Page: "AWS Step Functions pricing"},
	EventBridge:   Price{USD: 1.00, Per: 1e6, Unit: "custom event (64 KB chunk) put on a bus", Page: "Amazon EventBridge pricing"},
	LogsIngested:  Price{USD: 0.50, Per: 1, Unit: "GB ingested (Lambda logs, first tier)", Page: "Amazon CloudWatch pricing"},
}

// FunctionMemoryMB is the memory size each Lambda function is deployed with unless
// infra/env/<env>.yaml says otherwise: infra's defaults, which an infra test keeps equal to this.
var FunctionMemoryMB = map[string]int{
	"api":      256,
	"ingest":   256,
	"prepare":  512,
	"send":     512,
	"record":   256,
	"cleanup":  256,
	"bounce":   256,
	"campaign": 512,
	"audience": 512,
	"export":   512,
}

// DefaultMemoryMB is the size of a function FunctionMemoryMB does not name (infra's default too).
const DefaultMemoryMB = 256

// MemoryMB is function's memory size.
func MemoryMB(function string) int {
	if m, ok := FunctionMemoryMB[function]; ok {
		return m
	}
	return DefaultMemoryMB
}
