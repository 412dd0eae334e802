package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"herald/internal/erasure"
	"herald/internal/notify"
)

// DefaultErasureBudget is how long DELETE /v1/users/{user} works on an erasure before it answers
// 202 and leaves the rest to the cleanup stage: within API Gateway's 29 seconds.
const DefaultErasureBudget = 20 * time.Second

// ErasureResumeDelay is when the cleanup stage looks at an erasure the API began: by then the
// API has nearly always finished it, and the look is one read.
const ErasureResumeDelay = time.Minute

// eraserFor builds the API's eraser: nil when the store keeps no erasures.
func (s *server) eraserFor(o Options) *erasure.Eraser {
	e := erasure.For(o.Store, o.InboxEvents, o.Clock, o.Logger)
	if e == nil {
		return nil
	}
	e.Audit = o.Audit // the API's own audit log, which may be another than the store
	e.Later = func(ctx context.Context, userHash string) error {
		return EnqueueErasure(ctx, s.queue, userHash, ErasureResumeDelay)
	}
	return e
}

// EnqueueErasure asks the cleanup stage to finish the erasure of the user whose hash is userHash
// after delay (see pipeline.Cleanup): the message names no one.
func EnqueueErasure(ctx context.Context, q notify.Producer, userHash string, delay time.Duration) error {
	body, err := json.Marshal(struct {
		Erase string `json:"erase"`
	}{userHash})
	if err != nil {
		return err
	}
	return q.Send(ctx, notify.StageCleanup, notify.OutMessage{Body: body, Delay: delay, GroupID: "erasure"})
}

// erasureView is the answer of DELETE and GET /v1/users/{user}/erasure.
type erasureView struct {
	notify.Erasure
}

// eraseUser is DELETE /v1/users/{user}: the user's erasure, begun (or resumed, if one is
// running) and worked on for up to the erasure budget. 200 when it has finished, 202 while the
// cleanup stage finishes it (GET /v1/users/{user}/erasure follows it).
func (s *server) eraseUser(w http.ResponseWriter, r *http.Request) error {
	if s.eraser == nil {
		writeNotImplemented(w, "erasure is not available in this runtime")
		return nil
	}
	e, err := s.eraser.Erase(r.Context(), r.PathValue("user"), infoOf(r).service, s.erasureBudget)
	if err != nil {
		return fmt.Errorf("erase user: %w", err)
	}
	status := http.StatusOK
	if e.Status != notify.ErasureFinished {
		status = http.StatusAccepted
	}
	writeJSON(w, status, erasureView{e})
	return nil
}

// getErasure is GET /v1/users/{user}/erasure: the user's last erasure; 404 if they were never
// erased.
func (s *server) getErasure(w http.ResponseWriter, r *http.Request) error {
	if s.eraser == nil {
		writeNotImplemented(w, "erasure is not available in this runtime")
		return nil
	}
	e, err := s.eraser.Store.GetErasure(r.Context(), notify.UserHash(r.PathValue("user")))
	if err != nil {
		return fmt.Errorf("get erasure: %w", err)
	}
	writeJSON(w, http.StatusOK, erasureView{e})
	return nil
}
