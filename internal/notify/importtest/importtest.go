// Package importtest is the conformance suite for notify.ImportStore. Every adapter (SQLite
// locally, DynamoDB in AWS) runs Run unchanged.
package importtest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/suite"
)

// t0 is the suite's "now".
var t0 = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// Run runs every case as a parallel subtest, each on a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) notify.ImportStore) {
	t.Helper()
	suite.Run(t, cases, newStore)
}

// noErr and wantCode are the assertions every suite shares.
var noErr, wantCode = suite.NoErr, suite.WantCode

const (
	obj  = "herald-lists/lists/demo/vip.csv"
	ver  = "V#3sL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"
	list = "demo/vip"
)

var cases = []struct {
	Name string
	Run  func(t *testing.T, s notify.ImportStore)
}{
	{"ClaimCreatesTheMarker", func(t *testing.T, s notify.ImportStore) {
		m, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Minute))
		noErr(t, err)
		if m.Object != obj || m.Version != ver || m.ListID != list || m.Owner != "a" || m.Done ||
			!m.LeaseUntil.Equal(t0.Add(time.Minute)) || m.Checkpoint != (notify.ImportCheckpoint{}) {
			t.Fatalf("claimed marker %+v", m)
		}
	}},
	{"LiveLeaseConflicts", func(t *testing.T, s notify.ImportStore) {
		_, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Minute))
		noErr(t, err)
		_, err = s.ClaimImport(t.Context(), obj, ver, list, "b", t0.Add(59*time.Second), t0.Add(2*time.Minute))
		wantCode(t, err, notify.ECONFLICT)
		// The loser changed nothing: the holder still checkpoints.
		noErr(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "a", notify.ImportCheckpoint{Lines: 10, Seq: 9, Appended: 9}, t0.Add(time.Minute)))
	}},
	{"OtherVersionsAndObjectsAreIndependent", func(t *testing.T, s notify.ImportStore) {
		_, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Minute))
		noErr(t, err)
		_, err = s.ClaimImport(t.Context(), obj, "V#other", list, "b", t0, t0.Add(time.Minute))
		noErr(t, err)
		_, err = s.ClaimImport(t.Context(), obj+"2", ver, list, "c", t0, t0.Add(time.Minute))
		noErr(t, err)
	}},
	{"ExpiredLeaseIsTakenOverFromItsCheckpoint", func(t *testing.T, s notify.ImportStore) {
		_, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Minute))
		noErr(t, err)
		cp := notify.ImportCheckpoint{Lines: 1000, Seq: 998, Appended: 998, PendingLines: 2000, PendingCount: 1000}
		noErr(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "a", cp, t0.Add(2*time.Minute)))
		// The save extended the lease: not yet at 1m30s.
		_, err = s.ClaimImport(t.Context(), obj, ver, list, "b", t0.Add(90*time.Second), t0.Add(5*time.Minute))
		wantCode(t, err, notify.ECONFLICT)
		m, err := s.ClaimImport(t.Context(), obj, ver, list, "b", t0.Add(2*time.Minute+time.Millisecond), t0.Add(5*time.Minute))
		noErr(t, err)
		if m.Owner != "b" || m.Checkpoint != cp || m.ListID != list || m.Done {
			t.Fatalf("taken-over marker %+v, want owner b with the checkpoint %+v", m, cp)
		}
		// The first owner lost its lease: none of its writes land.
		wantCode(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "a", notify.ImportCheckpoint{Lines: 5}, t0.Add(time.Hour)), notify.ECONFLICT)
		wantCode(t, s.FinishImport(t.Context(), obj, ver, "a", notify.ImportCheckpoint{Lines: 5}), notify.ECONFLICT)
		wantCode(t, s.ReleaseImport(t.Context(), obj, ver, "a"), notify.ECONFLICT)
		m, err = s.ClaimImport(t.Context(), obj, ver, list, "c", t0.Add(6*time.Minute), t0.Add(7*time.Minute))
		noErr(t, err)
		if m.Checkpoint != cp {
			t.Fatalf("checkpoint %+v after the old owner's refused writes, want %+v", m.Checkpoint, cp)
		}
	}},
	{"ReleaseLetsTheNextAttemptInAtOnce", func(t *testing.T, s notify.ImportStore) {
		_, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Hour))
		noErr(t, err)
		cp := notify.ImportCheckpoint{Lines: 1000, Seq: 1000, Appended: 1000}
		noErr(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "a", cp, t0.Add(time.Hour)))
		noErr(t, s.ReleaseImport(t.Context(), obj, ver, "a"))
		m, err := s.ClaimImport(t.Context(), obj, ver, list, "b", t0.Add(time.Second), t0.Add(time.Hour))
		noErr(t, err)
		if m.Owner != "b" || m.Checkpoint != cp {
			t.Fatalf("marker after release %+v, want owner b from %+v", m, cp)
		}
	}},
	{"FinishedVersionIsDone", func(t *testing.T, s notify.ImportStore) {
		_, err := s.ClaimImport(t.Context(), obj, ver, list, "a", t0, t0.Add(time.Minute))
		noErr(t, err)
		cp := notify.ImportCheckpoint{Lines: 4201, Seq: 4200, Appended: 4200}
		noErr(t, s.FinishImport(t.Context(), obj, ver, "a", cp))
		for _, at := range []time.Time{t0.Add(time.Second), t0.Add(time.Hour)} { // during and after the lease
			m, err := s.ClaimImport(t.Context(), obj, ver, list, "b", at, at.Add(time.Minute))
			noErr(t, err)
			if !m.Done || m.Owner != "a" || m.Checkpoint != cp {
				t.Fatalf("claim of a finished version at %v = %+v, want it done by a with %+v", at, m, cp)
			}
		}
		// A done claim took nothing: b holds nothing to save into.
		wantCode(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "b", cp, t0.Add(time.Hour)), notify.ECONFLICT)
	}},
	{"MissingMarkerIsNotFound", func(t *testing.T, s notify.ImportStore) {
		wantCode(t, s.SaveImportCheckpoint(t.Context(), obj, ver, "a", notify.ImportCheckpoint{}, t0), notify.ENOTFOUND)
		wantCode(t, s.ReleaseImport(t.Context(), obj, ver, "a"), notify.ENOTFOUND)
		wantCode(t, s.FinishImport(t.Context(), obj, ver, "a", notify.ImportCheckpoint{}), notify.ENOTFOUND)
	}},
	{"ConcurrentClaimsOneWins", func(t *testing.T, s notify.ImportStore) {
		for round, at := range []time.Time{t0, t0.Add(time.Hour)} { // a new marker, then a takeover
			var wg sync.WaitGroup
			var mu sync.Mutex
			won, lost := 0, 0
			for i := range 8 {
				wg.Go(func() {
					_, err := s.ClaimImport(t.Context(), obj, ver, list, fmt.Sprintf("r%d-%d", round, i), at, at.Add(time.Minute))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						won++
					case notify.IsCode(err, notify.ECONFLICT):
						lost++
					default:
						t.Errorf("claim: %v", err)
					}
				})
			}
			wg.Wait()
			if won != 1 || lost != 7 {
				t.Fatalf("round %d: %d claims won and %d lost, want 1 and 7", round, won, lost)
			}
		}
	}},
}
