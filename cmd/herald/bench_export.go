package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/export"
	"herald/internal/notify"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

// runBenchExport is `herald bench export`: a notification with --rows deliveries in a fresh
// SQLite store, exported to CSV by the export worker; it prints rows per second and the peak Go
// heap in use while the file is built (sampled every 5 ms), which stays flat whatever the size.
func runBenchExport(args []string, out io.Writer) error {
	fs := newFlagSet("bench export", "[flags]", `
Builds a deliveries export of --rows rows on SQLite (the local runtime's store and the export
worker, file under a temporary directory) and prints rows/s, the file size and the peak heap
in use during the export. Loading the rows comes first and is not timed.`)
	rows := fs.Int("rows", 1000000, "deliveries of the exported notification")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
	}
	if *rows < 1 {
		return usagef(fs, "--rows must be at least 1")
	}
	dir, removeDir, err := benchTempDir("herald-bench-export-")
	if err != nil {
		return err
	}
	defer removeDir()
	db, err := sqlite.Open(filepath.Join(dir, "store.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		return err
	}
	store, err := sqlite.NewStore(db, box)
	if err != nil {
		return err
	}
	ctx := context.Background()
	now := time.Now().UTC()
	n := &notify.Notification{ID: notify.NewID("n_", now), Service: "bench", Status: notify.StatusProcessing,
		Lane: notify.LaneRealtime, Channels: []notify.Channel{notify.ChannelEmail}, CreatedAt: now}
	if _, _, err := store.CreateNotification(ctx, n); err != nil {
		return err
	}
	fmt.Fprintf(out, "herald bench export: loading %d deliveries into SQLite…\n", *rows)
	t0 := time.Now()
	const chunk = 5000
	for c := 0; c*chunk < *rows; c++ {
		ds := make([]notify.Delivery, 0, chunk)
		for i := c * chunk; i < min(*rows, (c+1)*chunk); i++ {
			addr := fmt.Sprintf("user%07d@example.com", i)
			ds = append(ds, notify.Delivery{ID: notify.DeliveryID(n.ID, notify.ChannelEmail, addr), NotificationID: n.ID,
				UserID: fmt.Sprintf("u%07d", i), Channel: notify.ChannelEmail, Provider: notify.ProviderSES,
				AddressMasked: notify.MaskEmail(addr), Status: notify.DeliverySent, Attempts: 1,
				ProviderMessageID: fmt.Sprintf("ses-%07d", i), UpdatedAt: now})
		}
		if _, err := store.CreateDeliveries(ctx, n.ID, c, ds); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "  loaded in %.1f s\n", time.Since(t0).Seconds())
	job := notify.ExportJob{ID: notify.NewID("x_", now), Service: "bench", Kind: notify.ExportDeliveries, Format: notify.ExportCSV,
		Filter: notify.ExportFilter{NotificationID: n.ID}, CreatedAt: now}
	if _, _, err := store.CreateExport(ctx, job); err != nil {
		return err
	}
	b := export.New(export.Deps{Jobs: store, Deliveries: store, Files: export.Dir{Root: dir}})

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	t1 := time.Now()
	err = b.Build(ctx, job.ID)
	took := time.Since(t1)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	got, err := store.GetExport(ctx, job.ID)
	if err != nil {
		return err
	}
	if got.Status != notify.ExportDone || got.Rows != int64(*rows) {
		return fmt.Errorf("export ended %s with %d rows, want DONE with %d", got.Status, got.Rows, *rows)
	}
	fmt.Fprintf(out, "  export of %d rows to CSV: %.1f s, %.0f rows/s, file %.1f MB\n", got.Rows, took.Seconds(),
		float64(got.Rows)/took.Seconds(), float64(got.Bytes)/1e6)
	fmt.Fprintf(out, "  peak heap in use during the export: %.1f MB (%.1f MB before it)\n", float64(peak.Load())/1e6, float64(base.HeapInuse)/1e6)
	return nil
}
