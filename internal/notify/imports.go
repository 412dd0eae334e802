package notify

import (
	"context"
	"time"
)

// ImportCheckpoint is how far a resumable import of an uploaded audience list got (the
// audience package's Checkpoint). Between chunks Pending is zero; while a chunk is being
// appended PendingLines is the last line it covers and PendingCount its size, and Seq the list's
// last sequence number before it.
type ImportCheckpoint struct {
	Lines        int   `json:"lines"`    // every valid id on lines 1..Lines is in the list
	Seq          int64 `json:"seq"`      // the list's last sequence number after line Lines's chunk
	Appended     int   `json:"appended"` // members appended so far
	PendingLines int   `json:"pending_lines,omitempty"`
	PendingCount int   `json:"pending_count,omitempty"`
}

// ImportMarker is the record of the import of one version of one uploaded object.
type ImportMarker struct {
	Object     string // the object, e.g. "<bucket>/<key>"
	Version    string // its version, e.g. "V#<version id>" or "E#<etag>"
	ListID     string // the stored list it is appended to
	Owner      string // who holds the lease (a fresh id per attempt)
	LeaseUntil time.Time
	Done       bool
	Checkpoint ImportCheckpoint
	UpdatedAt  time.Time
}

// ImportStore keeps import markers, which make the import of an uploaded audience list
// idempotent per object version and resumable: one attempt at a time holds a version's lease,
// checkpoints as it goes, and marks the version done at the end; an attempt cut short (a
// timeout, a crash) is taken over once its lease ends, from its checkpoint. Adapters pass
// internal/notify/importtest.
type ImportStore interface {
	// ClaimImport takes the import of version of object for owner until leaseUntil: it creates
	// the marker (with listID and an empty checkpoint), or takes over one whose lease ended
	// before now. It returns the marker as claimed — its Checkpoint is where an earlier attempt
	// got to — or, when the version was imported already, the stored marker with Done set and
	// nothing claimed. ECONFLICT when another owner's lease is live at now.
	ClaimImport(ctx context.Context, object, version, listID, owner string, now, leaseUntil time.Time) (ImportMarker, error)
	// SaveImportCheckpoint records cp and extends the lease to leaseUntil if owner holds the
	// marker. ECONFLICT if another owner claimed it since (owner lost its lease); ENOTFOUND if
	// there is no marker.
	SaveImportCheckpoint(ctx context.Context, object, version, owner string, cp ImportCheckpoint, leaseUntil time.Time) error
	// ReleaseImport ends owner's lease at once, so the next attempt need not wait for it to run
	// out; the checkpoint stays. ECONFLICT if owner does not hold the marker; ENOTFOUND.
	ReleaseImport(ctx context.Context, object, version, owner string) error
	// FinishImport records cp and marks the version imported, if owner holds the marker; every
	// later claim then returns it Done. ECONFLICT if owner does not hold it; ENOTFOUND.
	FinishImport(ctx context.Context, object, version, owner string, cp ImportCheckpoint) error
}
