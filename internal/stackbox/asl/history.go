package asl

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// EventType names a history event.
type EventType string

// History event types, after Step Functions' own (TaskStateEntered…), one set for every state
// type.
const (
	ExecutionStarted   EventType = "ExecutionStarted"
	ExecutionSucceeded EventType = "ExecutionSucceeded"
	ExecutionFailed    EventType = "ExecutionFailed"
	StateEntered       EventType = "StateEntered"
	StateExited        EventType = "StateExited"
	// TaskScheduled: an integration is called (Resource, Input = the parameters, Attempt).
	TaskScheduled EventType = "TaskScheduled"
	TaskSucceeded EventType = "TaskSucceeded"
	TaskFailed    EventType = "TaskFailed"
	// RetryScheduled: a Task, Map or Parallel state failed with Error and is retried after Delay
	// (Attempt is the retry's number, from 1).
	RetryScheduled EventType = "RetryScheduled"
	// Caught: a Catch took the state's Error to Next.
	Caught              EventType = "Caught"
	WaitStarted         EventType = "WaitStarted"
	MapIterationStarted EventType = "MapIterationStarted"
	MapIterationEnded   EventType = "MapIterationEnded"
	MapIterationFailed  EventType = "MapIterationFailed"
)

// Event is one entry of a run's history.
type Event struct {
	Seq  int // from 1, in the order recorded
	Time time.Time
	Type EventType
	// State is the state's name; empty for execution events.
	State string
	// Scope locates the state: "" at the top level, "DispatchBatches[3]" inside the fourth
	// iteration of the Map DispatchBatches, "Fan.Branches[1]" inside a Parallel's second branch;
	// nested scopes are joined with "/".
	Scope    string
	Resource string          `json:",omitempty"`
	Input    json.RawMessage `json:",omitempty"`
	Output   json.RawMessage `json:",omitempty"`
	Error    string          `json:",omitempty"`
	Cause    string          `json:",omitempty"`
	Attempt  int             `json:",omitempty"`
	Delay    time.Duration   `json:",omitempty"`
	Next     string          `json:",omitempty"`
	Index    int             `json:",omitempty"` // Map iteration
}

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Seq, e.Type)
	if e.State != "" {
		fmt.Fprintf(&b, " %s", e.State)
	}
	if e.Scope != "" {
		fmt.Fprintf(&b, " (in %s)", e.Scope)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " %s: %s", e.Error, e.Cause)
	}
	if e.Delay > 0 {
		fmt.Fprintf(&b, " after %s", e.Delay)
	}
	if e.Next != "" {
		fmt.Fprintf(&b, " → %s", e.Next)
	}
	return b.String()
}

// History is a run's events. Safe for concurrent use (Map iterations record at once).
type History struct {
	mu     sync.Mutex
	events []Event
}

func (h *History) add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = len(h.events) + 1
	h.events = append(h.events, e)
}

// Events returns a copy of the events so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Count returns how many events of the type the named state has, in every scope ("" counts the
// type across all states).
func (h *History) Count(t EventType, stateName string) int {
	n := 0
	for _, e := range h.Events() {
		if e.Type == t && (stateName == "" || e.State == stateName) {
			n++
		}
	}
	return n
}

// Retries returns how many times the named state was retried, in every scope.
func (h *History) Retries(stateName string) int { return h.Count(RetryScheduled, stateName) }

// Path returns the states entered in the given scope ("" the top level), in order.
func (h *History) Path(scope string) []string {
	var out []string
	for _, e := range h.Events() {
		if e.Type == StateEntered && e.Scope == scope {
			out = append(out, e.State)
		}
	}
	return out
}

// String renders the history one event a line, for test failure messages.
func (h *History) String() string {
	var b strings.Builder
	for _, e := range h.Events() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}
