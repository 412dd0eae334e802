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
