//go:build unix

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes the data directory's lock file, held by this process until release (or its
// death: the kernel lets go of a dead process's lock). exclusive reports that no other process
// can hold the directory meanwhile, so work its files show in flight belongs to no live worker.
// A directory another live process holds is refused, naming its pid. On a file system without
// flock (some network ones) the directory is used unlocked: exclusive is false.
func lockDataDir(dir string) (release func() error, exclusive bool, err error) {
	name := filepath.Join(dir, "herald.lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("local: data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			b, _ := os.ReadFile(name) // the holder's pid, as it wrote it
			if pid := strings.TrimSpace(string(b)); pid != "" {
				holder += " (pid " + pid + ")"
			}
			return nil, false, fmt.Errorf("local: data directory %s is in use by %s: stop it, or give this one another --data", dir, holder)
		}
		return func() error { return nil }, false, nil // no lock to take here
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, true, nil // closing the file lets go of the lock
}
