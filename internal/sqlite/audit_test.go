package sqlite_test

import (
	"time"

	"testing"

	"herald/internal/notify"
	"herald/internal/notify/audittest"
)

func TestAuditLog(t *testing.T) {
	t.Parallel()
	audittest.Run(t, func(t *testing.T) notify.AuditLog {
		s, _ := openTestStore(t)
		return s
	})
}

// TestAuditLogPrunesExpiredRows: the rows past their retention are deleted by the next append,
// not only hidden from reads.
func TestAuditLogPrunesExpiredRows(t *testing.T) {
	t.Parallel()
	s, db := openTestStore(t)
	e := notify.AuditEntry{ID: "a_old", At: time.Now().Add(-notify.AuditRetention - time.Hour), Actor: "ops",
		ActorKind: notify.ActorService, Action: notify.AuditCampaignCancel, Result: notify.AuditResultOK}
	if err := s.AppendAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	e.ID, e.At = "a_new", time.Now()
	if err := s.AppendAudit(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := db.R.QueryContext(t.Context(), `SELECT id FROM audit_log`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != "a_new" {
		t.Fatalf("rows %v, want only a_new", ids)
	}
}
