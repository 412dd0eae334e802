// Package audience imports uploaded audience lists — a file of user ids, from an HTTP upload
// locally or an S3 object in AWS — into a notify.CampaignStore list, as a stream: one user id per
// line (or CSV whose first column is the id), validated like every user id Herald accepts,
// deduplicated within the upload, and appended in chunks. Memory is bounded by the number of
// distinct ids (one 8-byte hash each, about 16 MB per million), never by the file's size.
//
// An import can be made resumable (Options.Resume and Options.Checkpoint): before each chunk it
// records the chunk it is about to append, after it the lines done, so an import interrupted at
// any point — even between a chunk's write and its checkpoint — continues without appending any
// member twice or losing one. Importer, which imports uploaded objects (S3 in AWS) once per
// object version, uses that; the HTTP upload does not (a failed upload leaves a prefix of the
// file in the list, which GET on the list reports).
package audience

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"

	"herald/internal/notify"
)

// Defaults of Options.
const (
	DefaultChunkSize   = 1000
	DefaultMaxRejected = 100
	// MaxLineBytes is the longest line read; a longer one is rejected whole (a user id is at
	// most MaxUserIDBytes; the rest of a CSV row is room for other columns).
	MaxLineBytes = 4096
	// MaxUserIDBytes is the longest user id, as everywhere in Herald (notify's recipient rule).
	MaxUserIDBytes = 128
	// MaxListIDBytes is the longest list id a caller names (before the service scope is added).
	MaxListIDBytes = 128
)

// Store is what an import needs: appending to a list, and (to resume an interrupted import)
// reading back the members after a sequence number. Both the SQLite and DynamoDB stores are one.
type Store interface {
	AppendAudienceList(ctx context.Context, listID string, userIDs []string) (lastSeq int64, err error)
	Page(ctx context.Context, a notify.Audience, source int, afterSeq int64, limit int) ([]notify.Member, error)
}

// Rejected is one line that was not a valid user id.
type Rejected struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// Result is what an import did.
type Result struct {
	Lines         int        // lines read, blank lines, comments and the header included
	Appended      int        // members this import appended (on resume: in total, earlier attempts included)
	Duplicates    int        // valid ids that repeated an earlier line of the upload, skipped
	Rejected      []Rejected // the first Options.MaxRejected rejected lines
	RejectedTotal int        // every rejected line
	LastSeq       int64      // the list's last sequence number after the import (= its member count)
}

// Checkpoint is how far a resumable import got; notify.ImportStore keeps it with the import's
// marker.
type Checkpoint = notify.ImportCheckpoint

// Options tune an import.
type Options struct {
	ChunkSize   int // ids per AppendAudienceList call; default DefaultChunkSize
	MaxRejected int // rejected lines reported; default DefaultMaxRejected
	// Resume continues an import of the same content with the same ChunkSize from where its
	// checkpoint says. Nil: a fresh import.
	Resume *Checkpoint
	// Checkpoint, when set, is called before each chunk is appended (with Pending set) and after
	// (without); an error stops the import and is returned.
	Checkpoint func(ctx context.Context, cp Checkpoint) error
}

// ErrNoMembers is returned (wrapped as notify.EINVALID) by Import when the upload holds no valid
// user id at all; the Result still says which lines were rejected.
var ErrNoMembers = errors.New("no valid user id in the upload")

// ValidUserID reports whether id is a user id Herald accepts: 1–128 printable ASCII characters
// without spaces (the rule notify applies to a recipient's user_id and the API to {user}).
func ValidUserID(id string) bool {
	if len(id) == 0 || len(id) > MaxUserIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// ValidListID reports whether a caller's list id is acceptable: 1–128 printable ASCII characters
// without spaces or "/" (the service scope is joined with "/", see StoredListID).
func ValidListID(id string) bool {
	return ValidUserID(id) && len(id) <= MaxListIDBytes && !bytes.ContainsRune([]byte(id), '/')
}

// StoredListID is the list id in the store for service's list: lists are scoped per service, so
// two services' "vip" lists are different lists and a campaign can only page its own service's.
func StoredListID(service, list string) string { return service + "/" + list }

// Import reads r to the end and appends its user ids to list listID of store. It returns
// ErrNoMembers (as notify.EINVALID) if no line held a valid id and nothing was appended before.
// A store or checkpoint error stops it: what was appended stays, and Result says how much.
func Import(ctx context.Context, r io.Reader, store Store, listID string, o Options) (Result, error) {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.MaxRejected <= 0 {
		o.MaxRejected = DefaultMaxRejected
	}
	im := &importer{store: store, listID: listID, o: o, seen: map[uint64]struct{}{}, seed: maphash.MakeSeed()}
	if o.Resume != nil {
		im.cp = *o.Resume
		im.cp.PendingLines, im.cp.PendingCount = 0, 0
		im.seqKnown = o.Resume.Lines > 0 || o.Resume.PendingLines > 0
		im.res.Appended = o.Resume.Appended
	}
	p := newParser(r)
	for {
		line, id, reason, err := p.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return im.result(p), fmt.Errorf("read audience list at line %d: %w", line, err)
		}
		switch {
		case reason != "":
			im.reject(line, reason)
		case id == "":
			// blank, comment or header
		default:
			h := maphash.String(im.seed, id)
			if _, dup := im.seen[h]; dup {
				im.res.Duplicates++
				break
			}
			im.seen[h] = struct{}{}
			im.chunk = append(im.chunk, id)
			if len(im.chunk) >= o.ChunkSize {
				if err := im.flush(ctx, line); err != nil {
					return im.result(p), err
				}
			}
		}
	}
	if err := im.flush(ctx, p.line); err != nil {
		return im.result(p), err
	}
	res := im.result(p)
	if res.Appended == 0 {
		return res, notify.Wrap(notify.EINVALID, ErrNoMembers, "no valid user id in the upload (%d lines, %d rejected)", res.Lines, res.RejectedTotal)
	}
	return res, nil
}

type importer struct {
	store    Store
	listID   string
	o        Options
	seen     map[uint64]struct{}
	seed     maphash.Seed
	chunk    []string
	cp       Checkpoint
	seqKnown bool // cp.Seq is the list's last seq (false: read it before the first write)
	res      Result
}

func (im *importer) reject(line int, reason string) {
	im.res.RejectedTotal++
	if len(im.res.Rejected) < im.o.MaxRejected {
		im.res.Rejected = append(im.res.Rejected, Rejected{Line: line, Reason: reason})
	}
}

func (im *importer) result(p *parser) Result {
	r := im.res
	r.Lines = p.line
	r.LastSeq = im.cp.Seq
	return r
}

// flush appends the pending chunk, which ends at line end.
func (im *importer) flush(ctx context.Context, end int) error {
	ids := im.chunk
	if len(ids) == 0 {
		return nil
	}
	im.chunk = im.chunk[:0]
	resume := im.o.Resume
	counted := len(ids) // the chunk's members, whoever appended them
	if resume != nil && end <= resume.Lines {
		return nil // appended by an earlier attempt
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("append audience list %s: %w", im.listID, err)
	}
	if resume != nil && resume.PendingLines == end && resume.PendingCount == len(ids) {
		// The chunk an earlier attempt was appending when it stopped: append what it did not.
		missing, err := im.missing(ctx, resume.Seq, ids)
		if err != nil {
			return err
		}
		ids = missing
	}
	if !im.seqKnown {
		last, err := im.store.AppendAudienceList(ctx, im.listID, nil)
		if err != nil {
			return fmt.Errorf("append audience list %s: %w", im.listID, err)
		}
		im.cp.Seq, im.seqKnown = last, true
	}
	if im.o.Checkpoint != nil {
		intent := im.cp
		intent.PendingLines, intent.PendingCount = end, len(ids)
		if err := im.o.Checkpoint(ctx, intent); err != nil {
			return fmt.Errorf("checkpoint audience list %s before line %d: %w", im.listID, end, err)
		}
	}
	if len(ids) > 0 {
		last, err := im.store.AppendAudienceList(ctx, im.listID, ids)
		if err != nil {
			return fmt.Errorf("append audience list %s: %w", im.listID, err)
		}
		im.cp.Seq = last
	}
	im.cp.Lines = end
	im.cp.Appended += counted
	im.res.Appended += counted
	if im.o.Checkpoint != nil {
		if err := im.o.Checkpoint(ctx, im.cp); err != nil {
			return fmt.Errorf("checkpoint audience list %s at line %d: %w", im.listID, end, err)
		}
	}
	return nil
}

// missing returns the ids of an interrupted chunk that are not among the list's members after
// seq (where that chunk's append began), in their order. Reading back what is there, rather
// than trusting the list's counter, covers a store that reserved the chunk's numbers and wrote
// only part of it.
func (im *importer) missing(ctx context.Context, seq int64, ids []string) ([]string, error) {
	a := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: im.listID}}}
	present := map[string]bool{}
	after := seq
	for {
		page, err := im.store.Page(ctx, a, 0, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("read back audience list %s after %d: %w", im.listID, seq, err)
		}
		for _, m := range page {
			present[m.UserID] = true
			after = m.Seq
		}
		if len(page) < 1000 {
			break
		}
	}
	out := ids[:0:0]
	for _, id := range ids {
		if !present[id] {
			out = append(out, id)
		}
	}
	// The next intent records the last member present as its starting point, so another
	// interruption reads back from there.
	im.cp.Seq = max(im.cp.Seq, after)
	return out, nil
}

// parser reads lines of at most MaxLineBytes and extracts the id of each.
type parser struct {
	r       *bufio.Reader
	line    int
	started bool // a data line (or the header) has been seen
}

func newParser(r io.Reader) *parser {
	return &parser{r: bufio.NewReaderSize(r, MaxLineBytes)}
}

// next returns the next line's number and its id, or a reason it is rejected; both empty for a
// blank line, a comment or the header. io.EOF at the end.
func (p *parser) next() (line int, id, reason string, err error) {
	raw, err := p.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		p.line++
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the long line
			_, err = p.r.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return p.line, "", "", err
		}
		p.started = true
		return p.line, "", fmt.Sprintf("line is longer than %d bytes", MaxLineBytes), nil
	}
	if len(raw) == 0 && err != nil {
		return p.line, "", "", err // io.EOF, or a read error
	}
	if err != nil && err != io.EOF {
		return p.line + 1, "", "", err
	}
	p.line++
	if p.line == 1 {
		raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	}
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || s[0] == '#' {
		return p.line, "", "", nil
	}
	first, ok := firstField(s)
	if !ok {
		p.started = true
		return p.line, "", "unterminated quoted field", nil
	}
	first = bytes.TrimSpace(first)
	if !p.started {
		p.started = true
		if string(bytes.ToLower(first)) == "user_id" {
			return p.line, "", "", nil
		}
	}
	v := string(first)
	switch {
	case len(v) == 0:
		return p.line, "", "empty user id", nil
	case len(v) > MaxUserIDBytes:
		return p.line, "", fmt.Sprintf("user id longer than %d bytes", MaxUserIDBytes), nil
	case !ValidUserID(v):
		return p.line, "", "user id must be printable ASCII without spaces", nil
	}
	return p.line, v, "", nil
}

// firstField is the first CSV field of a line: up to the first comma, or a double-quoted field
// (with "" for a quote). ok is false for an unterminated quote (multi-line fields are not
// supported: an id never holds a newline).
func firstField(s []byte) (field []byte, ok bool) {
	if s[0] != '"' {
		if i := bytes.IndexByte(s, ','); i >= 0 {
			return s[:i], true
		}
		return s, true
	}
	var out []byte
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			out = append(out, s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			out = append(out, '"')
			i++
			continue
		}
		rest := bytes.TrimSpace(s[i+1:])
		return out, len(rest) == 0 || rest[0] == ','
	}
	return nil, false
}
