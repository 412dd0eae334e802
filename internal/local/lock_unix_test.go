//go:build unix

package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
)

// One runtime at a time on a data directory: a second is refused, naming the holder's pid, and
// the directory is free again once the first has shut down.
func TestDataDirHeldByOneRuntime(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Runtime, error) {
		return Start(context.Background(), Options{Config: config.Dev(), DataDir: dir, Addr: "127.0.0.1:0",
			Logger: slog.New(slog.DiscardHandler)})
	}
	stop := func(rt *Runtime) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	first, err := start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by another process (pid %d)", os.Getpid())) {
		stop(first)
		t.Fatalf("a second runtime on the same directory: %v, want refused naming pid %d", err, os.Getpid())
	}
	stop(first)
	again, err := start()
	if err != nil {
		t.Fatalf("the directory after the first shut down: %v", err)
	}
	stop(again)
}
