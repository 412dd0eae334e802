package export

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"herald/internal/notify"
)

// Dir keeps export objects as files under a directory (the local runtime's data directory):
// an object is written to a temporary name beside its key and renamed onto it when committed,
// so a crash leaves at most a temporary file, never a partial file under the key.
type Dir struct {
	Root string
}

// path maps key to a file under Root, refusing keys that leave it.
func (d Dir) path(key string) (string, error) {
	if !strings.HasPrefix(key, Prefix) || strings.Contains(key, "..") || strings.ContainsAny(key, `\`+"\x00") {
		return "", notify.Errorf(notify.EINVALID, "export object key %q is not under %s", key, Prefix)
	}
	return filepath.Join(d.Root, filepath.FromSlash(key)), nil
}

// Create implements Files.
func (d Dir) Create(_ context.Context, key string) (Object, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, fmt.Errorf("export dir: %w", err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	f, err := os.OpenFile(p+".part-"+hex.EncodeToString(r[:]), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("export dir: %w", err)
	}
	return &dirObject{f: f, final: p}, nil
}

// Open returns the committed object under key; ENOTFOUND if there is none.
func (d Dir) Open(key string) (*os.File, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, notify.Errorf(notify.ENOTFOUND, "export file not found")
	}
	return f, err
}

// Sweep removes files older than notify.ExportRetention, and temporary files of attempts that
// crashed more than a day ago, as the bucket's lifecycle rule does in AWS.
func (d Dir) Sweep(now time.Time) error {
	dir := filepath.Join(d.Root, strings.TrimSuffix(Prefix, "/"))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := now.Sub(info.ModTime())
		if age > notify.ExportRetention || (strings.Contains(e.Name(), ".part-") && age > 24*time.Hour) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

type dirObject struct {
	f     *os.File
	final string
}

func (o *dirObject) Write(p []byte) (int, error) { return o.f.Write(p) }

func (o *dirObject) Commit(context.Context) error {
	if err := o.f.Sync(); err != nil {
		_ = o.f.Close()
		return err
	}
	if err := o.f.Close(); err != nil {
		return err
	}
	return os.Rename(o.f.Name(), o.final)
}

func (o *dirObject) Abort(context.Context) error {
	_ = o.f.Close()
	err := os.Remove(o.f.Name())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

var _ io.Writer = (*dirObject)(nil)
