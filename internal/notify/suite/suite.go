// Package suite is what the store conformance suites (storetest, campaigntest, audittest,
// exporttest, importtest) share: the runner that gives each case a fresh adapter, and the
// assertions every case uses.
package suite

import (
	"testing"

	"herald/internal/notify"
)

// Run runs every case as a parallel subtest, each on a fresh S from newS. A suite declares its
// cases as its own struct type of this shape, so that its case literals stay unkeyed.
func Run[S any, C ~struct {
	Name string
	Run  func(t *testing.T, s S)
}](t *testing.T, cases []C, newS func(t *testing.T) S) {
	t.Helper()
	for _, c := range cases {
		c := struct {
			Name string
			Run  func(t *testing.T, s S)
		}(c)
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Run(t, newS(t))
		})
	}
}

// NoErr fails the test on any error.
func NoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// WantCode fails the test unless err carries code.
func WantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !notify.IsCode(err, code) {
		t.Fatalf("err = %v (code %q), want code %q", err, notify.ErrorCode(err), code)
	}
}
