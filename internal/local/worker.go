package local

import (
	"context"
	"log/slog"
	"sync"
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
	Handler        pipeline.Handler
	RetryBase      time.Duration
	RetryMax       time.Duration
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
		// The batch runs to completion even when shutdown begins: that is the drain.
		handle(context.WithoutCancel(ctx), q, c, msgs, log)
	}
}

// handle runs the stage on one batch and settles every message the way the Lambda glue does.
func handle(ctx context.Context, q notify.Queue, c Consumer, msgs []notify.Message, log *slog.Logger) {
	failures := safeHandle(ctx, c, msgs, log)
	failed := make(map[string]error, len(failures))
	for _, f := range failures {
		failed[f.MessageID] = f.Err
	}
	for _, m := range msgs {
		err := failed[m.ID]
		action, delay := pipeline.Settle(err, m.ReceiveCount, c.RetryBase, c.RetryMax)
		switch action {
		case pipeline.Done:
			if derr := q.Delete(ctx, c.Queue, m.ReceiptHandle); derr != nil && !notify.IsCode(derr, notify.ECONFLICT) {
				log.Error("delete failed", "queue", c.Queue, "message_id", m.ID, "error", derr)
			}
		case pipeline.Retry:
			log.Warn("message will be retried", "queue", c.Queue, "message_id", m.ID, "receive_count", m.ReceiveCount,
				"retry_in", delay, "code", notify.ErrorCode(err), "error", err.Error())
			if cerr := q.ChangeVisibility(ctx, c.Queue, m.ReceiptHandle, delay); cerr != nil && !notify.IsCode(cerr, notify.ECONFLICT) {
				log.Error("change visibility failed", "queue", c.Queue, "message_id", m.ID, "error", cerr)
			}
		case pipeline.DeadLetter:
			deadLetter(ctx, q, c, m, err, log)
		}
	}
}

// deadLetter copies a message that can never succeed to the DLQ with its reason, then deletes it.
func deadLetter(ctx context.Context, q notify.Queue, c Consumer, m notify.Message, err error, log *slog.Logger) {
	attrs := map[string]string{}
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[pipeline.AttrErrorCode] = notify.ErrorCode(err)
	attrs[pipeline.AttrErrorReason] = truncate(err.Error(), 1000)
	attrs[pipeline.AttrSourceQueue] = c.Queue
	if serr := q.Send(ctx, c.DLQ, notify.OutMessage{Body: m.Body, GroupID: m.GroupID, Attributes: attrs}); serr != nil {
		// Could not dead-letter: leave it on the queue; maxReceiveCount gets it to the DLQ anyway.
		log.Error("dead-letter failed; message stays for retry", "queue", c.Queue, "message_id", m.ID, "error", serr)
		_ = q.ChangeVisibility(ctx, c.Queue, m.ReceiptHandle, c.RetryBase)
		return
	}
	log.Error("message dead-lettered", "queue", c.Queue, "dlq", c.DLQ, "message_id", m.ID,
		"code", notify.ErrorCode(err), "error", err.Error())
	if derr := q.Delete(ctx, c.Queue, m.ReceiptHandle); derr != nil && !notify.IsCode(derr, notify.ECONFLICT) {
		log.Error("delete after dead-letter failed", "queue", c.Queue, "message_id", m.ID, "error", derr)
	}
}

// safeHandle turns a panicking stage into a failure of the whole batch (retried), never a crash.
func safeHandle(ctx context.Context, c Consumer, msgs []notify.Message, log *slog.Logger) (out []pipeline.ItemFailure) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("stage panicked", "queue", c.Queue, "panic", r)
			out = out[:0]
			for _, m := range msgs {
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EINTERNAL, "stage panicked: %v", r)})
			}
		}
	}()
	return c.Handler(ctx, msgs)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
