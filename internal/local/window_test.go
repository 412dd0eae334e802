package local

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqlite"
)

// A consumer with a batching window hands over what arrived within it as one batch, as Lambda's
// event source mapping does; without one, what is there at once.
func TestBatchingWindowGathersABatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		window  time.Duration
		batches int
	}{{0, 2}, {3 * time.Second, 1}} { // without a window: at least two batches (sends 150 ms apart)
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: "ingest-orders", MaxReceiveCount: 5}}, notify.SystemClock{})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var sizes []int
		handled := make(chan struct{}, 10)
		h := pipeline.Handler(func(_ context.Context, msgs []notify.Message) []pipeline.ItemFailure {
			mu.Lock()
			sizes = append(sizes, len(msgs))
			mu.Unlock()
			for range msgs {
				handled <- struct{}{}
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			worker(ctx, q, Consumer{Queue: "ingest-orders", DLQ: "ingest-orders-dlq", BatchSize: 10, Visibility: time.Minute,
				Window: c.window, Handler: h}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
		for range 3 {
			if err := q.Send(ctx, "ingest-orders", notify.OutMessage{Body: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
		}
		for range 3 {
			select {
			case <-handled:
			case <-time.After(5 * time.Second):
				t.Fatalf("window %v: messages not handled", c.window)
			}
		}
		cancel()
		<-done
		q.Close()
		db.Close()
		mu.Lock()
		if c.window > 0 && len(sizes) != c.batches || c.window == 0 && len(sizes) < c.batches {
			t.Errorf("window %v: batches %v, want %d", c.window, sizes, c.batches)
		}
		mu.Unlock()
	}
}
