package sqlite_test

import (
	"testing"

	"herald/internal/notify"
	"herald/internal/notify/importtest"
)

func TestImportStore(t *testing.T) {
	t.Parallel()
	importtest.Run(t, func(t *testing.T) notify.ImportStore {
		s, _ := openTestStore(t)
		return s
	})
}
