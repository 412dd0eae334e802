package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, scan, floor uint64
		base, want        int
	}{
		{20 * mb, 20 * mb, 128 * mb, 100, 540},     // 20 + 20 × 5.4 = 128 MB
		{20 * mb, 24 * mb, 128 * mb, 100, 450},     // stacks and globals count in the goal
		{30 * mb, 30 * mb, 128 * mb, 100, 327},     // rounded up: never under the floor
		{64 * mb, 64 * mb, 128 * mb, 100, 100},     // GOGC's own goal is the floor already
		{100 * mb, 100 * mb, 128 * mb, 100, 100},   // above it: GOGC's
		{200 * mb, 200 * mb, 128 * mb, 100, 100},   // a live heap over the floor
		{20 * mb, 20 * mb, 128 * mb, 800, 800},     // the environment's GOGC is higher
		{0, 0, 128 * mb, 100, 100},                 // nothing measured yet
		{40 << 10, 400 << 10, 128 * mb, 100, 3200}, // a tiny heap: the scaled 4 MiB minimum is the floor
	} {
		got := Percent(c.live, c.scan, c.floor, c.base)
		if got != c.want {
			t.Errorf("Percent(%d, %d, %d MB, %d) = %d, want %d", c.live, c.scan, c.floor/mb, c.base, got, c.want)
		}
		goal := max(c.live+c.scan*uint64(got)/100, heapMinimum*uint64(got)/100)
		if c.scan > 0 && got > c.base && (goal < c.floor || goal > c.floor+c.scan/50+mb) {
			t.Errorf("Percent(%d, %d, %d MB, %d) = %d: goal %d, want the floor", c.live, c.scan, c.floor/mb, c.base, got, goal)
		}
	}
}

var sink []byte

// churn allocates total bytes of garbage in 64 KiB pieces and returns the collections it took.
func churn(total int) uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	for n := 0; n < total; n += 64 << 10 {
		sink = make([]byte, 64<<10)
	}
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestKeepCollectsLessAndStopRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100)) // the test binary's own GOGC, whatever it is
	debug.SetGCPercent(100)
	runtime.GC()
	// The baseline is the most of up to three runs: on a busy machine a cycle's mark phase can
	// last while so much garbage is allocated that one cycle spans what would be many (a CI run
	// once counted 9 collections without a floor, against 75–175 otherwise).
	var without uint64
	for range 3 {
		if without = max(without, churn(512<<20)); without >= 32 {
			break
		}
	}

	stop := Keep(128 << 20)
	runtime.GC() // the first cycle arms the floor for the ones after it
	runtime.GC()
	if p := gcPercent(); p <= 100 {
		t.Fatalf("GOGC with a floor over a small live heap = %d, want above 100", p)
	}
	// Measured again, up to three times, when one cycle spanned the whole churn: the same busy
	// machine that shortens the baseline can stretch one marked cycle over all 512 MB (a CI run
	// once counted 1 collection with the floor, the floor itself in force).
	var with uint64
	for range 3 {
		if with = churn(512 << 20); with >= 2 {
			break
		}
	}
	t.Logf("collections for 512 MB of garbage: %d without a floor, %d with 128 MB", without, with)
	// 2 to 8 is the floor's own bound (512 MB over 128 MB is 4 cycles). The ratio to the
	// baseline is checked only when the baseline is one a quiet machine gives (32 or more): a
	// busy one shortened it to 15 once, and 5 collections with the floor then read as a failure.
	if with < 2 || with > 8 || without >= 32 && with*4 > without {
		t.Errorf("with a 128 MB floor 512 MB of garbage took %d collections (%d without); want 2 to 8 (the floor, not more) and, against a full baseline, at most a quarter", with, without)
	}

	stop()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC after stop = %d, want 100 back", p)
	}
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC after stop and two collections = %d, want 100: the floor still acts", p)
	}
	stop() // twice is harmless
}

func TestKeepAgainReplaces(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	debug.SetGCPercent(150)
	first := Keep(256 << 20)
	runtime.GC()
	runtime.GC()
	second := Keep(64 << 20)
	first() // an old stop must not undo the floor in force
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p <= 150 {
		t.Errorf("GOGC under the second floor = %d, want above the base 150", p)
	}
	second()
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC after the second stop = %d, want the process's 150", p)
	}
}

func TestKeepWithGCOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	stop := Keep(128 << 20)
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != -1 {
		t.Errorf("GOGC = %d under a floor with GOGC=off, want -1 kept", p)
	}
	stop()
}
