package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/guregu/dynamo/v2"

	"herald/internal/audience"
	"herald/internal/ddb"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/sqs"
)

// EnvAudienceBucket is the S3 bucket audience lists are uploaded to (the audience function only);
// events from any other bucket are dead-lettered.
const EnvAudienceBucket = "HERALD_AUDIENCE_BUCKET"

// AudienceQueue is the queue S3 sends the lists bucket's ObjectCreated events to.
const AudienceQueue = "audience"

// ListsPrefix is where lists are uploaded: lists/<service>/<list id> (a .csv or .txt extension
// is not part of the id), or lists/<service>/<list id>/<part> for a list split into several
// objects (each appended once).
const ListsPrefix = "lists/"

// S3Getter is the part of the S3 API the import reads objects with.
type S3Getter interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// AudienceImporter streams uploaded S3 objects into the DynamoDB store's audience lists.
//
// Idempotency: each object version (key + version id, or ETag without versioning) has a marker
// item in the users table (pk I#<bucket>/<key>, sk its version) holding the import's
// audience.Checkpoint, a lease (owner, lease_until) and, at the end, done. A redelivered event for
// an imported object finds done and does nothing; a second delivery while the first still runs
// finds a live lease and is retried later; an import cut short (timeout, crash, throttling)
// resumes from its checkpoint, re-appending exactly the members of the chunk that was in flight
// that are not in the list. The object is read with If-Match on its ETag, so a resumed import
// reads the same bytes; an object overwritten meanwhile is a new version with its own event.
type AudienceImporter struct {
	S3       S3Getter
	Store    audience.Store
	Markers  dynamo.Table // the users table
	Bucket   string
	Services map[string]bool
	Log      *slog.Logger
	Now      func() time.Time
	// Margin is how long before the invocation's deadline the import stops after a chunk,
	// checkpointed, and asks to be retried (default 30 s).
	Margin time.Duration
}

// AudienceImporter builds the importer from the function's environment.
func (e *Env) AudienceImporter() (*AudienceImporter, error) {
	bucket := os.Getenv(EnvAudienceBucket)
	if bucket == "" {
		return nil, fmt.Errorf("environment variable %s is not set", EnvAudienceBucket)
	}
	services := map[string]bool{}
	for _, s := range e.Config.Services {
		services[s.Name] = true
	}
	return &AudienceImporter{
		S3: s3.NewFromConfig(e.AWS), Store: e.Store, Markers: e.DB.Table(ddb.TablesWithPrefix(os.Getenv(EnvTablePrefix)).Users),
		Bucket: bucket, Services: services, Log: e.Log, Now: time.Now,
	}, nil
}

// importMarker is an object version's import record.
type importMarker struct {
	PK         string              `dynamo:"pk"`
	SK         string              `dynamo:"sk"`
	Owner      string              `dynamo:"owner"`
	LeaseUntil int64               `dynamo:"lease_until"` // unix ms
	Done       bool                `dynamo:"done"`
	Checkpoint audience.Checkpoint `dynamo:"checkpoint"`
	ListID     string              `dynamo:"list_id"`
	UpdatedAt  time.Time           `dynamo:"updated_at"`
}

// Handle is the pipeline stage for the audience queue: each message is an S3 event notification.
func (im *AudienceImporter) Handle(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
	var out []pipeline.ItemFailure
	for _, m := range msgs {
		if err := im.handleMessage(ctx, m.Body); err != nil {
			out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: err})
		}
	}
	return out
}

func (im *AudienceImporter) handleMessage(ctx context.Context, body []byte) error {
	var probe struct {
		Event string `json:"Event"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Event == "s3:TestEvent" {
		return nil // sent once when the notification is configured
	}
	var ev events.S3Event
	if err := json.Unmarshal(body, &ev); err != nil || len(ev.Records) == 0 {
		return notify.Errorf(notify.EINVALID, "not an S3 event notification")
	}
	for _, r := range ev.Records {
		if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
			continue
		}
		if err := im.importObject(ctx, r.S3); err != nil {
			return err
		}
	}
	return nil
}

// listOf parses lists/<service>/<list>[/<part>].
func (im *AudienceImporter) listOf(key string) (service, list string, err error) {
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
	if !audience.ValidListID(list) {
		return "", "", notify.Errorf(notify.EINVALID, "object %q: list id must be 1–%d printable ASCII characters without spaces", key, audience.MaxListIDBytes)
	}
	return service, list, nil
}

func (im *AudienceImporter) importObject(ctx context.Context, o events.S3Entity) error {
	if o.Bucket.Name != im.Bucket {
		return notify.Errorf(notify.EINVALID, "event for bucket %q; this function imports from %q only", o.Bucket.Name, im.Bucket)
	}
	key, err := url.QueryUnescape(o.Object.Key) // S3 event keys are URL-encoded, spaces as +
	if err != nil {
		return notify.Errorf(notify.EINVALID, "object key %q is not URL-encoded", o.Object.Key)
	}
	service, list, err := im.listOf(key)
	if err != nil {
		return err
	}
	etag := strings.Trim(o.Object.ETag, `"`)
	version := "E#" + etag
	if o.Object.VersionID != "" {
		version = "V#" + o.Object.VersionID
	}
	stored := audience.StoredListID(service, list)
	log := im.Log.With("service", service, "list_id", list, "key", key, "size", o.Object.Size)
	pk := "I#" + im.Bucket + "/" + key

	owner := uuid.NewString()
	m, err := im.claim(ctx, pk, version, owner, stored)
	if err != nil || m == nil {
		if err == nil {
			log.Info("audience list already imported", "version", version)
		}
		return err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(im.Bucket), Key: aws.String(key)}
	if o.Object.VersionID != "" {
		in.VersionId = aws.String(o.Object.VersionID)
	}
	if etag != "" {
		in.IfMatch = aws.String(`"` + etag + `"`)
	}
	obj, err := im.S3.GetObject(ctx, in)
	if err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "NoSuchVersion") {
			// Deleted or replaced since the event: the replacement has its own event.
			log.Warn("audience list object is gone or changed; nothing imported from this version", "code", api.ErrorCode())
			return im.finish(ctx, pk, version, owner, m.Checkpoint)
		}
		return notify.Wrap(notify.EUNAVAILABLE, err, "get %s", key)
	}
	defer obj.Body.Close()

	var resume *audience.Checkpoint
	if m.Checkpoint != (audience.Checkpoint{}) {
		resume = &m.Checkpoint
		log.Info("resuming audience list import", "lines", m.Checkpoint.Lines, "appended", m.Checkpoint.Appended)
	}
	deadline, hasDeadline := ctx.Deadline()
	margin := im.Margin
	if margin <= 0 {
		margin = 30 * time.Second
	}
	errDeadline := errors.New("invocation deadline near")
	save := func(ctx context.Context, cp audience.Checkpoint) error {
		if err := im.save(ctx, pk, version, owner, cp, im.leaseUntil(ctx)); err != nil {
			return err
		}
		if cp.PendingLines == 0 && hasDeadline && time.Until(deadline) < margin {
			return errDeadline
		}
		return nil
	}
	start := im.Now()
	res, err := audience.Import(ctx, io.Reader(obj.Body), im.Store, stored, audience.Options{Resume: resume, Checkpoint: save})
	attrs := []any{"lines", res.Lines, "appended", res.Appended, "duplicates", res.Duplicates,
		"rejected", res.RejectedTotal, "members", res.LastSeq, "duration", im.Now().Sub(start)}
	if len(res.Rejected) > 0 {
		first := res.Rejected[:min(len(res.Rejected), 5)]
		attrs = append(attrs, "first_rejected", first) // line numbers and reasons: never an id
	}
	switch {
	case errors.Is(err, errDeadline):
		log.Info("audience list import continues in the next invocation", attrs...)
		im.release(ctx, pk, version, owner)
		return notify.Errorf(notify.EUNAVAILABLE, "import of %s checkpointed at line %d before the deadline", key, res.Lines)
	case errors.Is(err, audience.ErrNoMembers):
		log.Error("audience list has no valid user id", attrs...)
		if ferr := im.finish(ctx, pk, version, owner, audience.Checkpoint{}); ferr != nil {
			return ferr
		}
		return err // EINVALID: dead-lettered at once, so the DLQ alarm tells someone
	case err != nil:
		log.Warn("audience list import stopped; it resumes from its checkpoint", append(attrs, "error", err.Error())...)
		im.release(ctx, pk, version, owner)
		if notify.ErrorCode(err) == notify.EINTERNAL || notify.ErrorCode(err) == notify.EINVALID {
			return notify.Wrap(notify.EUNAVAILABLE, err, "import %s", key)
		}
		return err
	}
	log.Info("audience list imported", attrs...)
	return im.finish(ctx, pk, version, owner, audience.Checkpoint{Lines: res.Lines, Seq: res.LastSeq, Appended: res.Appended})
}

func (im *AudienceImporter) leaseUntil(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d.Add(time.Minute)
	}
	return im.Now().Add(15 * time.Minute)
}

// claim takes the object version's import for owner: a new marker, or one whose lease ended.
// It returns nil with no error when the version was imported already, and EUNAVAILABLE
// (retried later) when another invocation holds a live lease.
func (im *AudienceImporter) claim(ctx context.Context, pk, version, owner, stored string) (*importMarker, error) {
	var m importMarker
	err := im.Markers.Get("pk", pk).Range("sk", dynamo.Equal, version).Consistent(true).One(ctx, &m)
	isNew := errors.Is(err, dynamo.ErrNotFound)
	switch {
	case isNew:
		m = importMarker{PK: pk, SK: version, ListID: stored}
	case err != nil:
		return nil, notify.Wrap(notify.EUNAVAILABLE, err, "read import marker")
	case m.Done:
		return nil, nil
	}
	now := im.Now()
	m.Owner, m.LeaseUntil, m.UpdatedAt = owner, im.leaseUntil(ctx).UnixMilli(), now
	put := im.Markers.Put(m)
	if isNew {
		put = put.If("attribute_not_exists($)", "pk")
	} else {
		put = put.If("$ < ? AND $ = ?", "lease_until", now.UnixMilli(), "done", false)
	}
	if err := put.Run(ctx); err != nil {
		if dynamo.IsCondCheckFailed(err) {
			return nil, notify.Errorf(notify.EUNAVAILABLE, "another invocation is importing this object; retrying later")
		}
		return nil, notify.Wrap(notify.EUNAVAILABLE, err, "claim import marker")
	}
	return &m, nil
}

// save records cp if owner still holds the lease, and extends it.
func (im *AudienceImporter) save(ctx context.Context, pk, version, owner string, cp audience.Checkpoint, lease time.Time) error {
	err := im.Markers.Update("pk", pk).Range("sk", version).
		Set("checkpoint", cp).Set("lease_until", lease.UnixMilli()).Set("updated_at", im.Now()).
		If("$ = ?", "owner", owner).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return notify.Errorf(notify.EUNAVAILABLE, "lost the import lease to another invocation")
	}
	if err != nil {
		return notify.Wrap(notify.EUNAVAILABLE, err, "save import checkpoint")
	}
	return nil
}

// release ends owner's lease early, so the retry need not wait for it to run out; failing to is
// harmless (the lease then runs out).
func (im *AudienceImporter) release(ctx context.Context, pk, version, owner string) {
	err := im.Markers.Update("pk", pk).Range("sk", version).Set("lease_until", 0).
		If("$ = ?", "owner", owner).Run(context.WithoutCancel(ctx))
	if err != nil && !dynamo.IsCondCheckFailed(err) {
		im.Log.Warn("import lease not released; the retry waits for it to end", "error", err.Error())
	}
}

// finish marks the version imported.
func (im *AudienceImporter) finish(ctx context.Context, pk, version, owner string, cp audience.Checkpoint) error {
	err := im.Markers.Update("pk", pk).Range("sk", version).
		Set("checkpoint", cp).Set("done", true).Set("updated_at", im.Now()).
		If("$ = ?", "owner", owner).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return notify.Errorf(notify.EUNAVAILABLE, "lost the import lease to another invocation")
	}
	if err != nil {
		return notify.Wrap(notify.EUNAVAILABLE, err, "finish import marker")
	}
	return nil
}

// AudienceHandler is the audience function's handler: S3 event notifications from the
// audience queue, settled by the same SQS glue as every stage (partial batch failures, backoff,
// immediate dead-lettering of what can never succeed).
func (e *Env) AudienceHandler(im *AudienceImporter) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	urlPrefix := os.Getenv(EnvQueueURLPrefix)
	q := sqs.New(awssqs.NewFromConfig(e.AWS), map[string]string{
		AudienceQueue: urlPrefix + AudienceQueue, notify.DLQName(AudienceQueue): urlPrefix + notify.DLQName(AudienceQueue),
	})
	g := &sqs.Glue{Queue: q, QueueName: AudienceQueue, DLQName: notify.DLQName(AudienceQueue),
		RetryBase: e.Config.Retry.Base.D(), RetryMax: e.Config.Retry.Max.D(), Logger: e.Log}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := g.Handle(ctx, ev, im.Handle)
		if resp.BatchItemFailures == nil {
			resp.BatchItemFailures = []events.SQSBatchItemFailure{} // "nothing failed"
		}
		return resp, err
	}
}

// StartAudience is the audience function's main, returning like StartSQS: only when the
// environment is wrong, before lambda.Start.
func StartAudience() error {
	e, err := Load(context.Background(), Options{})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	im, err := e.AudienceImporter()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	lambda.Start(e.AudienceHandler(im))
	return nil
}
