package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecorderDropsATornLastLine: a kill mid-write leaves a half line at the end of the record
// file; the next recorder cuts it off, so what it records starts on a line of its own and every
// acknowledged delivery reads back after the next restart too.
func TestRecorderDropsATornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.jsonl")
	r, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"tok-1", "tok-2"} {
		if err := r.Add(Delivery{Provider: "fcm", Address: a}); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"provider":"fcm","address":"tok-torn","se`) // the kill
	f.Close()

	r, err = NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(Delivery{Provider: "fcm", Address: "tok-3"}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r, err = NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for _, d := range r.List("", "") {
		got = append(got, d.Address)
	}
	if strings.Join(got, ",") != "tok-1,tok-2,tok-3" {
		t.Fatalf("read back %v, want tok-1, tok-2 and tok-3", got)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "tok-torn") || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("record file:\n%s", b)
	}
	// A file that is nothing but a torn line.
	os.WriteFile(path, []byte(`{"provider":"fc`), 0o600)
	if r2, err := NewRecorder(path); err != nil || r2.Len() != 0 {
		t.Fatalf("a torn-only file: %v", err)
	} else {
		r2.Close()
	}
}
