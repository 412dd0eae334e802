package sqlite_test

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/exporttest"
)

func TestExportStore(t *testing.T) {
	t.Parallel()
	exporttest.Run(t, func(t *testing.T) notify.ExportStore {
		s, _ := openTestStore(t)
		return s
	})
}
