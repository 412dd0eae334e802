// Package heapfloor keeps the garbage collector's heap goal from falling below a floor.
//
// Go starts a collection when the heap has grown by GOGC percent over what the last one found
// live. A process whose live heap is small but which allocates fast — the local runtime during a
// large send: about 20 MB live, 2 GB allocated per 100,000 pushes — then collects dozens of
// times a second, and each cycle also preempts and scans every goroutine (docs/design.md §3,
// "one process, its collector"). Keep raises GOGC after each cycle just enough that the next
// goal is at least the floor, and gives it back when the live heap outgrows the floor: the
// process holds at most the floor in garbage more than Go's default would, never a multiple of
// its live heap (as a higher GOGC would). Unlike a ballast, it leaves every heap statistic true.
package heapfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapMinimum is the runtime's smallest heap goal at GOGC=100 (4 MiB); it scales with GOGC, so a
// GOGC set for a small live heap must not raise it above the floor on its own.
const heapMinimum = 4 << 20

// Percent is the GOGC that makes the next heap goal at least floor, and never below base (the
// process's own GOGC). The runtime's goal after a cycle is live + (live + stacks + globals) ×
// GOGC/100, and at least 4 MiB × GOGC/100; scan is live + stacks + globals, the bytes GOGC
// multiplies.
func Percent(live, scan, floor uint64, base int) int {
	if scan == 0 || floor <= live {
		return base
	}
	p := int(math.Ceil(float64(floor-live) * 100 / float64(scan)))
	p = min(p, int(floor*100/heapMinimum)) // the minimum goal, scaled by p, stays within the floor
	return max(p, base)
}

var (
	mu      sync.Mutex
	current *keeper // the one floor in force, nil if none
)

type keeper struct {
	floor   uint64
	base    int
	stopped bool
	sample  []metrics.Sample
}

// Keep holds the heap goal at or above floor bytes from the next collection on, until stop is
// called, which restores the GOGC the process had. base is that GOGC (100 unless the
// environment set another). A later Keep replaces an earlier one.
func Keep(floor uint64) (stop func()) {
	mu.Lock()
	defer mu.Unlock()
	var base int
	if current != nil { // the GOGC in force is the earlier floor's; the process's own is its base
		base = current.base
		current.stopped = true
		current = nil
		debug.SetGCPercent(base)
	} else {
		base = debug.SetGCPercent(100)
		debug.SetGCPercent(base)
	}
	if base < 0 { // GOGC=off: nothing to raise
		return func() {}
	}
	k := &keeper{floor: floor, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	current = k
	k.arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if k.stopped {
			return
		}
		k.stopped = true
		current = nil
		debug.SetGCPercent(k.base)
	}
}

// arm places a fresh object that only the next collection can find unreachable; its finalizer
// runs after that cycle, sets the GOGC for the one after, and arms again.
func (k *keeper) arm() {
	sentinel := new([16]byte) // large enough not to share a tiny-allocator block with others
	runtime.SetFinalizer(sentinel, func(*[16]byte) { k.afterCycle() })
}

func (k *keeper) afterCycle() {
	mu.Lock()
	defer mu.Unlock()
	if k.stopped {
		return
	}
	metrics.Read(k.sample)
	var v [3]uint64
	for i, s := range k.sample {
		if s.Value.Kind() != metrics.KindUint64 { // not this Go's metric: leave GOGC as it is
			k.arm()
			return
		}
		v[i] = s.Value.Uint64()
	}
	debug.SetGCPercent(Percent(v[0], v[0]+v[1]+v[2], k.floor, k.base))
	k.arm()
}
