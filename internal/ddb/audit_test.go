package ddb

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/audittest"
)

// TestAuditLog runs the audit log conformance suite against DynamoDB Local, each case on its own
// tables.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	testClient(t)
	audittest.Run(t, func(t *testing.T) notify.AuditLog {
		s, _ := newTestStore(t)
		return s
	})
}
