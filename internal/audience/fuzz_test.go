package audience

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"herald/internal/notify"
)

// FuzzImportResumes feeds arbitrary uploads to the list parser and importer. The invariants: no panic;
// the only error is ErrNoMembers (EINVALID) with nothing appended; every member is a valid user
// id that appears in the upload, appended once; every line is accounted for; and an import
// stopped at any checkpoint and resumed from the last one saved ends with the same members as
// one that ran through.
func FuzzImportResumes(f *testing.F) {
	for _, s := range []string{
		"", "\n", "user_id\nalice\nbob\n", "\xef\xbb\xbfuser_id,name\n\"alice\",Alice\n\"b\"\"ob\",B\nalice\n",
		"# comment\n\n  carol  \r\ndave,x\n\"unterminated\n\"q\" junk,\n", "a b\nc\td\n\x00\n\xff\n",
		"USER_ID\nuser_id\n" + string(bytes.Repeat([]byte("x"), MaxUserIDBytes+1)) + "\nok\n",
		string(bytes.Repeat([]byte("y"), MaxLineBytes+10)) + "\nafter-long-line", "last-line-without-newline",
	} {
		f.Add([]byte(s), uint8(2), uint8(3))
	}
	f.Fuzz(func(t *testing.T, upload []byte, chunk, stopAt uint8) {
		ctx := context.Background()
		o := Options{ChunkSize: int(chunk%8) + 1, MaxRejected: 5}
		whole := newMemStore()
		res, err := Import(ctx, bytes.NewReader(upload), whole, "l", o)
		members := whole.members("l")
		switch {
		case err == nil && res.Appended == 0, err != nil && (!errors.Is(err, ErrNoMembers) || !notify.IsCode(err, notify.EINVALID) || len(members) != 0):
			t.Fatalf("%q: %+v %v with %d members, want members or ErrNoMembers (invalid)", upload, res, err, len(members))
		case res.Appended != len(members) || res.LastSeq != int64(len(members)):
			t.Fatalf("%q: result %+v, but %d members", upload, res, len(members))
		case res.Appended+res.Duplicates+res.RejectedTotal > res.Lines:
			t.Fatalf("%q: %+v accounts for more lines than were read", upload, res)
		case len(res.Rejected) > o.MaxRejected || len(res.Rejected) > res.RejectedTotal:
			t.Fatalf("%q: %d rejected reported of %d, at most %d", upload, len(res.Rejected), res.RejectedTotal, o.MaxRejected)
		}
		seen := map[string]bool{}
		for _, id := range members {
			inUpload := bytes.Contains(upload, []byte(id)) || bytes.Contains(upload, []byte(strings.ReplaceAll(id, `"`, `""`)))
			if !ValidUserID(id) || seen[id] || !inUpload {
				t.Fatalf("%q: member %q invalid, repeated or not in the upload", upload, id)
			}
			seen[id] = true
		}
		last := 0
		for _, r := range res.Rejected {
			if r.Line <= last || r.Line > res.Lines || r.Reason == "" {
				t.Fatalf("%q: rejected %+v out of order, beyond line %d or without a reason", upload, res.Rejected, res.Lines)
			}
			last = r.Line
		}

		// Stopped at checkpoint stopAt (the worker died before saving it), then resumed.
		stopped := newMemStore()
		var saved *Checkpoint
		calls, stop := 0, errors.New("stop")
		o.Checkpoint = func(_ context.Context, cp Checkpoint) error {
			if calls++; calls == int(stopAt%16)+1 {
				return stop
			}
			saved = &cp
			return nil
		}
		if _, err := Import(ctx, bytes.NewReader(upload), stopped, "l", o); !errors.Is(err, stop) {
			return // it finished before that checkpoint
		}
		o.Resume, o.Checkpoint = saved, nil
		res2, err := Import(ctx, bytes.NewReader(upload), stopped, "l", o)
		if err != nil && !errors.Is(err, ErrNoMembers) {
			t.Fatalf("%q: resumed import: %v", upload, err)
		}
		if got := stopped.members("l"); !slices.Equal(got, members) || res2.Appended != len(members) {
			t.Fatalf("%q: resumed after checkpoint %d: %q (appended %d), want %q", upload, calls, got, res2.Appended, members)
		}
	})
}
