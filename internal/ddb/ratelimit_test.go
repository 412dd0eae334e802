package ddb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"herald/internal/notify"
	"herald/internal/notify/ratelimittest"
	"herald/internal/ratelimit"
)

var suiteRate = ratelimit.Rate{PerSecond: 200, Burst: 20}

// rateLimitTable gives the test its own limiter table in DynamoDB Local, or skips the test.
func rateLimitTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	ep := os.Getenv("HERALD_DYNAMODB_ENDPOINT")
	if ep == "" {
		t.Skip("HERALD_DYNAMODB_ENDPOINT not set: `make test` starts DynamoDB Local and sets it (or run scripts/dynamodb-local.sh start and export its endpoint)")
	}
	client := dynamodb.New(dynamodb.Options{
		Region:                          "us-east-1",
		Credentials:                     credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:                    aws.String(ep),
		DisableValidateResponseChecksum: true,
	})
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	table := fmt.Sprintf("ratelimit-%s-%d", name, time.Now().UnixNano())
	if err := CreateRateLimitTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return client, table
}

func TestRateLimiterConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, int(suiteRate.PerSecond), func(t *testing.T) notify.RateLimiter {
		client, table := rateLimitTable(t)
		return NewRateLimiter(client, table, map[string]ratelimit.Rate{"k": suiteRate}, nil)
	})
}

func TestCreateRateLimitTableIsIdempotent(t *testing.T) {
	t.Parallel()
	client, table := rateLimitTable(t)
	if err := CreateRateLimitTable(t.Context(), client, table); err != nil {
		t.Fatalf("second CreateRateLimitTable: %v", err)
	}
	out, err := client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires" {
		t.Fatalf("TTL = %+v, want on attribute expires", out.TimeToLiveDescription)
	}
}

// windows reads every window item of the table: key → units used.
func windows(t *testing.T, client *dynamodb.Client, table string) map[string]int {
	t.Helper()
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			k := item["key"].(*types.AttributeValueMemberS).Value
			n, err := strconv.Atoi(item["used"].(*types.AttributeValueMemberN).Value)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := item["expires"].(*types.AttributeValueMemberN); !ok {
				t.Errorf("item %s has no expires attribute", k)
			}
			out[k] = n
		}
	}
	return out
}

func TestRateLimiterSplitsLargeRequestsAcrossWindows(t *testing.T) {
	t.Parallel()
	client, table := rateLimitTable(t)
	l := NewRateLimiter(client, table, map[string]ratelimit.Rate{"k": suiteRate}, nil)
	if err := l.Wait(t.Context(), "k", 50); err != nil {
		t.Fatal(err)
	}
	ws := windows(t, client, table)
	total := 0
	for k, used := range ws {
		if used > suiteRate.Burst {
			t.Errorf("window %s used %d, allowance %d", k, used, suiteRate.Burst)
		}
		total += used
	}
	if total != 50 || len(ws) < 3 {
		t.Fatalf("50 units took %d units in %d windows (%v); want 50 in at least 3", total, len(ws), ws)
	}
}

// Several processes (Lambdas) share one table; units that do not divide the allowance make
// them split windows. No window may ever hold more than its allowance.
func TestRateLimiterSharedBetweenProcesses(t *testing.T) {
	t.Parallel()
	client, table := rateLimitTable(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		l := NewRateLimiter(client, table, map[string]ratelimit.Rate{"fcm": suiteRate}, nil)
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if l.Wait(ctx, "fcm:app", 3) == nil {
						passed.Add(3)
					}
				}
			})
		}
	}
	wg.Wait()
	if passed.Load() == 0 {
		t.Fatal("nothing passed the limiter")
	}
	t.Logf("%d units passed in 1 s at %v/s, burst %d, through 3 processes", passed.Load(), suiteRate.PerSecond, suiteRate.Burst)
	total := 0
	for k, used := range windows(t, client, table) {
		if !strings.HasPrefix(k, "fcm:app#") {
			t.Errorf("unexpected item %s", k)
		}
		if used > suiteRate.Burst {
			t.Errorf("window %s used %d, allowance %d", k, used, suiteRate.Burst)
		}
		total += used
	}
	if int64(total) < passed.Load() {
		t.Fatalf("%d units passed but only %d were counted", passed.Load(), total)
	}
}

func TestRateLimiterWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate      ratelimit.Rate
		size      time.Duration
		allowance int
	}{
		{ratelimit.Rate{PerSecond: 200, Burst: 20}, 100 * time.Millisecond, 20},
		{ratelimit.Rate{PerSecond: 200}, 100 * time.Millisecond, 20},               // default burst PerSecond/10
		{ratelimit.Rate{PerSecond: 200, Burst: 100}, 500 * time.Millisecond, 100},  // a larger burst is a longer window
		{ratelimit.Rate{PerSecond: 10000, Burst: 5}, 100 * time.Millisecond, 1000}, // stretched to MinRateWindow
		{ratelimit.Rate{PerSecond: 14, Burst: 1}, 142857142 * time.Nanosecond, 2},  // whole units: 2 per 1/7 s
		{ratelimit.Rate{PerSecond: 1}, time.Second, 1},                             // default burst at least 1
		{ratelimit.Rate{PerSecond: 0.5, Burst: 1}, 2 * time.Second, 1},
	}
	for _, tt := range tests {
		w := rateWindow(tt.rate)
		if w.allowance != tt.allowance || (w.size-tt.size).Abs() > time.Microsecond {
			t.Errorf("%+v: window %v allowing %d, want %v allowing %d", tt.rate, w.size, w.allowance, tt.size, tt.allowance)
		}
		// The sustained rate is exactly the configured one.
		if got := float64(w.allowance) / w.size.Seconds(); got < tt.rate.PerSecond*0.999 || got > tt.rate.PerSecond*1.001 {
			t.Errorf("%+v: %v units/s", tt.rate, got)
		}
	}
}

func TestRateLimiterUnlimitedKeysNeverCallDynamoDB(t *testing.T) {
	t.Parallel()
	// A nil client would panic if any of these touched DynamoDB.
	l := NewRateLimiter(nil, "unused", map[string]ratelimit.Rate{"fcm": {PerSecond: 1}, "fcm:vip": {PerSecond: 1000}, "apns": {PerSecond: 0}}, nil)
	for _, key := range []string{"ses:default", "apns:app", ""} {
		if err := l.Wait(t.Context(), key, 1_000_000); err != nil {
			t.Fatalf("Wait(%q): %v", key, err)
		}
	}
	if err := l.Wait(t.Context(), "fcm:x", 0); err != nil {
		t.Fatalf("Wait for 0 units: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Wait(ctx, "ses:default", 1); err == nil {
		t.Fatal("Wait with a canceled context returned nil")
	}
	if w := l.spec("fcm:vip:app"); w == nil || w.allowance != 100 {
		t.Fatalf("fcm:vip:app window %+v, want the longer prefix's (100 per 100 ms)", w)
	}
	if w := l.spec("fcm:default"); w == nil || w.size != time.Second {
		t.Fatalf("fcm:default window %+v, want fcm's (1 per second)", w)
	}
}
