package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// benchDirs are the temporary directories the running bench holds (stores, queues, files of
// hundreds of megabytes). They are removed when the bench ends, and also when it is interrupted
// or terminated: without that, a bench stopped mid-run left its directory behind, and a few such
// runs could fill the disk.
var benchDirs struct {
	sync.Mutex
	dirs map[string]bool
}

// watchSignals starts removeBenchDirsOn, once, with the first directory.
var watchSignals = sync.OnceFunc(func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go removeBenchDirsOn(sig)
})

// benchTempDir creates a temporary directory (os.MkdirTemp's pattern) that an interrupt or a
// SIGTERM removes before the process exits; release removes it and forgets it.
func benchTempDir(pattern string) (dir string, release func(), err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	benchDirs.Lock()
	if benchDirs.dirs == nil {
		benchDirs.dirs = map[string]bool{}
	}
	benchDirs.dirs[dir] = true
	benchDirs.Unlock()
	watchSignals()
	return dir, func() {
		benchDirs.Lock()
		delete(benchDirs.dirs, dir)
		benchDirs.Unlock()
		os.RemoveAll(dir)
	}, nil
}

// removeBenchDirsOn waits for a signal, removes every directory still held and exits as the
// signal would have (128 + its number). The runtime's open files go with their directory: on
// Unix an open file outlives its name, and nothing is written after this.
func removeBenchDirsOn(sig <-chan os.Signal) {
	s := <-sig
	benchDirs.Lock() // held until exit: no directory is created or released meanwhile
	for dir := range benchDirs.dirs {
		removeWhileWritten(dir)
	}
	code := 1
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	os.Exit(code)
}

// removeWhileWritten removes dir while the runtime may still be creating files in it (a
// database's WAL, a queue opening): os.RemoveAll fails when a file appears between its listing
// and its last rmdir, so it is tried again, a few times, until the directory is gone.
func removeWhileWritten(dir string) {
	for range 50 {
		if os.RemoveAll(dir) == nil {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
