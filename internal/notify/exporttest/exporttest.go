// Package exporttest is the conformance suite for notify.ExportStore. Every adapter (SQLite
// locally, DynamoDB in AWS) runs Run unchanged.
package exporttest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/suite"
)

// Run runs every case as a parallel subtest, each on a fresh store from newStore. The store must
// read the system clock: expiry is decided against time.Now.
func Run(t *testing.T, newStore func(t *testing.T) notify.ExportStore) {
	t.Helper()
	suite.Run(t, cases, newStore)
}

// noErr and wantCode are the assertions every suite shares.
var noErr, wantCode = suite.NoErr, suite.WantCode

func job(id string, created time.Time) notify.ExportJob {
	return notify.ExportJob{ID: id, Service: "ops", Kind: notify.ExportDeliveries, Format: notify.ExportCSV,
		Filter: notify.ExportFilter{NotificationID: "n_1", Channel: "email"}, CreatedAt: created}
}

var cases = []struct {
	Name string
	Run  func(t *testing.T, s notify.ExportStore)
}{
	{"create is idempotent and starts PENDING", func(t *testing.T, s notify.ExportStore) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		j, created, err := s.CreateExport(t.Context(), job("x_1", now))
		noErr(t, err)
		if !created || j.Status != notify.ExportPending || !j.ExpiresAt.Equal(now.Add(notify.ExportRetention)) {
			t.Fatalf("created %v job %+v", created, j)
		}
		other := job("x_1", now)
		other.Kind = notify.ExportAudit
		j2, created, err := s.CreateExport(t.Context(), other)
		noErr(t, err)
		if created || j2.Kind != notify.ExportDeliveries {
			t.Fatalf("second create: created %v kind %s", created, j2.Kind)
		}
		got, err := s.GetExport(t.Context(), "x_1")
		noErr(t, err)
		if got.Filter.NotificationID != "n_1" || got.Filter.Channel != "email" || got.Service != "ops" || got.Format != notify.ExportCSV {
			t.Fatalf("stored %+v", got)
		}
		_, err = s.GetExport(t.Context(), "x_none")
		wantCode(t, err, notify.ENOTFOUND)
	}},
	{"claim, checkpoint, finish", func(t *testing.T, s notify.ExportStore) {
		now := time.Now().UTC()
		_, _, err := s.CreateExport(t.Context(), job("x_2", now))
		noErr(t, err)
		j, claimed, err := s.ClaimExport(t.Context(), "x_2", now, now.Add(time.Minute))
		noErr(t, err)
		if !claimed || j.Status != notify.ExportProcessing || j.Attempts != 1 {
			t.Fatalf("claim: %v %+v", claimed, j)
		}
		// A live lease is not claimed again.
		if _, claimed, err := s.ClaimExport(t.Context(), "x_2", now.Add(time.Second), now.Add(time.Minute)); err != nil || claimed {
			t.Fatalf("second claim under a live lease: %v %v", claimed, err)
		}
		noErr(t, s.CheckpointExport(t.Context(), "x_2", 1, 500, now.Add(2*time.Minute)))
		wantCode(t, s.CheckpointExport(t.Context(), "x_2", 2, 500, now.Add(2*time.Minute)), notify.ECONFLICT)
		got, err := s.GetExport(t.Context(), "x_2")
		noErr(t, err)
		if got.Rows != 500 {
			t.Fatalf("rows %d after checkpoint", got.Rows)
		}
		// The lease ran out (a crashed worker): another claim takes it, the first worker's writes conflict.
		j, claimed, err = s.ClaimExport(t.Context(), "x_2", now.Add(3*time.Minute), now.Add(4*time.Minute))
		noErr(t, err)
		if !claimed || j.Attempts != 2 {
			t.Fatalf("reclaim: %v %+v", claimed, j)
		}
		wantCode(t, s.FinishExport(t.Context(), "x_2", 1, notify.ExportResult{Status: notify.ExportDone, Rows: 1}, now), notify.ECONFLICT)
		at := now.Add(5 * time.Minute)
		noErr(t, s.FinishExport(t.Context(), "x_2", 2, notify.ExportResult{Status: notify.ExportDone, Rows: 1000, Bytes: 4096, Object: "exports/x_2.csv"}, at))
		got, err = s.GetExport(t.Context(), "x_2")
		noErr(t, err)
		if got.Status != notify.ExportDone || got.Rows != 1000 || got.Bytes != 4096 || got.Object != "exports/x_2.csv" || !got.FinishedAt.Equal(at.Truncate(time.Millisecond)) && !got.FinishedAt.Equal(at) {
			t.Fatalf("finished %+v", got)
		}
		if _, claimed, err := s.ClaimExport(t.Context(), "x_2", at.Add(time.Hour), at.Add(2*time.Hour)); err != nil || claimed {
			t.Fatalf("claim of a DONE job: %v %v", claimed, err)
		}
		_, err = s.CancelExport(t.Context(), "x_2", at)
		wantCode(t, err, notify.EFINISHED)
	}},
	{"cancel", func(t *testing.T, s notify.ExportStore) {
		now := time.Now().UTC()
		_, _, err := s.CreateExport(t.Context(), job("x_3", now))
		noErr(t, err)
		_, _, err = s.ClaimExport(t.Context(), "x_3", now, now.Add(time.Minute))
		noErr(t, err)
		j, err := s.CancelExport(t.Context(), "x_3", now)
		noErr(t, err)
		if j.Status != notify.ExportCanceled {
			t.Fatalf("cancel: %+v", j)
		}
		j, err = s.CancelExport(t.Context(), "x_3", now.Add(time.Second))
		noErr(t, err)
		if j.Status != notify.ExportCanceled {
			t.Fatalf("second cancel: %+v", j)
		}
		// The worker holding it learns at its next write.
		wantCode(t, s.CheckpointExport(t.Context(), "x_3", 1, 10, now.Add(time.Minute)), notify.ECONFLICT)
		wantCode(t, s.FinishExport(t.Context(), "x_3", 1, notify.ExportResult{Status: notify.ExportDone}, now), notify.ECONFLICT)
		_, err = s.CancelExport(t.Context(), "x_none", now)
		wantCode(t, err, notify.ENOTFOUND)
	}},
	{"a job past retention is EXPIRED", func(t *testing.T, s notify.ExportStore) {
		old := time.Now().UTC().Add(-notify.ExportRetention - time.Minute)
		_, _, err := s.CreateExport(t.Context(), job("x_4", old))
		noErr(t, err)
		j, err := s.GetExport(t.Context(), "x_4")
		if err != nil && notify.ErrorCode(err) != notify.ENOTFOUND {
			t.Fatal(err)
		}
		if err == nil && j.Status != notify.ExportExpired {
			t.Fatalf("status %s, want EXPIRED", j.Status)
		}
		if err == nil {
			if _, claimed, err := s.ClaimExport(t.Context(), "x_4", time.Now(), time.Now().Add(time.Minute)); err != nil || claimed {
				t.Fatalf("claim of an expired job: %v %v", claimed, err)
			}
			_, err = s.CancelExport(t.Context(), "x_4", time.Now())
			wantCode(t, err, notify.EFINISHED)
		}
	}},
	{"list newest first, paged", func(t *testing.T, s notify.ExportStore) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		var want []string
		for i := range 5 {
			id := fmt.Sprintf("x_list%d", i)
			_, _, err := s.CreateExport(t.Context(), job(id, now.Add(time.Duration(i)*time.Second)))
			noErr(t, err)
			want = append([]string{id}, want...) // newest first
		}
		// Creating one again adds no second entry.
		_, _, err := s.CreateExport(t.Context(), job("x_list2", now))
		noErr(t, err)
		_, err = s.CancelExport(t.Context(), "x_list3", now)
		noErr(t, err)
		var got []string
		cursor := ""
		for range 10 {
			page, next, err := s.ListExports(t.Context(), cursor, 2)
			noErr(t, err)
			if len(page) > 2 {
				t.Fatalf("a page of limit 2 holds %d jobs", len(page))
			}
			for _, j := range page {
				got = append(got, j.ID)
				if j.ID == "x_list3" && j.Status != notify.ExportCanceled {
					t.Errorf("listed %s as %s, want CANCELED", j.ID, j.Status)
				}
				if j.Service != "ops" || j.Kind != notify.ExportDeliveries || j.Filter.NotificationID != "n_1" {
					t.Errorf("listed %+v", j)
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
		for _, limit := range []int{0, notify.MaxExportPage + 1} {
			_, _, err := s.ListExports(t.Context(), "", limit)
			wantCode(t, err, notify.EINVALID)
		}
		_, _, err = s.ListExports(t.Context(), "not a cursor!", 10)
		wantCode(t, err, notify.EINVALID)
	}},
}
