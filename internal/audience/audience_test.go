package audience

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

// memStore is an in-memory Store. failAt makes the n-th AppendAudienceList call (1-based) write
// only the first half of its ids and fail, as a DynamoDB batch write cut short would.
type memStore struct {
	mu      sync.Mutex
	lists   map[string][]string // member i has seq i+1
	calls   int
	failAt  int
	appends []int // sizes of the appends that wrote something
}

func newMemStore() *memStore { return &memStore{lists: map[string][]string{}} }

func (s *memStore) AppendAudienceList(_ context.Context, listID string, ids []string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		return int64(len(s.lists[listID])), nil
	}
	s.calls++
	if s.calls == s.failAt {
		s.lists[listID] = append(s.lists[listID], ids[:len(ids)/2]...)
		return 0, notify.Errorf(notify.EUNAVAILABLE, "store cut short")
	}
	s.lists[listID] = append(s.lists[listID], ids...)
	s.appends = append(s.appends, len(ids))
	return int64(len(s.lists[listID])), nil
}

func (s *memStore) Page(_ context.Context, a notify.Audience, source int, after int64, limit int) ([]notify.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lists[a.Sources[source].ListID]
	var out []notify.Member
	for i := int(after); i < len(l) && len(out) < limit; i++ {
		out = append(out, notify.Member{Seq: int64(i + 1), UserID: l[i]})
	}
	return out, nil
}

func (s *memStore) members(list string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lists[list]...)
}

func TestAudienceImportParses(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxUserIDBytes+1)
	cases := []struct {
		name     string
		in       string
		want     []string
		rejected []Rejected
		dups     int
		lines    int
	}{
		{name: "one per line", in: "alice\nbob\ncarol\n", want: []string{"alice", "bob", "carol"}, lines: 3},
		{name: "no final newline", in: "alice\nbob", want: []string{"alice", "bob"}, lines: 2},
		{name: "CRLF, spaces, blanks, comments", in: "# exported 2026-05-01\r\n  alice  \r\n\r\n\tbob\r\n# end\r\n",
			want: []string{"alice", "bob"}, lines: 5},
		{name: "CSV with header", in: "user_id,name,score\nalice,Alice A,3\nbob,\"Bob, B\",4\n",
			want: []string{"alice", "bob"}, lines: 3},
		{name: "header any case after comments", in: "# x\nUSER_ID\nalice\n", want: []string{"alice"}, lines: 3},
		{name: "user_id later is an id", in: "alice\nuser_id\n", want: []string{"alice", "user_id"}, lines: 2},
		{name: "quoted first field", in: "\"alice\",1\n\"b\"\"ob\"\n", want: []string{"alice", "b\"ob"}, lines: 2},
		{name: "byte order mark", in: "\xef\xbb\xbfuser_id\nalice\n", want: []string{"alice"}, lines: 2},
		{name: "duplicates", in: "alice\nbob\nalice\n alice \nbob,2\n", want: []string{"alice", "bob"}, dups: 3, lines: 5},
		{name: "rejects", in: "alice\nal ice\n" + long + "\n,x\n\"open\nbad\x01id\nnon-ascii-é\nbob\n",
			want: []string{"alice", "bob"}, lines: 8, rejected: []Rejected{
				{2, "user id must be printable ASCII without spaces"},
				{3, fmt.Sprintf("user id longer than %d bytes", MaxUserIDBytes)},
				{4, "empty user id"},
				{5, "unterminated quoted field"},
				{6, "user id must be printable ASCII without spaces"},
				{7, "user id must be printable ASCII without spaces"},
			}},
		{name: "overlong line", in: "alice\n" + strings.Repeat("y", 3*MaxLineBytes) + "\nbob\n", want: []string{"alice", "bob"},
			lines: 3, rejected: []Rejected{{2, fmt.Sprintf("line is longer than %d bytes", MaxLineBytes)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newMemStore()
			res, err := Import(t.Context(), strings.NewReader(c.in), s, "svc/l", Options{})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if got := s.members("svc/l"); !reflect.DeepEqual(got, c.want) {
				t.Errorf("members %q, want %q", got, c.want)
			}
			if !reflect.DeepEqual(res.Rejected, c.rejected) {
				t.Errorf("rejected %v, want %v", res.Rejected, c.rejected)
			}
			if res.Appended != len(c.want) || res.Duplicates != c.dups || res.Lines != c.lines ||
				res.RejectedTotal != len(c.rejected) || res.LastSeq != int64(len(c.want)) {
				t.Errorf("result %+v, want appended %d, duplicates %d, lines %d, last seq %d", res, len(c.want), c.dups, c.lines, len(c.want))
			}
		})
	}
}

func TestAudienceImportNothingValid(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "\n\n# only comments\n", "user_id\n", "a b\n\x00\n"} {
		s := newMemStore()
		res, err := Import(t.Context(), strings.NewReader(in), s, "l", Options{})
		if !errors.Is(err, ErrNoMembers) || !notify.IsCode(err, notify.EINVALID) {
			t.Errorf("%q: err %v, want ErrNoMembers as EINVALID", in, err)
		}
		if res.Appended != 0 || len(s.members("l")) != 0 {
			t.Errorf("%q: appended %d", in, res.Appended)
		}
	}
}

func TestAudienceImportChunksAndAppendsAfterExisting(t *testing.T) {
	t.Parallel()
	s := newMemStore()
	if _, err := s.AppendAudienceList(t.Context(), "l", []string{"old1", "old2"}); err != nil {
		t.Fatal(err)
	}
	s.appends = nil
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, "u%d\n", i)
	}
	res, err := Import(t.Context(), strings.NewReader(b.String()), s, "l", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.appends, []int{1000, 1000, 500}) {
		t.Errorf("appends %v, want chunks of 1000, 1000, 500", s.appends)
	}
	if res.Appended != 2500 || res.LastSeq != 2502 {
		t.Errorf("result %+v, want 2500 appended after 2 existing", res)
	}
	if m := s.members("l"); m[2] != "u0" || m[2501] != "u2499" {
		t.Errorf("members start %v end %v", m[:3], m[len(m)-1])
	}
}

func TestAudienceImportCapsRejected(t *testing.T) {
	t.Parallel()
	in := "ok\n" + strings.Repeat("bad id\n", 500)
	res, err := Import(t.Context(), strings.NewReader(in), newMemStore(), "l", Options{MaxRejected: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) != 10 || res.RejectedTotal != 500 || res.Rejected[0].Line != 2 || res.Rejected[9].Line != 11 {
		t.Errorf("rejected %d (%v…), total %d; want the first 10 of 500", len(res.Rejected), res.Rejected[:1], res.RejectedTotal)
	}
}

// randomUpload is n lines of ids drawn from a small pool (so there are duplicates), with
// invalid lines, comments and blanks mixed in; it returns the content and the expected members.
func randomUpload(r *rand.Rand, n int) (string, []string) {
	var b strings.Builder
	seen := map[string]bool{}
	var want []string
	for range n {
		switch r.IntN(10) {
		case 0:
			b.WriteString("bad id\n")
		case 1:
			b.WriteString("# comment\n")
		case 2:
			b.WriteString("\n")
		default:
			id := fmt.Sprintf("user-%d", r.IntN(n))
			fmt.Fprintf(&b, "%s,%d\n", id, r.IntN(100))
			if !seen[id] {
				seen[id] = true
				want = append(want, id)
			}
		}
	}
	return b.String(), want
}

// TestImportResumes interrupts an import at every checkpoint and at every store write (one cut
// short half-way), resumes from the last checkpoint, and checks the list holds every member
// exactly once.
func TestAudienceImportResumes(t *testing.T) {
	t.Parallel()
	in, want := randomUpload(rand.New(rand.NewPCG(1, 2)), 3000)
	const chunk = 250
	wantSet := func(t *testing.T, got []string) {
		t.Helper()
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("%s appended twice", id)
			}
			seen[id] = true
		}
		if len(got) != len(want) {
			t.Fatalf("%d members, want %d", len(got), len(want))
		}
		for _, id := range want {
			if !seen[id] {
				t.Fatalf("%s missing", id)
			}
		}
	}
	stop := errors.New("stop")
	for stopAt := 1; stopAt <= 2*(len(want)/chunk+1); stopAt++ {
		t.Run(fmt.Sprintf("checkpoint %d", stopAt), func(t *testing.T) {
			s := newMemStore()
			var last *Checkpoint
			calls := 0
			save := func(_ context.Context, cp Checkpoint) error {
				calls++
				if calls == stopAt {
					return stop // the checkpoint is not saved: the worker died just before it
				}
				last = &cp
				return nil
			}
			_, err := Import(t.Context(), strings.NewReader(in), s, "l", Options{ChunkSize: chunk, Checkpoint: save})
			if err == nil {
				return // fewer checkpoints than stopAt
			}
			if !errors.Is(err, stop) {
				t.Fatal(err)
			}
			res, err := Import(t.Context(), strings.NewReader(in), s, "l", Options{ChunkSize: chunk, Resume: last,
				Checkpoint: func(_ context.Context, cp Checkpoint) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			wantSet(t, s.members("l"))
			if res.Appended != len(want) {
				t.Errorf("appended %d, want %d", res.Appended, len(want))
			}
		})
	}
	for failAt := 1; failAt <= len(want)/chunk+1; failAt++ {
		t.Run(fmt.Sprintf("write %d cut short", failAt), func(t *testing.T) {
			s := newMemStore()
			s.failAt = failAt
			var last *Checkpoint
			save := func(_ context.Context, cp Checkpoint) error { last = &cp; return nil }
			if _, err := Import(t.Context(), strings.NewReader(in), s, "l", Options{ChunkSize: chunk, Checkpoint: save}); !notify.IsCode(err, notify.EUNAVAILABLE) {
				t.Fatalf("err %v, want the store's", err)
			}
			if last == nil || last.PendingLines == 0 {
				t.Fatalf("checkpoint %+v, want a pending chunk", last)
			}
			if _, err := Import(t.Context(), strings.NewReader(in), s, "l", Options{ChunkSize: chunk, Resume: last, Checkpoint: save}); err != nil {
				t.Fatal(err)
			}
			wantSet(t, s.members("l"))
		})
	}
}

// TestImportMalformedInput feeds random bytes — binary, long lines, stray quotes, NULs, no
// newline at the end — and checks the invariants: no error but ErrNoMembers, every member valid
// and unique, and every line accounted for.
func TestAudienceImportMalformedInput(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte("ab,\"\n\r #\t\x00\xff\xef\xbb\xbfuser_id")
	for i := range 300 {
		n := r.IntN(3 * MaxLineBytes)
		buf := make([]byte, n)
		for j := range buf {
			if r.IntN(4) == 0 {
				buf[j] = byte(r.IntN(256))
			} else {
				buf[j] = alphabet[r.IntN(len(alphabet))]
			}
		}
		checkInvariants(t, fmt.Sprintf("input %d", i), buf)
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte("user_id,x\nalice,1\n\"b,ob\",2\nalice\n# c\n\n bad id \n"))
	f.Add([]byte("\xef\xbb\xbf\"unterminated\n"))
	f.Fuzz(func(t *testing.T, in []byte) { checkInvariants(t, "fuzz", in) })
}

func checkInvariants(t *testing.T, name string, in []byte) {
	t.Helper()
	s := newMemStore()
	res, err := Import(context.Background(), strings.NewReader(string(in)), s, "l", Options{ChunkSize: 7, MaxRejected: 1 << 20})
	if err != nil && !errors.Is(err, ErrNoMembers) {
		t.Fatalf("%s: %v", name, err)
	}
	got := s.members("l")
	seen := map[string]bool{}
	for _, id := range got {
		if !ValidUserID(id) || seen[id] {
			t.Fatalf("%s: member %q invalid or repeated", name, id)
		}
		seen[id] = true
	}
	lines := strings.Count(string(in), "\n")
	if len(in) > 0 && in[len(in)-1] != '\n' {
		lines++
	}
	if res.Lines != lines {
		t.Fatalf("%s: %d lines read, want %d", name, res.Lines, lines)
	}
	if res.Appended != len(got) || res.RejectedTotal != len(res.Rejected) || res.Appended+res.Duplicates+res.RejectedTotal > lines {
		t.Fatalf("%s: result %+v does not add up (%d members)", name, res, len(got))
	}
}

func TestAudienceValidIDs(t *testing.T) {
	t.Parallel()
	// The same rule as a send request's recipient user_id.
	for _, id := range []string{"alice", "a", strings.Repeat("z", 128), strings.Repeat("z", 129), "a b", "", "é", "a\tb", "~!@"} {
		req := notify.SendRequest{Channels: []notify.Channel{notify.ChannelPush}, Content: notify.Content{Body: "x"},
			Recipients: []notify.Recipient{{UserID: id}}}
		notifyOK := req.Validate(time.Now()) == nil
		if id == "" {
			notifyOK = false // "give exactly one of…"
		}
		if ValidUserID(id) != notifyOK {
			t.Errorf("ValidUserID(%q) = %v, notify says %v", id, ValidUserID(id), notifyOK)
		}
	}
	for id, ok := range map[string]bool{"vip": true, "a/b": false, "": false, "two words": false} {
		if ValidListID(id) != ok {
			t.Errorf("ValidListID(%q) = %v", id, !ok)
		}
	}
	if StoredListID("orders", "vip") != "orders/vip" {
		t.Error("StoredListID")
	}
}
