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
	Workers(n, limit, func(_, i int) { errs[i] = fn(i) })
	return errs
}

// Workers calls fn(w, i) for every i in [0, n) as Concurrently does, w being the worker making
// the call: 0 ≤ w < min(n, limit), and one worker makes one call at a time, so fn may keep
// state per worker in a slice indexed by w. It waits for every call.
func Workers(n, limit int, fn func(w, i int)) {
	if n == 1 {
		fn(0, 0)
		return
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range limit {
		wg.Go(func() {
			growStack()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(w, i)
			}
		})
	}
	wg.Wait()
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
