package notify

import "sync"

// Concurrently calls fn(i) for every i in [0, n), at most limit calls at once (all at once when
// limit ≤ 0), and returns each call's error at its index. It waits for every call.
func Concurrently(n, limit int, fn func(i int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = fn(0)
		return errs
	}
	if limit <= 0 || limit > n {
		limit = n
	}
	slots := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errs
}
