package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"herald/internal/notify"
)

// The audit log: every operator action — redrive, cancel, pause, resume, reschedule, list
// upload, re-arm — appends one notify.AuditEntry once it ran, whatever its result, and GET
// /v1/admin/audit reads the log (admin services only). No route changes or deletes an entry.
//
// Recording fails open: when the entry cannot be written, the action stands, its answer is
// the one the operator gets, and the entry goes to the error log ("audit entry not written",
// with every field of the entry) instead. The action has already happened by then — a redrive
// moved its messages, a cancel is stored — so failing the request would only make the operator
// retry an action that took effect, or believe it did not; and an outage of the audit write
// must not stop an on-call operator from cancelling a runaway campaign.

// auditTimeout bounds the audit write, which runs even when the caller has gone away.
const auditTimeout = 5 * time.Second

// audit appends the entry for action on target once the handler it is deferred in has returned:
// its result is the code of *errp, or of the error response the handler wrote itself, or ok.
// params (filled in by the handler as it learns them) are sanitized by the store. Use:
//
//	defer s.audit(w, r, notify.AuditCampaignCancel, notify.AuditTargetCampaign, id, nil, &err)
func (s *server) audit(w http.ResponseWriter, r *http.Request, action notify.AuditAction, targetType, targetID string, params map[string]string, errp *error) {
	if s.auditLog == nil {
		return
	}
	result := notify.AuditResultOK
	switch sw, _ := w.(*statusWriter); {
	case errp != nil && *errp != nil:
		result = notify.ErrorCode(*errp)
	case sw != nil && sw.errCode != "":
		result = sw.errCode
	case sw != nil && !sw.wroteHeader: // a panic is on its way up
		result = notify.EINTERNAL
	}
	info := infoOf(r)
	e := notify.AuditEntry{At: s.clock.Now().UTC(), Actor: info.service, ActorKind: notify.ActorService,
		Action: action, TargetType: targetType, TargetID: targetID, Params: params, Result: result}
	if info.user != "" {
		e.Actor, e.ActorKind = info.user, notify.ActorUser
	}
	if s.requestID != nil {
		e.RequestID = s.requestID(r)
	}
	e.ID = notify.AuditIDFor(e.RequestID, e.Actor, action, targetType, targetID, e.At)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if err := s.auditLog.AppendAudit(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit entry not written", slog.String("audit_id", e.ID), slog.Time("at", e.At),
			slog.String("actor", e.Actor), slog.String("actor_kind", string(e.ActorKind)), slog.String("action", string(action)),
			slog.String("target_type", targetType), slog.String("target_id", targetID),
			slog.Any("params", notify.SanitizeAuditParams(params)), slog.String("result", result),
			slog.String("request_id", e.RequestID), slog.String("error", err.Error()))
	}
}

// auditPage answers GET /v1/admin/audit.
type auditPage struct {
	Entries    []notify.AuditEntry `json:"entries"`
	NextCursor string              `json:"next_cursor"`
}

const (
	defaultAuditPage = 50
	maxAuditPage     = 200
)

// listAudit is GET /v1/admin/audit: the entries the query selects, newest first.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	q := r.URL.Query()
	f := notify.AuditFilter{Actor: q.Get("actor"), Action: notify.AuditAction(q.Get("action")),
		TargetType: q.Get("target_type"), TargetID: q.Get("target_id")}
	if err := checkFilterParams(filterParam{"actor", f.Actor}, filterParam{"target_type", f.TargetType}, filterParam{"target_id", f.TargetID}); err != nil {
		return err
	}
	if f.Action != "" && !f.Action.Known() {
		return notify.FieldError("action", "unknown action %q; one of %s", f.Action, oneOf(notify.AuditActions))
	}
	var err error
	if f.From, err = queryTime(r, "from"); err != nil {
		return err
	}
	if f.To, err = queryTime(r, "to"); err != nil {
		return err
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return notify.FieldError("to", "must be after from")
	}
	limit, err := queryLimit(r, defaultAuditPage, maxAuditPage)
	if err != nil {
		return err
	}
	scope := auditScope(f)
	cursor, err := s.queryCursor(r, "audit", scope)
	if err != nil {
		return err
	}
	if s.auditLog == nil {
		writeNotImplemented(w, "the audit log is not available in this runtime")
		return nil
	}
	entries, next, err := s.auditLog.ListAudit(r.Context(), f, cursor, limit)
	if err != nil {
		return fmt.Errorf("list audit: %w", err)
	}
	if entries == nil {
		entries = []notify.AuditEntry{}
	}
	for i := range entries {
		entries[i].At = utc(entries[i].At)
		if entries[i].Params == nil {
			entries[i].Params = map[string]string{}
		}
	}
	writeJSON(w, http.StatusOK, auditPage{Entries: entries, NextCursor: s.sealCursor("audit", scope, next)})
	return nil
}

// auditScope ties a cursor to the filter it pages, so it cannot be reused under another one.
func auditScope(f notify.AuditFilter) string {
	t := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return strings.Join([]string{f.Actor, string(f.Action), f.TargetType, f.TargetID, t(f.From), t(f.To)}, "\x00")
}

// queryTime parses the RFC 3339 time in ?name=; zero when absent.
func queryTime(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, notify.FieldError(name, "must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z")
	}
	return t, checkYear(name, t)
}

// Dates a filter may name: a time outside them is a mistake (or an attempt to overflow what the
// stores compare in nanoseconds, which ends in 2262), never a filter that silently matches
// nothing.
var (
	earliestFilterTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latestFilterTime   = time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkYear refuses a time outside 2000–2100, naming the field.
func checkYear(name string, t time.Time) error {
	if t.Before(earliestFilterTime) || !t.Before(latestFilterTime) {
		return notify.FieldError(name, "%s is outside 2000–2100", t.UTC().Format(time.RFC3339))
	}
	return nil
}

// timeParam renders an optional time for an audit entry's params ("" for none).
func timeParam(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
