// Package erasure runs a user's erasure (DELETE /v1/users/{user}; docs/design/security.md,
// "Erasure"): the tombstone first, so nothing still in flight reaches the user, then every step
// of notify.ErasureSteps in pages, checkpointed, then the live connections, then one audit entry.
// It is idempotent and resumable: run again from its checkpoint, or from the start, it ends the
// same, on either runtime.
package erasure

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"herald/internal/notify"
)

// Eraser runs erasures.
type Eraser struct {
	Store notify.ErasureStore
	// Audit gets the one entry of each erasure; nil: none is written.
	Audit notify.AuditLog
	// Disconnect closes the user's live inbox connections and forgets them; nil: there are none
	// to close (no live inbox).
	Disconnect func(ctx context.Context, userID string) error
	// Later makes sure an erasure just begun is finished even if whoever began it stops before
	// it does (the runtimes queue a message naming the user's hash to the cleanup stage, which
	// calls Resume: the record keeps the user id while the erasure runs). Nil: nothing does.
	Later  func(ctx context.Context, userHash string) error
	Clock  notify.Clock // nil: the system clock
	Logger *slog.Logger // nil: slog.Default()
}

func (e *Eraser) now() time.Time {
	if e.Clock != nil {
		return e.Clock.Now()
	}
	return time.Now()
}

func (e *Eraser) log() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// Erase begins the erasure of userID asked by actor, or resumes the one running, and works on it
// until it is finished or until budget has passed: the answer's Status says which (the rest is
// then finished by Later, or by calling Erase again).
func (e *Eraser) Erase(ctx context.Context, userID, actor string, budget time.Duration) (notify.Erasure, error) {
	if userID == "" {
		return notify.Erasure{}, notify.FieldError("user", "is required")
	}
	deadline := e.now().Add(budget)
	begun, created, err := e.Store.BeginErasure(ctx, notify.Erasure{UserHash: notify.UserHash(userID), UserID: userID,
		Actor: actor, RequestedAt: e.now().UTC(), Removed: map[string]int{}})
	if err != nil {
		return notify.Erasure{}, fmt.Errorf("erasure: begin: %w", err)
	}
	if created && e.Later != nil {
		if err := e.Later(ctx, begun.UserHash); err != nil {
			// The erasure is stored and runs now; only its backstop is missing. Asking again
			// resumes it.
			return begun, notify.Wrap(notify.EUNAVAILABLE, err, "erasure: queue its completion")
		}
	}
	return e.run(ctx, begun, deadline)
}

// Resume works on the running erasure of the user whose hash is userHash, if there is one (the
// cleanup stage's part), for up to budget.
func (e *Eraser) Resume(ctx context.Context, userHash string, budget time.Duration) (notify.Erasure, error) {
	had, err := e.Store.GetErasure(ctx, userHash)
	if err != nil {
		return had, fmt.Errorf("erasure: resume: %w", err)
	}
	if had.Status != notify.ErasureRunning {
		return had, nil
	}
	return e.run(ctx, had, e.now().Add(budget))
}

// run works on er until it is finished or the deadline has passed.
func (e *Eraser) run(ctx context.Context, er notify.Erasure, deadline time.Time) (notify.Erasure, error) {
	if er.Status != notify.ErasureRunning {
		return er, nil
	}
	if er.Removed == nil {
		er.Removed = map[string]int{}
	}
	for er.Step < len(notify.ErasureSteps) {
		if !e.now().Before(deadline) {
			return er, nil
		}
		step := notify.ErasureSteps[er.Step]
		changed, next, err := e.Store.EraseStep(ctx, er.UserID, step, er.Cursor)
		if err != nil {
			return er, fmt.Errorf("erasure: %s: %w", step, err)
		}
		er.Removed[step] += changed
		if next == "" {
			er.Step, er.Cursor = er.Step+1, ""
		} else {
			er.Cursor = next
		}
		if err := e.Store.SaveErasure(ctx, er); err != nil {
			return er, fmt.Errorf("erasure: checkpoint: %w", err)
		}
	}
	if e.Disconnect != nil {
		if err := e.Disconnect(ctx, er.UserID); err != nil {
			return er, fmt.Errorf("erasure: close live connections: %w", err)
		}
	}
	// Every stage reads the tombstones again within notify.ErasureLag: once that has passed
	// twice since it was written, nothing sent from then on reaches the user.
	if wait := er.RequestedAt.Add(2 * notify.ErasureLag).Sub(e.now()); wait > 0 {
		if e.now().Add(wait).After(deadline) {
			return er, nil
		}
		select {
		case <-ctx.Done():
			return er, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := e.audit(ctx, er); err != nil {
		return er, err
	}
	done := e.now().UTC()
	er.Status, er.FinishedAt = notify.ErasureFinished, &done
	if err := e.Store.SaveErasure(ctx, er); err != nil {
		return er, fmt.Errorf("erasure: finish: %w", err)
	}
	er.UserID, er.Cursor = "", ""
	e.log().InfoContext(ctx, "user erased", "user_hash", er.UserHash, "actor", er.Actor, "removed", er.Removed)
	return er, nil
}

// audit appends the erasure's one entry: its id is derived from the erasure, so an erasure
// finished twice (resumed after a crash between the entry and the finish) appends it once. It
// names the user by hash, and counts what was removed.
func (e *Eraser) audit(ctx context.Context, er notify.Erasure) error {
	if e.Audit == nil {
		return nil
	}
	params := map[string]string{}
	for step, k := range er.Removed {
		params[step] = strconv.Itoa(k)
	}
	entry := notify.AuditEntry{At: e.now().UTC(), Actor: er.Actor, ActorKind: notify.ActorService,
		Action: notify.AuditUserErase, TargetType: notify.AuditTargetUser, TargetID: er.UserHash,
		Params: params, Result: notify.AuditResultOK}
	entry.ID = notify.AuditIDFor("erasure:"+strconv.FormatInt(er.RequestedAt.UnixNano(), 10), er.Actor,
		entry.Action, entry.TargetType, entry.TargetID, entry.At)
	if err := e.Audit.AppendAudit(ctx, entry); err != nil {
		return fmt.Errorf("erasure: audit: %w", err)
	}
	return nil
}

// For builds the eraser of a runtime's parts: nil when store keeps no erasures; the audit log
// and the closing of live connections where store and events provide them.
func For(store any, events notify.InboxEvents, clock notify.Clock, log *slog.Logger) *Eraser {
	es, ok := store.(notify.ErasureStore)
	if !ok {
		return nil
	}
	e := &Eraser{Store: es, Clock: clock, Logger: log}
	if a, ok := store.(notify.AuditLog); ok {
		e.Audit = a
	}
	if cc, ok := events.(notify.ConnectionCloser); ok {
		e.Disconnect = cc.CloseUser
	}
	return e
}
