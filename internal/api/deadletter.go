package api

import (
	"net/http"
	"strconv"

	"herald/internal/notify"
)

// One dead letter at a time: an operator redrives the one message that can now succeed, or
// drops the one that never will, leaving the rest of the DLQ for later. Both are audited with
// the queue as target and the message id as a parameter.

func (s *server) deadLetters(r *http.Request) (notify.DeadLetters, string, error) {
	if err := s.requireAdmin(r); err != nil {
		return nil, "", err
	}
	q := r.PathValue("queue")
	if err := s.knownQueue(q); err != nil {
		return nil, "", err
	}
	dl, ok := s.admin.(notify.DeadLetters)
	if !ok {
		return nil, "", notify.Errorf(notify.ENOTFOUND, "single dead-letter operations are not available here")
	}
	return dl, q, nil
}

// redriveDeadLetter is POST /v1/admin/queues/{queue}/dead-letters/{message}/redrive.
func (s *server) redriveDeadLetter(w http.ResponseWriter, r *http.Request) (err error) {
	id := r.PathValue("message")
	defer s.audit(w, r, notify.AuditDeadLetterRedrive, notify.AuditTargetQueue, r.PathValue("queue"), map[string]string{"message_id": id}, &err)
	dl, q, err := s.deadLetters(r)
	if err != nil {
		return err
	}
	if err := dl.RedriveDeadLetter(r.Context(), notify.DLQName(q), id); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "dead letter redriven", "queue", q, "message_id", id, "by", serviceOf(r))
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "id": id, "moved": 1})
	return nil
}

// deleteDeadLetter is DELETE /v1/admin/queues/{queue}/dead-letters/{message}.
func (s *server) deleteDeadLetter(w http.ResponseWriter, r *http.Request) (err error) {
	id := r.PathValue("message")
	defer s.audit(w, r, notify.AuditDeadLetterDelete, notify.AuditTargetQueue, r.PathValue("queue"), map[string]string{"message_id": id}, &err)
	dl, q, err := s.deadLetters(r)
	if err != nil {
		return err
	}
	if err := dl.DeleteDeadLetter(r.Context(), notify.DLQName(q), id); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "dead letter deleted", "queue", q, "message_id", id, "by", serviceOf(r))
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "id": id, "deleted": true})
	return nil
}

// purgeDeadLetters is DELETE /v1/admin/queues/{queue}/dead-letters?confirm=<queue>: every dead
// letter of the queue is removed for good. The confirmation, the queue's name typed again, is
// required, so no stray request or misclick can empty a DLQ.
func (s *server) purgeDeadLetters(w http.ResponseWriter, r *http.Request) (err error) {
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditDeadLetterPurge, notify.AuditTargetQueue, r.PathValue("queue"), params, &err)
	dl, q, err := s.deadLetters(r)
	if err != nil {
		return err
	}
	if c := r.URL.Query().Get("confirm"); c != q {
		return notify.FieldError("confirm", "type the queue's name (%s) to confirm: every dead letter is removed for good", q)
	}
	n, err := dl.PurgeDeadLetters(r.Context(), notify.DLQName(q))
	if err != nil {
		return err
	}
	params["purged"] = strconv.Itoa(n)
	s.log.InfoContext(r.Context(), "dead letters purged", "queue", q, "purged", n, "by", serviceOf(r))
	writeJSON(w, http.StatusOK, map[string]any{"queue": q, "purged": n})
	return nil
}
