package ddb

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/importtest"
)

// TestImportStore runs the import marker conformance suite against DynamoDB Local, each case on
// its own tables.
func TestImportStore(t *testing.T) {
	t.Parallel()
	testClient(t)
	importtest.Run(t, func(t *testing.T) notify.ImportStore {
		s, _ := newTestStore(t)
		return s
	})
}
