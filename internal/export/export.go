// Package export builds export files: a worker fed by the export queue claims a job, streams its
// rows page by page into a new object and completes the object and the job only once every row
// is written, so a crash never leaves a DONE job with half a file. It is written against the
// ports in internal/notify and a Files sink (a directory locally, the exports bucket in AWS).
package export

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// Prefix starts every export object's key: the AWS role of the worker may write only under it.
const Prefix = "exports/"

// Key is the object key of job id's file in format f.
func Key(id string, f notify.ExportFormat) string { return Prefix + id + "." + string(f) }

// Files holds export objects.
type Files interface {
	// Create starts a new object for key. Nothing is visible under key until Commit; Abort (or
	// a crash) leaves nothing under key.
	Create(ctx context.Context, key string) (Object, error)
}

// Object is an object being written.
type Object interface {
	io.Writer
	// Commit makes the object visible under its key, whole.
	Commit(ctx context.Context) error
	// Abort discards what was written.
	Abort(ctx context.Context) error
}

// Deliveries pages a notification's deliveries (notify.DeliveryStore.ListDeliveries).
type Deliveries interface {
	ListDeliveries(ctx context.Context, notificationID, cursor string, limit int) ([]notify.Delivery, string, error)
}

// Notifications pages a service's notifications (notify.NotificationLister) and reads each one
// whole, its counters included (notify.NotificationStore.GetNotification).
type Notifications interface {
	notify.NotificationLister
	GetNotification(ctx context.Context, id string) (*notify.Notification, error)
}

// Suppressions pages the suppression list (notify.SuppressionStore.ListSuppressions).
type Suppressions interface {
	ListSuppressions(ctx context.Context, f notify.SuppressionFilter, cursor string, limit int) ([]notify.Suppression, string, error)
}

// Users reads what Herald holds on a user for a user export: the notify.UserStore and
// notify.InboxStore reads, and the suppressions of their addresses.
type Users interface {
	ListDevices(ctx context.Context, userIDs []string) (map[string][]notify.Device, error)
	GetContacts(ctx context.Context, userIDs []string) (map[string]notify.Contact, error)
	GetPreferences(ctx context.Context, userIDs []string) (map[string]notify.Preferences, error)
	Suppressed(ctx context.Context, addressKeys []string) (map[string]notify.Suppression, error)
	ListInbox(ctx context.Context, userID, cursor string, limit int, now time.Time) ([]notify.InboxItem, string, error)
}

// Deps are what a Builder works with.
type Deps struct {
	Jobs          notify.ExportStore
	Deliveries    Deliveries
	Notifications Notifications   // nil: notifications exports fail
	Suppressions  Suppressions    // nil: suppressions exports fail
	Audit         notify.AuditLog // nil: audit exports fail
	Addresses     Addresses       // nil: unmasked deliveries exports fail
	Users         Users           // nil: user exports fail
	Files         Files
	Clock         notify.Clock
	Logger        *slog.Logger
}

// Builder builds export jobs.
type Builder struct {
	d Deps
	// Lease is how long a claim (and each checkpoint) holds a job: a crashed worker's job is
	// claimed again once it ran out. It must be shorter than the queue's visibility timeout.
	Lease time.Duration
	// Page is how many rows one store read returns (and how often progress is checkpointed).
	Page int
}

// New returns a Builder with a 2-minute lease and pages of 1,000 rows.
func New(d Deps) *Builder {
	if d.Clock == nil {
		d.Clock = notify.SystemClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Builder{d: d, Lease: 2 * time.Minute, Page: 1000}
}

// Handler consumes the export queue.
func (b *Builder) Handler() pipeline.Handler {
	return func(ctx context.Context, msgs []notify.Message) []pipeline.ItemFailure {
		var out []pipeline.ItemFailure
		for _, m := range msgs {
			var em notify.ExportMessage
			if err := json.Unmarshal(m.Body, &em); err != nil || em.Export == "" {
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: notify.Errorf(notify.EINVALID, "export message: want {\"export\": id}")})
				continue
			}
			if err := b.Build(ctx, em.Export); err != nil {
				out = append(out, pipeline.ItemFailure{MessageID: m.ID, Err: err})
			}
		}
		return out
	}
}

// errBusy: another worker holds the job under a live lease; the message comes back later, by
// when the holder finished or its lease ran out.
var errBusy = notify.Errorf(notify.ECONFLICT, "export is being built by another worker")

// Build claims job id and builds its file. A job that is done, failed, canceled or expired is
// left alone (nil). A held job returns a retryable error. A failure of the rows themselves (an
// unknown notification) ends the job FAILED; any other error leaves it to the next attempt —
// which restarts the file from its first row: an unfinished object is never kept.
func (b *Builder) Build(ctx context.Context, id string) error {
	now := b.d.Clock.Now()
	j, claimed, err := b.d.Jobs.ClaimExport(ctx, id, now, now.Add(b.Lease))
	if notify.ErrorCode(err) == notify.ENOTFOUND {
		return nil // expired and removed: nothing to build
	}
	if err != nil {
		return fmt.Errorf("export %s: claim: %w", id, err)
	}
	if !claimed {
		if j.Status == notify.ExportProcessing {
			return errBusy
		}
		return nil
	}
	log := b.d.Logger.With(slog.String("export_id", id), slog.Int("attempt", j.Attempts))
	start := time.Now()
	rows, size, err := b.write(ctx, j)
	switch {
	case notify.ErrorCode(err) == notify.ECONFLICT:
		log.InfoContext(ctx, "export stopped: canceled or taken over", slog.String("error", err.Error()))
		return nil
	case err != nil && permanent(err):
		log.WarnContext(ctx, "export failed", slog.String("error", err.Error()))
		ferr := b.d.Jobs.FinishExport(ctx, id, j.Attempts, notify.ExportResult{Status: notify.ExportFailed, Error: err.Error()}, b.d.Clock.Now())
		if ferr != nil && notify.ErrorCode(ferr) != notify.ECONFLICT {
			return fmt.Errorf("export %s: record failure: %w", id, ferr)
		}
		return nil
	case err != nil:
		return fmt.Errorf("export %s: %w", id, err)
	}
	err = b.d.Jobs.FinishExport(ctx, id, j.Attempts, notify.ExportResult{Status: notify.ExportDone, Rows: rows, Bytes: size, Object: Key(id, j.Format)}, b.d.Clock.Now())
	if notify.ErrorCode(err) == notify.ECONFLICT {
		return nil // canceled while the last page was written: the file is there, the job says CANCELED
	}
	if err != nil {
		return fmt.Errorf("export %s: finish: %w", id, err)
	}
	log.InfoContext(ctx, "export done", slog.Int64("rows", rows), slog.Int64("bytes", size),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()))
	return nil
}

// permanent reports whether err is about the job's own input, which another attempt would not change.
func permanent(err error) bool {
	c := notify.ErrorCode(err)
	return c == notify.EINVALID || c == notify.ENOTFOUND
}

// countingWriter counts the bytes that reach the object.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// write streams j's rows into a new object and commits it; it returns rows and bytes written.
func (b *Builder) write(ctx context.Context, j *notify.ExportJob) (rows int64, size int64, err error) {
	obj, err := b.d.Files.Create(ctx, Key(j.ID, j.Format))
	if err != nil {
		return 0, 0, fmt.Errorf("create object: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if aerr := obj.Abort(context.WithoutCancel(ctx)); aerr != nil {
				b.d.Logger.WarnContext(ctx, "export: abort object", slog.String("export_id", j.ID), slog.String("error", aerr.Error()))
			}
		}
	}()
	cw := &countingWriter{w: obj}
	bw := bufio.NewWriterSize(cw, 256<<10)
	rw := newRowWriter(bw, j.Format)
	checkpoint := func() error {
		return b.d.Jobs.CheckpointExport(ctx, j.ID, j.Attempts, rows, b.d.Clock.Now().Add(b.Lease))
	}
	emit := func(rec []string) error {
		rows++
		return rw.write(rec)
	}
	switch j.Kind {
	case notify.ExportDeliveries:
		err = b.deliveries(ctx, j, rw, emit, checkpoint)
	case notify.ExportAudit:
		err = b.audit(ctx, j, rw, emit, checkpoint)
	case notify.ExportNotifications:
		err = b.notifications(ctx, j, rw, emit, checkpoint)
	case notify.ExportSuppressions:
		err = b.suppressions(ctx, j, rw, emit, checkpoint)
	case notify.ExportUser:
		err = b.user(ctx, j, rw, emit, checkpoint)
	default:
		err = notify.FieldError("kind", "unknown export kind %q", j.Kind)
	}
	if err == nil {
		err = rw.flush()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return 0, 0, err
	}
	if err := obj.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("commit object: %w", err)
	}
	committed = true
	return rows, cw.n, nil
}

// walk pages through a listing from its first page: page(cursor) writes one page's rows and
// returns the next cursor ("" after the last); the job is checkpointed between pages.
func walk(checkpoint func() error, page func(cursor string) (next string, err error)) error {
	cursor := ""
	for {
		next, err := page(cursor)
		if err != nil || next == "" {
			return err
		}
		cursor = next
		if err := checkpoint(); err != nil {
			return err
		}
	}
}

// DeliveryColumns are the columns of a deliveries export, in order.
var DeliveryColumns = []string{"delivery_id", "notification_id", "user_id", "channel", "provider", "app",
	"address", "status", "reason", "detail", "attempts", "provider_message_id", "updated_at"}

func (b *Builder) deliveries(ctx context.Context, j *notify.ExportJob, rw *rowWriter, emit func([]string) error, checkpoint func() error) error {
	f := j.Filter
	if f.NotificationID == "" {
		return notify.FieldError("notification_id", "is required for a deliveries export")
	}
	columns := DeliveryColumns
	var raw map[string]string
	if j.Unmasked {
		if b.d.Addresses == nil || b.d.Notifications == nil {
			return notify.FieldError("unmasked", "unmasked exports are not available in this runtime")
		}
		n, err := b.d.Notifications.GetNotification(ctx, f.NotificationID)
		if err != nil {
			return fmt.Errorf("read notification %s: %w", f.NotificationID, err)
		}
		if raw, err = addressIndex(ctx, b.d.Addresses, n); err != nil {
			return err
		}
		columns = append(append([]string(nil), DeliveryColumns...), "address_unmasked")
	}
	if _, err := rw.header(columns); err != nil {
		return err
	}
	return walk(checkpoint, func(cursor string) (string, error) {
		ds, next, err := b.d.Deliveries.ListDeliveries(ctx, f.NotificationID, cursor, b.Page)
		if err != nil {
			return "", fmt.Errorf("list deliveries of %s: %w", f.NotificationID, err)
		}
		for _, d := range ds {
			if (f.Status != "" && string(d.Status) != f.Status) || (f.Channel != "" && string(d.Channel) != f.Channel) ||
				(f.Reason != "" && d.Reason != f.Reason) || (!f.From.IsZero() && d.UpdatedAt.Before(f.From)) ||
				(!f.To.IsZero() && !d.UpdatedAt.Before(f.To)) {
				continue
			}
			// Stores keep only the masked address; a provider's detail may quote one, so it is
			// masked too.
			rec := []string{d.ID, d.NotificationID, d.UserID, string(d.Channel), string(d.Provider), d.App,
				d.AddressMasked, string(d.Status), d.Reason, notify.MaskText(d.Detail), strconv.Itoa(d.Attempts),
				d.ProviderMessageID, stamp(d.UpdatedAt)}
			if raw != nil {
				rec = append(rec, raw[d.ID]) // empty: the address is no longer where the send found it
			}
			if err := emit(rec); err != nil {
				return "", err
			}
		}
		return next, nil
	})
}

// AuditColumns are the columns of an audit export, in order.
var AuditColumns = []string{"id", "at", "actor", "actor_kind", "action", "target_type", "target_id", "params", "result", "request_id"}

func (b *Builder) audit(ctx context.Context, j *notify.ExportJob, rw *rowWriter, emit func([]string) error, checkpoint func() error) error {
	if b.d.Audit == nil {
		return notify.Errorf(notify.EINVALID, "the audit log is not available in this runtime")
	}
	if _, err := rw.header(AuditColumns); err != nil {
		return err
	}
	f := notify.AuditFilter{Action: notify.AuditAction(j.Filter.Action), From: j.Filter.From, To: j.Filter.To}
	return walk(checkpoint, func(cursor string) (string, error) {
		es, next, err := b.d.Audit.ListAudit(ctx, f, cursor, notify.MaxAuditPage)
		if err != nil {
			return "", fmt.Errorf("list audit: %w", err)
		}
		for _, e := range es {
			params, err := json.Marshal(notify.SanitizeAuditParams(e.Params))
			if err != nil {
				return "", err
			}
			if err := emit([]string{e.ID, stamp(e.At), e.Actor, string(e.ActorKind), string(e.Action), e.TargetType,
				e.TargetID, string(params), e.Result, e.RequestID}); err != nil {
				return "", err
			}
		}
		return next, nil
	})
}

// NotificationColumns are the columns of a notifications export, in order. total, sent, failed
// and skipped add up every channel's deliveries (a bulk-lane notification's are counted per
// chunk, never stored per recipient); channels are joined with spaces.
var NotificationColumns = []string{"id", "created_at", "updated_at", "status", "category", "lane", "channels",
	"recipients", "total", "sent", "failed", "skipped", "template_name", "template_version", "campaign_id", "idempotency_key"}

// notifications lists the notifications of the service that asked for the export, read whole
// one by one: the listing holds no counters.
func (b *Builder) notifications(ctx context.Context, j *notify.ExportJob, rw *rowWriter, emit func([]string) error, checkpoint func() error) error {
	if b.d.Notifications == nil {
		return notify.Errorf(notify.EINVALID, "notifications exports are not available in this runtime")
	}
	if _, err := rw.header(NotificationColumns); err != nil {
		return err
	}
	f := notify.NotificationFilter{Service: j.Service, Status: notify.NotificationStatus(j.Filter.Status), From: j.Filter.From, To: j.Filter.To}
	return walk(checkpoint, func(cursor string) (string, error) {
		page, next, err := b.d.Notifications.ListNotifications(ctx, f, cursor, min(b.Page, notify.MaxReservedPage))
		if err != nil {
			return "", fmt.Errorf("list notifications of %s: %w", j.Service, err)
		}
		for _, sum := range page {
			n, err := b.d.Notifications.GetNotification(ctx, sum.ID)
			if notify.ErrorCode(err) == notify.ENOTFOUND {
				continue // removed since it was listed
			}
			if err != nil {
				return "", fmt.Errorf("read notification %s: %w", sum.ID, err)
			}
			if j.Filter.Channel != "" && !n.HasChannel(notify.Channel(j.Filter.Channel)) {
				continue
			}
			channels := make([]string, len(n.Channels))
			for i, c := range n.Channels {
				channels[i] = string(c)
			}
			lane := n.Lane
			if lane == "" {
				lane = notify.LaneRealtime // the pipeline's reading of an unset lane
			}
			campaign, version := "", ""
			if notify.IsCampaignID(n.ID) {
				campaign = n.ID // a campaign's notification shares its id
			}
			if n.TemplateVersion > 0 {
				version = strconv.Itoa(n.TemplateVersion)
			}
			sum := n.Stats.Sum()
			if err := emit([]string{n.ID, stamp(n.CreatedAt), stamp(n.UpdatedAt), string(n.Status), string(n.Category), string(lane),
				strings.Join(channels, " "), strconv.Itoa(n.RecipientCount), strconv.Itoa(sum.Total), strconv.Itoa(sum.Sent),
				strconv.Itoa(sum.Failed), strconv.Itoa(sum.Skipped), n.TemplateName, version, campaign, n.IdempotencyKey}); err != nil {
				return "", err
			}
		}
		return next, nil
	})
}

// SuppressionColumns are the columns of a suppressions export, in order: what the stores keep,
// the address masked (its hash, which a guess could be checked against, is left out).
var SuppressionColumns = []string{"address", "channel", "reason", "created_at"}

func (b *Builder) suppressions(ctx context.Context, j *notify.ExportJob, rw *rowWriter, emit func([]string) error, checkpoint func() error) error {
	if b.d.Suppressions == nil {
		return notify.Errorf(notify.EINVALID, "suppressions exports are not available in this runtime")
	}
	if _, err := rw.header(SuppressionColumns); err != nil {
		return err
	}
	f := notify.SuppressionFilter{Channel: notify.Channel(j.Filter.Channel), Reason: j.Filter.Reason, From: j.Filter.From, To: j.Filter.To}
	return walk(checkpoint, func(cursor string) (string, error) {
		page, next, err := b.d.Suppressions.ListSuppressions(ctx, f, cursor, min(b.Page, notify.MaxSuppressionPage))
		if err != nil {
			return "", fmt.Errorf("list suppressions: %w", err)
		}
		for _, sp := range page {
			if err := emit([]string{sp.Masked, string(sp.Channel), sp.Reason, stamp(sp.CreatedAt)}); err != nil {
				return "", err
			}
		}
		return next, nil
	})
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// rowWriter writes rows as CSV (a header line first) or JSON Lines (objects keyed by column).
type rowWriter struct {
	format notify.ExportFormat
	csv    *csv.Writer
	w      io.Writer
	cols   []string
	buf    []byte
}

func newRowWriter(w io.Writer, f notify.ExportFormat) *rowWriter {
	rw := &rowWriter{format: f, w: w}
	if f != notify.ExportJSONL {
		rw.csv = csv.NewWriter(w)
	}
	return rw
}

func (rw *rowWriter) header(cols []string) (bool, error) {
	rw.cols = cols
	if rw.csv != nil {
		return true, rw.csv.Write(cols)
	}
	return false, nil
}

func (rw *rowWriter) write(rec []string) error {
	if rw.csv != nil {
		return rw.csv.Write(rec)
	}
	if len(rec) != len(rw.cols) {
		return errors.New("export: row and columns differ")
	}
	b := append(rw.buf[:0], '{')
	for i, c := range rw.cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, c)
		b = append(b, ':')
		v, _ := json.Marshal(rec[i])
		b = append(b, v...)
	}
	b = append(b, '}', '\n')
	rw.buf = b
	_, err := rw.w.Write(b)
	return err
}

func (rw *rowWriter) flush() error {
	if rw.csv != nil {
		rw.csv.Flush()
		return rw.csv.Error()
	}
	return nil
}

// UserColumns are the columns of a user export: what the row is (device, contact, preferences,
// suppression, inbox_item, notification, audit, or note), its id, its time, and the record as
// JSON.
var UserColumns = []string{"record", "id", "at", "data"}

// user writes everything Herald holds on f.UserID, decrypted for the operator who asked (the
// job and its download are audited like every export): devices (push tokens and web push
// subscriptions), the contact, preferences, the suppressions of the contact's addresses (kept
// as hashes: the row says which address), the inbox, the notifications sent to the user alone
// (through the recipient index; a note says so where there is none), and the audit entries
// about the user.
func (b *Builder) user(ctx context.Context, j *notify.ExportJob, rw *rowWriter, emit func([]string) error, checkpoint func() error) error {
	user := j.Filter.UserID
	if user == "" {
		return notify.FieldError("user_id", "is required for a user export")
	}
	if b.d.Users == nil {
		return notify.Errorf(notify.EINVALID, "user exports are not available in this runtime")
	}
	if _, err := rw.header(UserColumns); err != nil {
		return err
	}
	row := func(record, id string, at time.Time, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return emit([]string{record, id, stamp(at), string(data)})
	}
	ids := []string{user}
	devices, err := b.d.Users.ListDevices(ctx, ids)
	if err != nil {
		return fmt.Errorf("devices of %s: %w", user, err)
	}
	for _, d := range devices[user] {
		if err := row("device", d.Token, d.UpdatedAt, d); err != nil {
			return err
		}
	}
	contacts, err := b.d.Users.GetContacts(ctx, ids)
	if err != nil {
		return fmt.Errorf("contact of %s: %w", user, err)
	}
	if c, ok := contacts[user]; ok {
		if err := row("contact", user, c.UpdatedAt, c); err != nil {
			return err
		}
		keys := map[string]string{}
		if c.Email != "" {
			keys[notify.AddressKey(notify.ChannelEmail, c.Email)] = c.Email
		}
		if c.Phone != "" {
			keys[notify.AddressKey(notify.ChannelSMS, c.Phone)] = c.Phone
		}
		if len(keys) > 0 {
			sup, err := b.d.Users.Suppressed(ctx, slices.Collect(maps.Keys(keys)))
			if err != nil {
				return fmt.Errorf("suppressions of %s: %w", user, err)
			}
			for k, s := range sup {
				v := struct {
					notify.Suppression
					Address string `json:"address_unmasked"`
				}{s, keys[k]}
				if err := row("suppression", k, s.CreatedAt, v); err != nil {
					return err
				}
			}
		}
	}
	prefs, err := b.d.Users.GetPreferences(ctx, ids)
	if err != nil {
		return fmt.Errorf("preferences of %s: %w", user, err)
	}
	if p, ok := prefs[user]; ok {
		if err := row("preferences", user, p.UpdatedAt, p); err != nil {
			return err
		}
	}
	now := b.d.Clock.Now()
	if err := walk(checkpoint, func(cursor string) (string, error) {
		items, next, err := b.d.Users.ListInbox(ctx, user, cursor, b.Page, now)
		if err != nil {
			return "", fmt.Errorf("inbox of %s: %w", user, err)
		}
		for _, it := range items {
			if err := row("inbox_item", it.ID, it.CreatedAt, it); err != nil {
				return "", err
			}
		}
		return next, nil
	}); err != nil {
		return err
	}
	if b.d.Notifications != nil {
		err := walk(checkpoint, func(cursor string) (string, error) {
			page, next, err := b.d.Notifications.ListNotifications(ctx, notify.NotificationFilter{User: user}, cursor, notify.MaxReservedPage)
			if err != nil {
				return "", err
			}
			for _, n := range page {
				if err := row("notification", n.ID, n.CreatedAt, n); err != nil {
					return "", err
				}
			}
			return next, nil
		})
		switch {
		case errors.Is(err, notify.ErrNoRecipientIndex):
			if err := row("note", "notifications", time.Time{}, map[string]string{"note": notify.ErrNoRecipientIndex.Error() +
				": the notifications sent to this user cannot be listed"}); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("notifications of %s: %w", user, err)
		}
	}
	if b.d.Audit != nil {
		f := notify.AuditFilter{TargetType: notify.AuditTargetUser, TargetID: user}
		if err := walk(checkpoint, func(cursor string) (string, error) {
			es, next, err := b.d.Audit.ListAudit(ctx, f, cursor, notify.MaxAuditPage)
			if err != nil {
				return "", fmt.Errorf("audit of %s: %w", user, err)
			}
			for _, e := range es {
				if err := row("audit", e.ID, e.At, e); err != nil {
					return "", err
				}
			}
			return next, nil
		}); err != nil {
			return err
		}
	}
	return nil
}
