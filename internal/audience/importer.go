package audience

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"herald/internal/notify"
)

// ListsPrefix is where lists are uploaded: lists/<service>/<list id> (a .csv or .txt extension
// is not part of the id), or lists/<service>/<list id>/<part> for a list split into several
// objects (each appended once).
const ListsPrefix = "lists/"

// DefaultMargin is Importer.Margin's default.
const DefaultMargin = 30 * time.Second

// Object is one version of an uploaded list object, as the upload's event names it.
type Object struct {
	Key       string // lists/<service>/<list id>[/<part>], decoded
	VersionID string // "" where the bucket keeps no versions
	ETag      string // without quotes
	Size      int64
}

// version names o's version in its import marker: the version id, or the ETag without
// versioning.
func (o Object) version() string {
	if o.VersionID != "" {
		return "V#" + o.VersionID
	}
	return "E#" + o.ETag
}

// Objects reads uploaded objects (internal/s3 in AWS).
type Objects interface {
	// Open returns o's content exactly as o.ETag (and o.VersionID) name it, so a resumed import
	// reads the same bytes. ENOTFOUND when the object was deleted or replaced since: the
	// replacement has an event of its own.
	Open(ctx context.Context, o Object) (io.ReadCloser, error)
}

// Importer streams uploaded objects into the store's audience lists, each object version once.
//
// Idempotency: each object version has an import marker (notify.ImportStore) holding the
// import's Checkpoint, a lease and, at the end, done. A redelivered event for an imported object
// finds done and does nothing; a second delivery while the first still runs finds a live lease
// and is retried later; an import cut short (timeout, crash, throttling) resumes from its
// checkpoint, re-appending exactly the members of the chunk that was in flight that are not in
// the list.
type Importer struct {
	Objects  Objects
	Lists    Store
	Markers  notify.ImportStore
	Source   string           // where the objects live (the bucket): markers are keyed "<Source>/<key>"
	Services map[string]bool  // services whose lists may be uploaded
	Log      *slog.Logger     // nil: slog.Default()
	Now      func() time.Time // nil: time.Now
	// Margin is how long before the context's deadline the import stops after a chunk,
	// checkpointed, and asks to be retried (default DefaultMargin).
	Margin time.Duration
}

// ListOf parses lists/<service>/<list>[/<part>] into the service and its list id. EINVALID for
// a key elsewhere, an unknown service or an invalid list id.
func (im *Importer) ListOf(key string) (service, list string, err error) {
	rest, ok := strings.CutPrefix(key, ListsPrefix)
	parts := strings.SplitN(rest, "/", 3)
	if !ok || len(parts) < 2 {
		return "", "", notify.Errorf(notify.EINVALID, "object %q is not under %s<service>/<list id>", key, ListsPrefix)
	}
	service, list = parts[0], parts[1]
	if len(parts) == 2 { // lists/<service>/<list>.csv names the list <list>
		for _, ext := range []string{".csv", ".txt"} {
			list = strings.TrimSuffix(list, ext)
		}
	}
	if !im.Services[service] {
		return "", "", notify.Errorf(notify.EINVALID, "object %q: unknown service %q", key, service)
	}
	if !ValidListID(list) {
		return "", "", notify.Errorf(notify.EINVALID, "object %q: list id must be 1–%d printable ASCII characters without spaces", key, MaxListIDBytes)
	}
	return service, list, nil
}

func (im *Importer) now() time.Time {
	if im.Now == nil {
		return time.Now()
	}
	return im.Now()
}

func (im *Importer) leaseUntil(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d.Add(time.Minute)
	}
	return im.now().Add(15 * time.Minute)
}

// errLostLease is what a checkpoint or finish that lost the lease returns: retried later, when
// the marker says whether the other attempt finished.
func errLostLease(err error, what string) error {
	if notify.IsCode(err, notify.ECONFLICT) || notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Errorf(notify.EUNAVAILABLE, "lost the import lease to another invocation")
	}
	return notify.Wrap(notify.EUNAVAILABLE, err, "%s", what)
}

// Import appends o's members to its list, once per object version. Errors are EINVALID for an
// object that can never be imported (a key outside ListsPrefix, an unknown service, no valid id
// at all: dead-letter it) and EUNAVAILABLE for one to try again later (another attempt holds
// it, the deadline came first — checkpointed —, a store or read failure).
func (im *Importer) Import(ctx context.Context, o Object) error {
	service, list, err := im.ListOf(o.Key)
	if err != nil {
		return err
	}
	stored := StoredListID(service, list)
	version := o.version()
	log := im.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", service, "list_id", list, "key", o.Key, "size", o.Size)
	object := im.Source + "/" + o.Key

	owner := uuid.NewString()
	m, err := im.Markers.ClaimImport(ctx, object, version, stored, owner, im.now(), im.leaseUntil(ctx))
	switch {
	case notify.IsCode(err, notify.ECONFLICT):
		return notify.Errorf(notify.EUNAVAILABLE, "another invocation is importing this object; retrying later")
	case err != nil:
		return notify.Wrap(notify.EUNAVAILABLE, err, "claim import marker")
	case m.Done:
		log.Info("audience list already imported", "version", version)
		return nil
	}
	finish := func(cp Checkpoint) error {
		if err := im.Markers.FinishImport(ctx, object, version, owner, cp); err != nil {
			return errLostLease(err, "finish import marker")
		}
		return nil
	}
	release := func() {
		err := im.Markers.ReleaseImport(context.WithoutCancel(ctx), object, version, owner)
		if err != nil && !notify.IsCode(err, notify.ECONFLICT) {
			log.Warn("import lease not released; the retry waits for it to end", "error", err.Error())
		}
	}

	body, err := im.Objects.Open(ctx, o)
	if notify.IsCode(err, notify.ENOTFOUND) {
		// Deleted or replaced since the event: the replacement has its own event.
		log.Warn("audience list object is gone or changed; nothing imported from this version", "error", err.Error())
		return finish(m.Checkpoint)
	}
	if err != nil {
		release()
		return notify.Wrap(notify.EUNAVAILABLE, err, "get %s", o.Key)
	}
	defer body.Close()

	var resume *Checkpoint
	if m.Checkpoint != (Checkpoint{}) {
		resume = &m.Checkpoint
		log.Info("resuming audience list import", "lines", m.Checkpoint.Lines, "appended", m.Checkpoint.Appended)
	}
	deadline, hasDeadline := ctx.Deadline()
	margin := im.Margin
	if margin <= 0 {
		margin = DefaultMargin
	}
	errDeadline := errors.New("invocation deadline near")
	save := func(ctx context.Context, cp Checkpoint) error {
		if err := im.Markers.SaveImportCheckpoint(ctx, object, version, owner, cp, im.leaseUntil(ctx)); err != nil {
			return errLostLease(err, "save import checkpoint")
		}
		if cp.PendingLines == 0 && hasDeadline && time.Until(deadline) < margin {
			return errDeadline
		}
		return nil
	}
	start := im.now()
	res, err := Import(ctx, body, im.Lists, stored, Options{Resume: resume, Checkpoint: save})
	attrs := []any{"lines", res.Lines, "appended", res.Appended, "duplicates", res.Duplicates,
		"rejected", res.RejectedTotal, "members", res.LastSeq, "duration", im.now().Sub(start)}
	if len(res.Rejected) > 0 {
		first := res.Rejected[:min(len(res.Rejected), 5)]
		attrs = append(attrs, "first_rejected", first) // line numbers and reasons: never an id
	}
	switch {
	case errors.Is(err, errDeadline):
		log.Info("audience list import continues in the next invocation", attrs...)
		release()
		return notify.Errorf(notify.EUNAVAILABLE, "import of %s checkpointed at line %d before the deadline", o.Key, res.Lines)
	case errors.Is(err, ErrNoMembers):
		log.Error("audience list has no valid user id", attrs...)
		if ferr := finish(Checkpoint{}); ferr != nil {
			return ferr
		}
		return err // EINVALID: dead-lettered at once, so the DLQ alarm tells someone
	case err != nil:
		log.Warn("audience list import stopped; it resumes from its checkpoint", append(attrs, "error", err.Error())...)
		release()
		if notify.ErrorCode(err) == notify.EINTERNAL || notify.ErrorCode(err) == notify.EINVALID {
			return notify.Wrap(notify.EUNAVAILABLE, err, "import %s", o.Key)
		}
		return err
	}
	log.Info("audience list imported", attrs...)
	return finish(Checkpoint{Lines: res.Lines, Seq: res.LastSeq, Appended: res.Appended})
}
