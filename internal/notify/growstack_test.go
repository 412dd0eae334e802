package notify

import (
	"sync"
	"testing"
)

// BenchmarkGrowStack is a goroutine started for a call that needs about 24 KiB of stack, as a
// stage's work for one message does: its stack doubled from 2 KiB at each deeper call ("plain")
// against grown once at the start ("grown", what Concurrently does).
func BenchmarkGrowStack(b *testing.B) {
	for _, grow := range []bool{false, true} {
		name := "plain"
		if grow {
			name = "grown"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				wg.Go(func() {
					if grow {
						growStack()
					}
					deepCall(80)
				})
				wg.Wait()
			}
		})
	}
}

// deepCall recurses n levels of about 300 bytes each.
//
//go:noinline
func deepCall(n int) int {
	var pad [256]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deepCall(n-1) + int(pad[n%len(pad)])
}
