package sqsfake

import (
	"crypto/rand"
	"fmt"
	"time"
)

type moveTask struct {
	TaskHandle                        string `json:",omitempty"`
	Status                            string
	SourceArn                         string
	DestinationArn                    string `json:",omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:",omitempty"`
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove int64
	FailureReason                     string `json:",omitempty"`
	StartedTimestamp                  int64
}

type startMoveReq struct {
	SourceArn                    string
	DestinationArn               string
	MaxNumberOfMessagesPerSecond *int
}

var errNoResource = errorf("ResourceNotFoundException", "ResourceNotFoundException", "The specified resource does not exist.")

// startMoveTask moves the DLQ's available messages to DestinationArn, or each back to the queue
// it dead-lettered from, with receive counts reset. SQS runs the task in the background; the
// fake finishes it before answering, so ListMessageMoveTasks reports it completed. In-flight
// messages stay, as a task cannot receive them; messages that never dead-lettered (sent to the
// DLQ directly) stay too when there is no DestinationArn, and the task ends FAILED.
func (s *Server) startMoveTask(c *call, req *startMoveReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.queueByArn(req.SourceArn)
	if src == nil {
		return nil, errNoResource
	}
	var dst *queue
	if req.DestinationArn != "" {
		if dst = s.queueByArn(req.DestinationArn); dst == nil {
			return nil, errNoResource
		}
	}
	isDLQ := false
	for _, q := range s.queues {
		isDLQ = isDLQ || q.dlqArn == src.arn
	}
	if !isDLQ && dst == nil {
		return nil, invalid("Source queue must be configured as a Dead Letter Queue.")
	}
	if r := req.MaxNumberOfMessagesPerSecond; r != nil && (*r < 1 || *r > 500) {
		return nil, invalid("Value %d for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500.", *r)
	}
	now := time.Now()
	task := &moveTask{TaskHandle: newID(), SourceArn: src.arn, DestinationArn: req.DestinationArn,
		MaxNumberOfMessagesPerSecond: req.MaxNumberOfMessagesPerSecond, StartedTimestamp: now.UnixMilli(), Status: "COMPLETED"}
	kept, stuck := src.msgs[:0], 0
	for _, m := range src.msgs {
		if m.visibleAt.After(now) {
			kept = append(kept, m)
			continue
		}
		task.ApproximateNumberOfMessagesToMove++
		target := dst
		if target == nil {
			target = s.queueByArn(m.source)
		}
		if target == nil || target == src {
			stuck++
			kept = append(kept, m)
			continue
		}
		m.received, m.receipt, m.source, m.firstRecv, m.visibleAt = 0, "", "", time.Time{}, now
		s.enqueue(target, m)
		task.ApproximateNumberOfMessagesMoved++
	}
	clear(src.msgs[len(kept):])
	src.msgs = kept
	if stuck > 0 {
		task.Status = "FAILED"
		task.FailureReason = fmt.Sprintf("%d messages have no source queue to return to; specify DestinationArn", stuck)
	}
	s.tasks[src.arn] = append(s.tasks[src.arn], task)
	return map[string]string{"TaskHandle": task.TaskHandle}, nil
}

type listMoveReq struct {
	SourceArn  string
	MaxResults *int
}

func (s *Server) listMoveTasks(c *call, req *listMoveReq) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queueByArn(req.SourceArn) == nil {
		return nil, errNoResource
	}
	n := 1
	if req.MaxResults != nil {
		n = *req.MaxResults
	}
	if n < 1 || n > 10 {
		return nil, invalid("Value %d for parameter MaxResults is invalid. Reason: Must be between 1 and 10.", n)
	}
	tasks := s.tasks[req.SourceArn]
	out := []moveTask{}
	for i := len(tasks) - 1; i >= 0 && len(out) < n; i-- {
		t := *tasks[i]
		if t.Status != "RUNNING" {
			t.TaskHandle = "" // SQS returns the handle of running tasks only
		}
		out = append(out, t)
	}
	return map[string]any{"Results": out}, nil
}

// newID returns a random UUID (version 4), the form of SQS message ids.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
