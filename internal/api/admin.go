package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// Queue operations for the on-call operator: depth of every queue and its DLQ, the dead letters
// with their reasons and masked payloads, and redrive. Only services listed in
// Options.AdminServices may call them.

type queueView struct {
	Name        string            `json:"name"`
	Stats       notify.QueueStats `json:"stats"`
	DeadLetters int               `json:"dead_letters"`
	// Paused is whether the queue's consumers are paused; absent where the runtime cannot say.
	Paused *bool `json:"paused,omitempty"`
}

func (s *server) requireAdmin(r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	if s.admin == nil {
		return notify.Errorf(notify.ENOTFOUND, "queue operations are not available here")
	}
	return nil
}

func (s *server) knownQueue(name string) error {
	if !slices.Contains(s.queues, name) {
		return notify.FieldError("queue", "unknown queue %q (GET /v1/admin/queues lists them)", name)
	}
	return nil
}

func (s *server) listQueues(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireAdmin(r); err != nil {
		return err
	}
	out := make([]queueView, 0, len(s.queues))
	for _, q := range s.queues {
		st, err := s.admin.Stats(r.Context(), q)
		if err != nil {
			return err
		}
		dl, err := s.admin.Stats(r.Context(), notify.DLQName(q))
		if err != nil {
			return err
		}
		v := queueView{Name: q, Stats: st, DeadLetters: dl.Visible + dl.InFlight + dl.Delayed}
		if s.consumers != nil {
			if p, err := s.consumers.Paused(r.Context(), q); err == nil {
				v.Paused = &p
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": out})
	return nil
}

type deadLetter struct {
	ID           string          `json:"id"`
	Code         string          `json:"code,omitempty"`
	Error        string          `json:"error,omitempty"`
	SourceQueue  string          `json:"source_queue,omitempty"`
	ReceiveCount int             `json:"receive_count"`
	SentAt       time.Time       `json:"sent_at"`
	Payload      json.RawMessage `json:"payload"` // masked: no token, email or phone
}

func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireAdmin(r); err != nil {
		return err
	}
	q := r.PathValue("queue")
	if err := s.knownQueue(q); err != nil {
		return err
	}
	limit, err := queryLimit(r, 10, 1000)
	if err != nil {
		return err
	}
	msgs, err := s.admin.Peek(r.Context(), notify.DLQName(q), limit)
	if err != nil {
		return err
	}
	out := make([]deadLetter, 0, len(msgs))
	for _, m := range msgs {
		// A message Herald dead-lettered carries the count it died with; one the queue moved
		// itself (maxReceiveCount) keeps its own.
		receives := m.ReceiveCount
		if n, err := strconv.Atoi(m.Attributes[pipeline.AttrReceiveCount]); err == nil {
			receives = n
		}
		out = append(out, deadLetter{
			ID: m.ID, Code: m.Attributes[pipeline.AttrErrorCode], Error: m.Attributes[pipeline.AttrErrorReason],
			SourceQueue: m.Attributes[pipeline.AttrSourceQueue], ReceiveCount: receives, SentAt: m.SentAt,
			Payload: MaskPayload(m.Body),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "dead_letters": out})
	return nil
}

func (s *server) redrive(w http.ResponseWriter, r *http.Request) (err error) {
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditQueueRedrive, notify.AuditTargetQueue, r.PathValue("queue"), params, &err)
	if err := s.requireAdmin(r); err != nil {
		return err
	}
	q := r.PathValue("queue")
	if err := s.knownQueue(q); err != nil {
		return err
	}
	n, err := s.admin.Redrive(r.Context(), notify.DLQName(q))
	if err != nil {
		return err
	}
	params["moved"] = strconv.Itoa(n)
	s.log.InfoContext(r.Context(), "dead letters redriven", "queue", q, "moved", n, "by", serviceOf(r))
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "moved": n})
	return nil
}

// MaskPayload returns body with every device token, email address and phone number masked
// (notify.MaskPayload).
func MaskPayload(body []byte) json.RawMessage { return notify.MaskPayload(body) }

// pauseQueue and resumeQueue are POST /v1/admin/queues/{queue}/pause and /resume: the queue's
// consumers stop receiving (their messages wait) or start again. Audited.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, true)
}
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, false)
}

func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) (err error) {
	action := notify.AuditQueueResume
	if paused {
		action = notify.AuditQueuePause
	}
	defer s.audit(w, r, action, notify.AuditTargetQueue, r.PathValue("queue"), nil, &err)
	if err := s.requireAdmin(r); err != nil {
		return err
	}
	q := r.PathValue("queue")
	if err := s.knownQueue(q); err != nil {
		return err
	}
	if s.consumers == nil {
		writeNotImplemented(w, "pausing a queue's consumers is not available in this runtime")
		return nil
	}
	if err := s.consumers.SetPaused(r.Context(), q, paused); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "queue consumers "+map[bool]string{true: "paused", false: "resumed"}[paused], "queue", q, "by", serviceOf(r))
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "paused": paused})
	return nil
}

// queueMessage is a message of a queue as the operator sees it: its payload masked.
type queueMessage struct {
	ID           string          `json:"id"`
	ReceiveCount int             `json:"receive_count"`
	SentAt       time.Time       `json:"sent_at"`
	Payload      json.RawMessage `json:"payload"`
}

// listQueueMessages is GET /v1/admin/queues/{queue}/messages?state=visible|in_flight|delayed:
// a page of the queue's messages in that state, oldest first, payloads masked. A runtime whose
// queue cannot list messages without taking them from their consumers (SQS) answers 501.
func (s *server) listQueueMessages(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireAdmin(r); err != nil {
		return err
	}
	q := r.PathValue("queue")
	if err := s.knownQueue(q); err != nil {
		return err
	}
	b, ok := s.admin.(notify.QueueBrowser)
	if !ok {
		writeNotImplemented(w, "SQS shows a message only by receiving it, which would take it from its consumers: this runtime shows queue depths only")
		return nil
	}
	limit, err := queryLimit(r, 50, 200)
	if err != nil {
		return err
	}
	state := r.URL.Query().Get("state")
	if state == "" {
		state = notify.MessageVisible
	}
	page, next, err := b.Browse(r.Context(), q, state, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	out := make([]queueMessage, len(page))
	for i, m := range page {
		out[i] = queueMessage{ID: m.ID, ReceiveCount: m.ReceiveCount, SentAt: m.SentAt, Payload: MaskPayload(m.Body)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "state": state, "messages": out, "next_cursor": next})
	return nil
}
