package notify

import (
	"sync"
	"sync/atomic"
)

// Concurrently calls fn(i) for every i in [0, n), at most limit calls at once (all at once when
// limit ≤ 0), and returns each call's error at its index. It waits for every call. A single
// call runs on the caller's goroutine; otherwise min(n, limit) goroutines each take the next i.
func Concurrently(n, limit int, fn func(i int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = fn(0)
		return errs
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range limit {
		wg.Go(func() {
			growStack()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				errs[i] = fn(i)
			}
		})
	}
	wg.Wait()
	return errs
}

// growStack grows the calling goroutine's stack to 32 KiB in one step. A goroutine starts with
// 2 KiB and doubles its stack whenever a call needs more, copying it and adjusting every frame
// on it; a stage's work for one message (SQLite's statement engine, the JSON decoder) needs
// tens of KiB, so each goroutine started for it paid three or four copies of ever fuller
// stacks — 4 % of the CPU of a stream of single sends. Grown while nearly empty, it is copied
// once, cheaply.
//
//go:noinline
func growStack() {
	var frame [16 << 10]byte
	stackUse(&frame)
}

// stackUse keeps growStack's frame from being optimized away.
//
//go:noinline
func stackUse(*[16 << 10]byte) {}
