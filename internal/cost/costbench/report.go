package costbench

import (
	"fmt"
	"io"

	"herald/internal/cost"
)

// Print writes every scenario's bill with t, and what the figures rest on.
func (r *Result) Print(w io.Writer, t cost.Table) {
	for _, s := range r.Scenarios {
		total := cost.Print(w, s.Title, s.Usage, t)
		var sqs int64
		for _, v := range s.Usage.SQSRequests {
			sqs += v
		}
		fmt.Fprintf(w, "    = $%.2f per million recipients; %.2f store items written per recipient (WriteCounter), %d pushes received, %v\n\n",
			total, float64(s.StoreWrites)/float64(s.Usage.Recipients), s.Deliveries, s.Wall.Round(100_000_000))
	}
	req, usd := cost.IdlePolling(r.Mappings, t)
	fmt.Fprintf(w, "Fixed, not per recipient: %d SQS event source mappings polled when idle (%d pollers each, %d s long polls) ≈ %.0f empty receives ≈ $%.2f a month; empty receives during the runs are not billed above.\n",
		r.Mappings, cost.IdlePollers, cost.LongPollSecs, req, usd)
	fmt.Fprintf(w, "Prices: %s list prices of %s, Lambda %s (internal/cost/prices.go); free tiers ignored.\n", t.Region, t.Date, t.Architecture)
	fmt.Fprintln(w, "Lambda duration is each handler invocation's wall time on this machine (JSON in and out, DynamoDB Local, the fakes and the sandbox on the same cores), rounded up to 1 ms, at the deployed memory sizes.")
	fmt.Fprintln(w, "DynamoDB units are the consumed capacity DynamoDB Local returned (ReturnConsumedCapacity TOTAL on every request); transactions at least 2 units per item, failed conditional writes from item sizes.")
	fmt.Fprintln(w, "Step Functions transitions are the states the campaign state machine's definition entered (Map iterations and retries included), run by internal/stackbox/asl.")
	fmt.Fprintln(w, "CloudWatch Logs counts what the handlers log (slog JSON, embedded-format metrics) and API Gateway's access log line per request; Lambda's own START/END/REPORT lines are not counted.")
	fmt.Fprintln(w, "Sends are produced as fast as they go, so receive batches are as full as a burst fills them; a trickle fills them less (more receives, deletes and invocations per recipient).")
}
