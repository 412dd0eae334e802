package local

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// Consumer mirrors a Lambda SQS event source mapping: batch size, maximum concurrency,
// visibility timeout, partial batch failures, and the DLQ after maxReceiveCount (enforced by the
// queue itself).
type Consumer struct {
	Queue          string
	DLQ            string
	BatchSize      int
	MaxConcurrency int
	Visibility     time.Duration
	// Window is how long a batch is gathered before it is handled (a service's batching_window):
	// as Lambda's event source mapping, the batch goes once it is full or the window is over.
	Window    time.Duration
	Handler   pipeline.Handler
	RetryBase time.Duration
	RetryMax  time.Duration
	// Gate, when set, gives the realtime lane the machine: a Foreground consumer marks its
	// batches busy; a Background one holds off starting a batch while any is. A ByLane consumer
	// (ingest, whose queue carries both lanes) is Foreground but for a batch whose every message
	// says it takes the bulk lane (notify.AttrLane), which it handles as Background.
	Gate       *Gate
	Foreground bool
	Background bool
	ByLane     bool
	// Events hears of every message dead-lettered here (nil: none), as the Lambda glue's do.
	Events notify.Events
	// Paused, while set, keeps the workers from receiving: the queue's messages wait (an
	// operator's pause, Runtime.SetPaused). Batches in flight finish.
	Paused *atomic.Bool
}

// Gate is the local runtime's lane priority. In AWS each lane has its own Lambdas and nothing is
// shared; in one process on a small machine the bulk lane's batches compete with real-time ones
// for the CPU and the single SQLite writer, so bulk workers yield at batch boundaries: while a
// real-time batch is in flight they wait (up to MaxHold each time, so a steady real-time stream
// slows a campaign down but never stops it).
type Gate struct {
	MaxHold time.Duration
	// Linger keeps the gate closed this long after a real-time batch ends, so the next stage of
	// the same notification (its message is on the next queue by then) finds it still closed.
	Linger time.Duration
	busy   atomic.Int64
	last   atomic.Int64 // unix nanos of the last leave
}

func (g *Gate) enter() { g.busy.Add(1) }
func (g *Gate) leave() {
	g.last.Store(time.Now().UnixNano())
	g.busy.Add(-1)
}

func (g *Gate) closed() bool { return g.recent(g.Linger) }

// recent reports whether real-time work is in flight or ended within d.
func (g *Gate) recent(d time.Duration) bool {
	return g.busy.Load() > 0 || time.Since(time.Unix(0, g.last.Load())) < d
}

// yield waits while real-time work is in flight (or just was), up to MaxHold.
func (g *Gate) yield(ctx context.Context) {
	if !g.closed() {
		return
	}
	deadline := time.Now().Add(g.MaxHold)
	for g.closed() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// pool runs c's workers until ctx ends; in-flight batches finish (drain) before it returns.
func pool(ctx context.Context, q notify.Queue, c Consumer, log *slog.Logger, wg *sync.WaitGroup) {
	for i := 0; i < c.MaxConcurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(ctx, q, c, log)
		}()
	}
}

func worker(ctx context.Context, q notify.Queue, c Consumer, log *slog.Logger) {
	idle := 0
	for ctx.Err() == nil {
		if c.Paused != nil && c.Paused.Load() {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		msgs, err := q.Receive(ctx, c.Queue, c.BatchSize, c.Visibility, time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			idle++
			log.Error("receive failed", "queue", c.Queue, "error", err)
			sleep(ctx, time.Duration(min(idle, 10))*200*time.Millisecond)
			continue
		}
		idle = 0
		if len(msgs) == 0 {
			continue
		}
		if c.Paused != nil && c.Paused.Load() {
			// Paused while this receive waited: the messages go back, visible at once, untouched
			// but for their receive count.
			for _, m := range msgs {
				if err := q.ChangeVisibility(context.WithoutCancel(ctx), c.Queue, m.ReceiptHandle, 0); err != nil {
					log.Warn("a message received as the queue paused was not released; it is visible again after its timeout",
						"queue", c.Queue, "message_id", m.ID, "error", err)
				}
			}
			continue
		}
		msgs = gather(ctx, q, c, msgs, log)
		fg, bg := c.role(msgs)
		// The batch runs to completion even when shutdown begins: that is the drain.
		switch {
		case c.Gate != nil && fg:
			c.Gate.enter()
			handle(context.WithoutCancel(ctx), q, c, msgs, log)
			c.Gate.leave()
		case c.Gate != nil && bg:
			c.Gate.yield(ctx)
			handle(context.WithValue(context.WithoutCancel(ctx), gateKey{}, c.Gate), q, c, msgs, log)
		default:
			handle(context.WithoutCancel(ctx), q, c, msgs, log)
		}
	}
}

// role is whether c handles msgs as Foreground or Background work: a ByLane consumer's batch is
// Background when every message says it carries bulk-lane work (notify.AttrLane); a message that
// says nothing — a producer's, a reserved send's fire — counts as real-time.
func (c Consumer) role(msgs []notify.Message) (foreground, background bool) {
	if !c.ByLane || len(msgs) == 0 {
		return c.Foreground, c.Background
	}
	for _, m := range msgs {
		if m.Attributes[notify.AttrLane] != string(notify.LaneBulk) {
			return c.Foreground, c.Background
		}
	}
	return false, true
}

// handle runs the stage on one batch and settles every message the way the Lambda glue does
// (pipeline.SettleFailed); a message that succeeded is deleted, as the event source mapping does.
func handle(ctx context.Context, q notify.Queue, c Consumer, msgs []notify.Message, log *slog.Logger) {
	log = log.With("queue", c.Queue)
	failed := map[string]error{}
	for _, f := range pipeline.Run(ctx, c.Handler, msgs, log) {
		failed[f.MessageID] = f.Err
	}
	for _, m := range msgs {
		if err, ok := failed[m.ID]; ok && err != nil {
			pipeline.SettleFailed(ctx, q, c.Queue, c.DLQ, m, err, c.RetryBase, c.RetryMax, log, c.Events)
			continue
		}
		if derr := q.Delete(ctx, c.Queue, m.ReceiptHandle); derr != nil && !notify.IsCode(derr, notify.ECONFLICT) {
			log.Error("delete failed", "message_id", m.ID, "error", derr)
		}
	}
}

// gather adds to msgs, a batch's first messages, what arrives within the consumer's window,
// until the batch is full.
func gather(ctx context.Context, q notify.Queue, c Consumer, msgs []notify.Message, log *slog.Logger) []notify.Message {
	if c.Window <= 0 {
		return msgs
	}
	end := time.Now().Add(c.Window)
	for len(msgs) < c.BatchSize && ctx.Err() == nil {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		more, err := q.Receive(ctx, c.Queue, c.BatchSize-len(msgs), c.Visibility, min(left, time.Second))
		if err != nil {
			if ctx.Err() == nil {
				log.Error("receive failed", "queue", c.Queue, "error", err)
			}
			break
		}
		msgs = append(msgs, more...)
	}
	return msgs
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

type gateKey struct{}

// yieldSlice is how many messages a bulk batch sends between two yields to the realtime lane.
const yieldSlice = 20

// quietLane is how long the realtime lane must have been idle for a bulk batch to go in one
// call: slices cost the bulk lane about a tenth of its throughput (measured with `herald bench`),
// which buys nothing while no real-time work comes.
const quietLane = 5 * time.Second

// yielding sends a background batch in slices, yielding to real-time work between them, so a
// 500-token bulk batch does not hold the CPU against a password-reset push for its whole length.
// While the realtime lane has been quiet for quietLane the batch goes in one call: the first
// real-time send after such a lull may wait for it. Foreground batches (no gate in their
// context) go through in one call.
type yielding struct{ notify.Sender }

// yieldingOf wraps s in yielding, keeping what else the pipeline asks of it: reading late
// verdicts (notify.VerdictChecker).
func yieldingOf(s notify.Sender) notify.Sender {
	if c, ok := s.(notify.VerdictChecker); ok {
		return yieldingChecker{yielding{s}, c}
	}
	return yielding{s}
}

// yieldingChecker is yielding for a sender that reads late verdicts.
type yieldingChecker struct {
	yielding
	c notify.VerdictChecker
}

func (y yieldingChecker) MaxVerdictBatch() int { return y.c.MaxVerdictBatch() }
func (y yieldingChecker) Verdicts(ctx context.Context, qs []notify.VerdictQuery) ([]notify.SendResult, error) {
	return y.c.Verdicts(ctx, qs)
}

// SetRateLimiter passes the pipeline's limiter to a sender that paces itself (notify.SelfLimiting).
func (y yielding) SetRateLimiter(l notify.RateLimiter) {
	if sl, ok := y.Sender.(notify.SelfLimiting); ok {
		sl.SetRateLimiter(l)
	}
}

func (y yielding) Send(ctx context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	g, _ := ctx.Value(gateKey{}).(*Gate)
	if g == nil || len(msgs) <= yieldSlice || !g.recent(quietLane) {
		return y.Sender.Send(ctx, msgs)
	}
	out := make([]notify.SendResult, 0, len(msgs))
	for len(msgs) > 0 {
		part := msgs[:min(yieldSlice, len(msgs))]
		msgs = msgs[len(part):]
		g.yield(ctx)
		res, err := y.Sender.Send(ctx, part)
		if err == nil && len(res) != len(part) {
			err = notify.Errorf(notify.EINTERNAL, "%s sender returned %d results for %d messages", y.Provider(), len(res), len(part))
		}
		if err != nil { // this slice failed as a whole; the others keep their own results
			res = make([]notify.SendResult, len(part))
			for i := range part {
				res[i] = notify.SendResult{DeliveryID: part[i].DeliveryID, Err: err}
			}
		}
		out = append(out, res...)
	}
	return out, nil
}
