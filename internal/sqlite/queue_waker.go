package sqlite

import (
	"sync"
	"time"
)

// queueWaker lets Receive calls wait on one queue without polling SQLite. Waiters line up
// first-in first-out; whatever may have made a message visible wakes one of them: Send,
// ChangeVisibility(0), Redrive and DLQ moves directly, delays and expiring visibility through
// one timer per queue. A woken receiver that fills its batch wakes the next one, so a burst
// drains through as many waiters as it needs instead of stampeding all of them into the single
// writer connection. A waiter that is woken but leaves without looking passes the wake-up on,
// so none is lost.
type queueWaker struct {
	mu      sync.Mutex
	waiting []*queueWaiter
	timer   *time.Timer
	timerAt time.Time // when the timer fires; zero when it is not set
	closed  bool
	fire    func() // run by the timer; calls fired, then signal or wakeIn
}

type queueWaiter struct {
	ch       chan struct{} // receives one token when signalled
	signaled bool          // guarded by queueWaker.mu; set when taken off the line
}

// add puts a new waiter at the end of the line.
func (w *queueWaker) add() *queueWaiter {
	x := &queueWaiter{ch: make(chan struct{}, 1)}
	w.mu.Lock()
	w.waiting = append(w.waiting, x)
	w.mu.Unlock()
	return x
}

// leave takes x off the line. If x was already woken it will not act on it, so the wake-up goes
// to the next waiter (at worst a spurious look, never a missed message).
func (w *queueWaker) leave(x *queueWaiter) {
	w.mu.Lock()
	if !x.signaled {
		for i, y := range w.waiting {
			if y == x {
				w.waiting = append(w.waiting[:i], w.waiting[i+1:]...)
				break
			}
		}
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.signal(1)
}

// signal wakes up to n waiters, oldest first.
func (w *queueWaker) signal(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ; n > 0 && len(w.waiting) > 0; n-- {
		x := w.waiting[0]
		w.waiting[0] = nil
		w.waiting = w.waiting[1:]
		x.signaled = true
		x.ch <- struct{}{} // cannot block: one token per waiter, buffer of one
	}
}

// wakeIn makes the timer fire within d, unless it is already set to fire sooner.
func (w *queueWaker) wakeIn(d time.Duration) {
	d = max(d, 0)
	at := time.Now().Add(d)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || (!w.timerAt.IsZero() && !at.Before(w.timerAt)) {
		return
	}
	w.timerAt = at
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
}

// fired marks the timer as not set and reports whether anyone is waiting for it to matter.
func (w *queueWaker) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timerAt = time.Time{}
	return !w.closed && len(w.waiting) > 0
}

func (w *queueWaker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timerAt = time.Time{}
}
