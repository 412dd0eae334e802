package notify_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/notify"
)

// Every call runs once, never more than the limit at a time, and its error lands at its index.
func TestConcurrently(t *testing.T) {
	for _, limit := range []int{0, 1, 3, 50} {
		var running, most, calls atomic.Int64
		errs := notify.Concurrently(20, limit, func(i int) error {
			calls.Add(1)
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			if i%7 == 0 {
				return errors.New("odd one")
			}
			return nil
		})
		if calls.Load() != 20 || len(errs) != 20 {
			t.Fatalf("limit %d: %d calls, %d errors; want 20 of each", limit, calls.Load(), len(errs))
		}
		for i, err := range errs {
			if (err != nil) != (i%7 == 0) {
				t.Errorf("limit %d: errs[%d] = %v", limit, i, err)
			}
		}
		if limit > 0 && most.Load() > int64(limit) {
			t.Errorf("limit %d: %d calls at once", limit, most.Load())
		}
	}
	if errs := notify.Concurrently(0, 4, func(int) error { t.Fatal("called"); return nil }); len(errs) != 0 {
		t.Fatalf("n=0: %v", errs)
	}
}

// Each worker index is held by one call at a time and stays below min(n, limit), so state kept
// per worker needs no lock; every i is called once.
func TestWorkers(t *testing.T) {
	for _, tc := range []struct{ n, limit, workers int }{{1, 50, 1}, {20, 3, 3}, {5, 50, 5}, {7, 0, 7}} {
		busy := make([]atomic.Bool, tc.workers)
		var calls atomic.Int64
		seen := make([]atomic.Int32, tc.n)
		notify.Workers(tc.n, tc.limit, func(w, i int) {
			if w < 0 || w >= tc.workers {
				t.Errorf("n %d limit %d: worker %d", tc.n, tc.limit, w)
				return
			}
			if !busy[w].CompareAndSwap(false, true) {
				t.Errorf("n %d limit %d: worker %d in two calls at once", tc.n, tc.limit, w)
			}
			time.Sleep(time.Millisecond)
			busy[w].Store(false)
			calls.Add(1)
			seen[i].Add(1)
		})
		if calls.Load() != int64(tc.n) {
			t.Errorf("n %d limit %d: %d calls", tc.n, tc.limit, calls.Load())
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Errorf("n %d limit %d: i=%d called %d times", tc.n, tc.limit, i, seen[i].Load())
			}
		}
	}
}
