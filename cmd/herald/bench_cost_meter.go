//go:build costbench

package main

import (
	"context"
	"fmt"
	"io"

	"herald/internal/cost/costbench"
)

// The cost meter, linked only into a benchmarking herald (make bench builds one with
// -tags costbench): it runs the AWS handlers on the in-repository fakes.
func init() {
	costBench = func(ctx context.Context, o costBenchOptions, out io.Writer) error {
		res, err := costbench.Run(ctx, costbench.Options{DynamoDB: o.DynamoDB, Sends: o.Sends, Devices: o.Devices,
			Progress: o.Progress, Timeout: o.Timeout})
		if err != nil {
			return err
		}
		fmt.Fprintln(out)
		res.Print(out, o.Prices)
		return nil
	}
}
