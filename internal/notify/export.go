package notify

import (
	"context"
	"time"
)

// Exports: an operator asks for a report (POST /v1/admin/exports) and gets a job at once; a
// worker fed by its own queue builds the file row by row, never holding more than a page, and
// the job ends DONE with a link valid for a short while (ExportLinkTTL by default), or FAILED.
// A job and its file are kept ExportRetention, after which the job shows EXPIRED.
//
// What an export of a notification's deliveries can list follows what its lane stores: the
// realtime lane stores one delivery per address, so every one is a row; the bulk lane stores
// only per-chunk counts and per-batch records, so a bulk notification or campaign has no
// delivery rows to export (its totals are on GET /v1/notifications/{id} and /v1/campaigns/{id}).

// ExportKind says what an export lists.
type ExportKind string

const (
	ExportDeliveries    ExportKind = "deliveries"    // one row per stored delivery of a notification
	ExportAudit         ExportKind = "audit"         // one row per audit log entry
	ExportNotifications ExportKind = "notifications" // one row per notification of the service that asked
	ExportSuppressions  ExportKind = "suppressions"  // one row per suppressed address (masked)
	// ExportUser is everything Herald holds on one user (a person's request for their data):
	// their devices, contact (decrypted), preferences, the suppressions of their addresses, their
	// inbox, the notifications sent to them (the recipient index) and the audit entries about
	// them, a row each.
	ExportUser ExportKind = "user"
)

// ExportKinds is every kind an export can have, the list POST /v1/admin/exports accepts.
var ExportKinds = []ExportKind{ExportDeliveries, ExportAudit, ExportNotifications, ExportSuppressions, ExportUser}

// ExportFormat is the file format.
type ExportFormat string

const (
	ExportCSV   ExportFormat = "csv"
	ExportJSONL ExportFormat = "jsonl" // one JSON object per line
)

// ExportStatus is the lifecycle of an export job: PENDING → PROCESSING → DONE | FAILED, or
// CANCELED before it is done; any of them becomes EXPIRED once ExpiresAt passed.
type ExportStatus string

const (
	ExportPending    ExportStatus = "PENDING"
	ExportProcessing ExportStatus = "PROCESSING"
	ExportDone       ExportStatus = "DONE"
	ExportFailed     ExportStatus = "FAILED"
	ExportCanceled   ExportStatus = "CANCELED"
	ExportExpired    ExportStatus = "EXPIRED"
)

// Terminal reports whether s is an end state.
func (s ExportStatus) Terminal() bool {
	return s == ExportDone || s == ExportFailed || s == ExportCanceled || s == ExportExpired
}

// ExportRetention is how long a job and its file are kept (the exports bucket's lifecycle rule in
// AWS, the data directory's sweep locally).
const ExportRetention = 7 * 24 * time.Hour

// ExportLinkTTL is how long a download link is valid unless configured otherwise.
const ExportLinkTTL = 15 * time.Minute

// ExportFilter selects the rows of an export; empty fields select all. From is inclusive, To
// exclusive.
type ExportFilter struct {
	NotificationID string    `json:"notification_id,omitempty"`
	Status         string    `json:"status,omitempty"`
	Channel        string    `json:"channel,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	Action         string    `json:"action,omitempty"`
	UserID         string    `json:"user_id,omitempty"` // a user export's user
	From           time.Time `json:"from,omitzero"`
	To             time.Time `json:"to,omitzero"`
}

// ExportJob is one export.
type ExportJob struct {
	ID      string       `json:"id"`
	Service string       `json:"service"` // who asked
	Kind    ExportKind   `json:"kind"`
	Format  ExportFormat `json:"format"`
	Filter  ExportFilter `json:"filter"`
	// Unmasked adds each delivery's raw address (deliveries exports only, which the API allows
	// admins alone to ask for, and audits as such).
	Unmasked   bool         `json:"unmasked,omitempty"`
	Status     ExportStatus `json:"status"`
	Rows       int64        `json:"rows"`
	Bytes      int64        `json:"bytes"`
	Object     string       `json:"-"` // the file's key under the exports prefix, once DONE
	Error      string       `json:"error,omitempty"`
	Attempts   int          `json:"attempts"`
	LeaseUntil time.Time    `json:"-"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	FinishedAt time.Time    `json:"finished_at,omitzero"`
	ExpiresAt  time.Time    `json:"expires_at"`
}

// ExportResult is how a worker ends a job it holds.
type ExportResult struct {
	Status ExportStatus // ExportDone or ExportFailed
	Rows   int64
	Bytes  int64
	Object string
	Error  string
}

// ExportStore keeps export jobs. Adapters pass internal/notify/exporttest.
type ExportStore interface {
	// CreateExport stores j (PENDING, with ExpiresAt = CreatedAt + ExportRetention) unless a job
	// with its ID exists; then it returns the stored one and created=false.
	CreateExport(ctx context.Context, j ExportJob) (stored *ExportJob, created bool, err error)
	// GetExport returns the job; its Status is ExportExpired once ExpiresAt is not after now.
	// ENOTFOUND.
	GetExport(ctx context.Context, id string) (*ExportJob, error)
	// ClaimExport leases a PENDING job, or a PROCESSING one whose lease ended before now, to the
	// caller until leaseUntil: PROCESSING with Attempts+1, claimed=true. A job under a live lease,
	// finished, canceled or expired is returned unclaimed. ENOTFOUND.
	ClaimExport(ctx context.Context, id string, now, leaseUntil time.Time) (j *ExportJob, claimed bool, err error)
	// CheckpointExport records progress (rows so far) of the job held at attempt and extends its
	// lease. ECONFLICT when the job is no longer PROCESSING at that attempt (canceled, or claimed
	// again after the lease ran out): the worker stops.
	CheckpointExport(ctx context.Context, id string, attempt int, rows int64, leaseUntil time.Time) error
	// FinishExport ends the job held at attempt with r (DONE or FAILED) at at. ECONFLICT when
	// it is no longer PROCESSING at that attempt.
	FinishExport(ctx context.Context, id string, attempt int, r ExportResult, at time.Time) error
	// CancelExport moves a PENDING or PROCESSING job to CANCELED and returns it; canceling a
	// CANCELED one returns it unchanged; a DONE, FAILED or expired one is EFINISHED. ENOTFOUND.
	CancelExport(ctx context.Context, id string, at time.Time) (*ExportJob, error)
	// ListExports pages the stored jobs, newest first (CreatedAt, then ID, descending), each as
	// GetExport returns it (EXPIRED once past retention, until the store drops it). limit is
	// 1–MaxExportPage (EINVALID otherwise); next is "" after the last page; the cursor is opaque
	// (EINVALID when the store did not produce it).
	ListExports(ctx context.Context, cursor string, limit int) (page []ExportJob, next string, err error)
}

// MaxExportPage is the most jobs one ListExports call returns.
const MaxExportPage = 100

// ExportMessage is the body of a message on the export queue.
type ExportMessage struct {
	Export string `json:"export"`
}

// QueueExport is the export workers' queue.
const QueueExport = "export"

// The state rules every ExportStore applies, in one place.

// exportClaimable reports whether a worker may claim j at now: PENDING, or PROCESSING under a
// lease that ended, and not expired.
func exportClaimable(j *ExportJob, now time.Time) bool {
	if !j.ExpiresAt.After(now) {
		return false
	}
	return j.Status == ExportPending || (j.Status == ExportProcessing && j.LeaseUntil.Before(now))
}

// ClaimExportJob claims j for a worker at now, leased until leaseUntil, and reports whether it
// did; a job not claimable is left as it was.
func ClaimExportJob(j *ExportJob, now, leaseUntil time.Time) bool {
	if !exportClaimable(j, now) {
		return false
	}
	j.Status, j.Attempts, j.LeaseUntil, j.UpdatedAt = ExportProcessing, j.Attempts+1, leaseUntil.UTC(), now.UTC()
	return true
}

// exportHeld is nil when j is PROCESSING at attempt, else ECONFLICT.
func exportHeld(j *ExportJob, attempt int) error {
	if j.Status != ExportProcessing || j.Attempts != attempt {
		return Errorf(ECONFLICT, "export %s is %s at attempt %d, not held at attempt %d", j.ID, j.Status, j.Attempts, attempt)
	}
	return nil
}

// CheckpointExportJob records rows written so far at at and extends the lease of j, held at
// attempt; ECONFLICT when another attempt holds it or it ended.
func CheckpointExportJob(j *ExportJob, attempt int, rows int64, leaseUntil, at time.Time) error {
	if err := exportHeld(j, attempt); err != nil {
		return err
	}
	j.Rows, j.LeaseUntil, j.UpdatedAt = rows, leaseUntil.UTC(), at.UTC()
	return nil
}

// FinishExportJob ends j, held at attempt, with r at at; ECONFLICT when another attempt holds
// it or it ended.
func FinishExportJob(j *ExportJob, attempt int, r ExportResult, at time.Time) error {
	if err := exportHeld(j, attempt); err != nil {
		return err
	}
	j.Status, j.Rows, j.Bytes, j.Object, j.Error = r.Status, r.Rows, r.Bytes, r.Object, r.Error
	j.FinishedAt, j.UpdatedAt, j.LeaseUntil = at.UTC(), at.UTC(), time.Time{}
	return nil
}

// CancelExportJob applies a cancel at at to j and reports whether j changed.
func CancelExportJob(j *ExportJob, at time.Time) (bool, error) {
	switch j.Status {
	case ExportCanceled:
		return false, nil
	case ExportPending, ExportProcessing:
		j.Status, j.UpdatedAt, j.FinishedAt, j.LeaseUntil = ExportCanceled, at.UTC(), at.UTC(), time.Time{}
		return true, nil
	}
	return false, Errorf(EFINISHED, "export %s is %s", j.ID, j.Status)
}
