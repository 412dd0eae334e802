package contract

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	herald "herald/clients/go"
	"herald/internal/sqs/sqsfake"
)

// BenchmarkGoClientSQS measures the Go client's SQS transport: b.N sends from 50 callers at once
// to the SQS fake over HTTP, gathered into SendMessageBatch calls of 10. It reports messages a
// second and the CPU the whole process spent per 10,000 messages (the client, the SDK and the
// fake together: an upper bound of the client's own).
func BenchmarkGoClientSQS(b *testing.B) {
	fake := sqsfake.New()
	srv := httptest.NewServer(fake)
	defer func() { fake.Close(); srv.Close() }()
	ctx := context.Background()
	api := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("herald-bench-ingest-orders")})
	if err != nil {
		b.Fatal(err)
	}
	q := herald.NewSQS(api, aws.ToString(out.QueueUrl), "orders", herald.SQSOptions{})
	defer q.Close(ctx)
	const callers = 50
	var cpu0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu0)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for c := range callers {
		wg.Go(func() {
			for i := c; i < b.N; i += callers {
				r := pushTo(fmt.Sprintf("bench-%d", i), fmt.Sprintf("user-%d", i))
				if _, err := q.Send(ctx, r); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	var cpu1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu1)
	used := time.Duration(cpu1.Utime.Nano()+cpu1.Stime.Nano()-cpu0.Utime.Nano()-cpu0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(used.Milliseconds())*10000/float64(b.N), "cpu-ms/10k-msgs")
}
