package ddb

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/exporttest"
)

// TestExportStore runs the export store conformance suite against DynamoDB Local.
func TestExportStore(t *testing.T) {
	t.Parallel()
	testClient(t)
	exporttest.Run(t, func(t *testing.T) notify.ExportStore {
		s, _ := newTestStore(t)
		return s
	})
}
