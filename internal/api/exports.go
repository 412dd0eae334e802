package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// Exports: POST /v1/admin/exports asks for a report and answers 202 with a PENDING job; the
// export worker (its own queue) builds the file; GET /v1/admin/exports/{id} shows the job and,
// once DONE, a download link valid ExportLinkTTL; DELETE cancels a job not yet done. Creating,
// cancelling and downloading an export are audited.
//
// Locally the link is this API's own GET /exports/{id}?expires=…&sig=…, an HMAC over the id,
// the file and the expiry with a key only the server holds: an altered or expired link is 403,
// and so is one to an export past its retention. In AWS it is a presigned S3 URL (ExportLinks).

// ExportLinks mints the download link of a DONE export's file, valid until expires (a presigned
// URL in AWS). Locally the API signs its own links over ExportFiles instead.
type ExportLinks interface {
	ExportLink(ctx context.Context, j *notify.ExportJob, ttl time.Duration) (link string, expires time.Time, err error)
}

// ExportFiles opens a committed export file by its key (the local runtime's data directory).
type ExportFiles interface {
	Open(key string) (*os.File, error)
}

// exportRequest is POST /v1/admin/exports's body.
type exportRequest struct {
	Kind           notify.ExportKind   `json:"kind"`
	Format         notify.ExportFormat `json:"format"`
	NotificationID string              `json:"notification_id"`
	CampaignID     string              `json:"campaign_id"`
	Status         string              `json:"status"`
	Channel        string              `json:"channel"`
	Reason         string              `json:"reason"`
	Action         string              `json:"action"`
	UserID         string              `json:"user_id"`
	From           *time.Time          `json:"from"`
	To             *time.Time          `json:"to"`
	Unmasked       bool                `json:"unmasked"`
}

// exportView is a job as the API shows it.
type exportView struct {
	*notify.ExportJob
	DownloadURL       string     `json:"download_url,omitempty"`
	DownloadExpiresAt *time.Time `json:"download_expires_at,omitempty"`
}

func (s *server) exportsAvailable(w http.ResponseWriter, r *http.Request, what string) bool {
	if s.exports == nil {
		writeNotImplemented(w, "exports are not available in this runtime")
		return false
	}
	return true
}

// exportFilters are the filters each kind takes besides from and to (on the rows' time:
// updated_at of a delivery, at of an audit entry, created_at of a notification or suppression).
var exportFilters = map[notify.ExportKind][]string{
	notify.ExportDeliveries:    {"notification_id", "status", "channel", "reason"},
	notify.ExportAudit:         {"action"},
	notify.ExportNotifications: {"status", "channel"},
	notify.ExportSuppressions:  {"channel", "reason"},
	notify.ExportUser:          {"user_id"},
}

// deliveryStatuses are the statuses a deliveries export's status filter accepts.
var deliveryStatuses = []notify.DeliveryStatus{notify.DeliveryPending, notify.DeliverySending, notify.DeliverySent,
	notify.DeliveryFailed, notify.DeliverySkipped, notify.DeliveryExpired}

// validate checks the request and returns the job's filter.
func (q *exportRequest) validate() (notify.ExportFilter, error) {
	var f notify.ExportFilter
	if !slices.Contains(notify.ExportKinds, q.Kind) {
		return f, notify.FieldError("kind", "must be one of %s", oneOf(notify.ExportKinds))
	}
	switch q.Format {
	case "":
		q.Format = notify.ExportCSV
	case notify.ExportCSV, notify.ExportJSONL:
	default:
		return f, notify.FieldError("format", "must be csv or jsonl")
	}
	if q.Unmasked && q.Kind != notify.ExportDeliveries {
		// A suppression keeps only a hash and a masked form, audit entries are sanitized when
		// appended, and a notification row holds no address.
		return f, notify.FieldError("unmasked", "only a deliveries export can add raw addresses")
	}
	if err := checkFilterParams(filterParam{"notification_id", q.NotificationID}, filterParam{"campaign_id", q.CampaignID},
		filterParam{"status", q.Status}, filterParam{"channel", q.Channel}, filterParam{"reason", q.Reason}, filterParam{"action", q.Action},
		filterParam{"user_id", q.UserID}); err != nil {
		return f, err
	}
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"from", q.From}, {"to", q.To}} {
		if t.at != nil {
			if err := checkYear(t.name, *t.at); err != nil {
				return f, err
			}
		}
	}
	if q.From != nil && q.To != nil && !q.From.Before(*q.To) {
		return f, notify.FieldError("to", "must be after from")
	}
	f = notify.ExportFilter{NotificationID: q.NotificationID, Status: q.Status, Channel: q.Channel, Reason: q.Reason, Action: q.Action,
		UserID: q.UserID}
	if q.From != nil {
		f.From = q.From.UTC()
	}
	if q.To != nil {
		f.To = q.To.UTC()
	}
	// Each kind takes its own filters; any other one set is refused by name.
	for _, p := range []filterParam{{"notification_id", q.NotificationID}, {"campaign_id", q.CampaignID}, {"status", q.Status},
		{"channel", q.Channel}, {"reason", q.Reason}, {"action", q.Action}, {"user_id", q.UserID}} {
		if p.v == "" || slices.Contains(exportFilters[q.Kind], p.name) {
			continue
		}
		if q.Kind == notify.ExportDeliveries && p.name == "campaign_id" {
			continue // refused below, saying why
		}
		return f, notify.FieldError(p.name, "does not filter %s exports (they take %s, from and to)", q.Kind, strings.Join(exportFilters[q.Kind], ", "))
	}
	if q.Channel != "" && !notify.Channel(q.Channel).Valid() {
		return f, notify.FieldError("channel", "unknown channel %q; one of %s", q.Channel, oneOf(notify.Channels))
	}
	switch q.Kind {
	case notify.ExportDeliveries:
		if q.CampaignID != "" || strings.HasPrefix(q.NotificationID, "c_") {
			return f, notify.FieldError("campaign_id", "a campaign is sent on the bulk lane, which stores no row per delivery: its totals are on GET /v1/campaigns/{id}")
		}
		if q.NotificationID == "" {
			return f, notify.FieldError("notification_id", "is required for a deliveries export")
		}
		if q.Status != "" && !slices.Contains(deliveryStatuses, notify.DeliveryStatus(q.Status)) {
			return f, notify.FieldError("status", "unknown delivery status %q; one of %s", q.Status, oneOf(deliveryStatuses))
		}
	case notify.ExportUser:
		if q.UserID == "" {
			return f, notify.FieldError("user_id", "is required for a user export: whose data it holds")
		}
		if q.From != nil || q.To != nil {
			return f, notify.FieldError("from", "a user export holds everything on the user, whenever it was written")
		}
	case notify.ExportAudit:
		if q.Action != "" && !notify.AuditAction(q.Action).Known() {
			return f, notify.FieldError("action", "unknown action %q", q.Action)
		}
	case notify.ExportNotifications:
		if q.Status != "" && !slices.Contains(listableStatuses, notify.NotificationStatus(q.Status)) {
			return f, notify.FieldError("status", "unknown notification status %q; one of %s", q.Status, oneOf(listableStatuses))
		}
	}
	return f, nil
}

// createExport is POST /v1/admin/exports.
func (s *server) createExport(w http.ResponseWriter, r *http.Request) (err error) {
	now := s.clock.Now().UTC()
	id := notify.NewID("x_", now)
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditExportCreate, notify.AuditTargetExport, id, params, &err)
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	var q exportRequest
	if err := s.decode(w, r, &q); err != nil {
		return err
	}
	f, err := q.validate()
	params["kind"], params["format"], params["unmasked"] = string(q.Kind), string(q.Format), strconv.FormatBool(q.Unmasked)
	for k, v := range map[string]string{"notification_id": f.NotificationID, "user_id": f.UserID, "status": f.Status, "channel": f.Channel,
		"reason": f.Reason, "action": f.Action, "from": timeParam(q.From), "to": timeParam(q.To)} {
		if v != "" {
			params[k] = v
		}
	}
	if err != nil {
		return err
	}
	if q.Kind == notify.ExportNotifications && infoOf(r).operator {
		return notify.FieldError("kind", "a notifications export lists the asking service's notifications, and a console operator has none: ask with that service's admin key (herald export create)")
	}
	if !s.exportsAvailable(w, r, "exports") {
		return nil
	}
	if q.Kind == notify.ExportDeliveries {
		n, err := s.store.GetNotification(r.Context(), f.NotificationID)
		if err != nil {
			if notify.ErrorCode(err) == notify.ENOTFOUND {
				return notify.FieldError("notification_id", "no such notification")
			}
			return fmt.Errorf("export: %w", err)
		}
		if n.Lane == notify.LaneBulk {
			return notify.FieldError("notification_id", "a bulk-lane notification stores no row per delivery: its totals are on GET /v1/notifications/{id}")
		}
	}
	j, _, err := s.exports.CreateExport(r.Context(), notify.ExportJob{ID: id, Service: serviceOf(r), Kind: q.Kind,
		Format: q.Format, Filter: f, Unmasked: q.Unmasked, CreatedAt: now})
	if err != nil {
		return fmt.Errorf("create export: %w", err)
	}
	body, _ := json.Marshal(notify.ExportMessage{Export: id})
	if err := s.queue.Send(r.Context(), notify.QueueExport, notify.OutMessage{Body: body}); err != nil {
		// The job stays PENDING with nothing to build it; cancel it so it does not look queued.
		if _, cerr := s.exports.CancelExport(context.WithoutCancel(r.Context()), id, s.clock.Now()); cerr != nil {
			s.log.ErrorContext(r.Context(), "export: cancel unqueued job", "export_id", id, "error", cerr.Error())
		}
		return fmt.Errorf("queue export: %w", err)
	}
	writeJSON(w, http.StatusAccepted, exportView{ExportJob: j})
	return nil
}

// getExport is GET /v1/admin/exports/{id}: the job, and a fresh download link when DONE.
func (s *server) getExport(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	if !s.exportsAvailable(w, r, "exports") {
		return nil
	}
	j, err := s.exports.GetExport(r.Context(), r.PathValue("id"))
	if err != nil {
		return fmt.Errorf("get export: %w", err)
	}
	v, err := s.viewExport(r, j)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// viewExport is j as the API shows it, with a fresh download link when DONE.
func (s *server) viewExport(r *http.Request, j *notify.ExportJob) (exportView, error) {
	v := exportView{ExportJob: j}
	if j.Status == notify.ExportDone {
		link, exp, err := s.exportLink(r, j)
		if err != nil {
			return v, fmt.Errorf("export link: %w", err)
		}
		if exp.After(j.ExpiresAt) {
			exp = j.ExpiresAt // a link never outlives the file
		}
		v.DownloadURL, v.DownloadExpiresAt = link, &exp
	}
	return v, nil
}

type exportList struct {
	Exports    []exportView `json:"exports"`
	NextCursor string       `json:"next_cursor"`
}

// listExports is GET /v1/admin/exports: every service's jobs, newest first, ?limit= (1–100,
// default 20) a page, each DONE one with a fresh download link, as GET /v1/admin/exports/{id}
// shows it.
func (s *server) listExports(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	if !s.exportsAvailable(w, r, "exports") {
		return nil
	}
	limit, err := queryLimit(r, 20, notify.MaxExportPage)
	if err != nil {
		return err
	}
	cursor, err := s.queryCursor(r, "admin-exports", "")
	if err != nil {
		return err
	}
	page, next, err := s.exports.ListExports(r.Context(), cursor, limit)
	if err != nil {
		return fmt.Errorf("list exports: %w", err)
	}
	out := exportList{Exports: make([]exportView, 0, len(page)), NextCursor: s.sealCursor("admin-exports", "", next)}
	for i := range page {
		v, err := s.viewExport(r, &page[i])
		if err != nil {
			return err
		}
		out.Exports = append(out.Exports, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cancelExport is DELETE /v1/admin/exports/{id}.
func (s *server) cancelExport(w http.ResponseWriter, r *http.Request) (err error) {
	id := r.PathValue("id")
	defer s.audit(w, r, notify.AuditExportCancel, notify.AuditTargetExport, id, nil, &err)
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	if !s.exportsAvailable(w, r, "exports") {
		return nil
	}
	j, err := s.exports.CancelExport(r.Context(), id, s.clock.Now())
	if err != nil {
		return fmt.Errorf("cancel export: %w", err)
	}
	writeJSON(w, http.StatusOK, exportView{ExportJob: j})
	return nil
}

// exportLink mints j's link: presigned (ExportLinks) or signed by this API.
func (s *server) exportLink(r *http.Request, j *notify.ExportJob) (string, time.Time, error) {
	if s.exportLinks != nil {
		return s.exportLinks.ExportLink(r.Context(), j, s.exportLinkTTL)
	}
	if s.exportFiles == nil {
		return "", time.Time{}, notify.Errorf(notify.EINTERNAL, "no export file store")
	}
	exp := s.clock.Now().Add(s.exportLinkTTL).Truncate(time.Second)
	if exp.After(j.ExpiresAt) {
		exp = j.ExpiresAt.Truncate(time.Second)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: "/exports/" + j.ID,
		RawQuery: url.Values{"expires": {strconv.FormatInt(exp.Unix(), 10)}, "sig": {s.exportSig(j.ID, j.Object, exp.Unix())}}.Encode()}
	return u.String(), exp, nil
}

// exportSig is the HMAC of a local download link.
func (s *server) exportSig(id, object string, expires int64) string {
	m := hmac.New(sha256.New, s.exportKey())
	fmt.Fprintf(m, "herald export link\x00%s\x00%s\x00%d", id, object, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// exportKey derives the link key from the cursor key, so no new secret needs configuring.
func (s *server) exportKey() []byte {
	k := sha256.Sum256(append([]byte("herald export links\x00"), s.cursorKey...))
	return k[:]
}

// downloadExport is GET /exports/{id}?expires=&sig=: the file behind a local signed link. It
// takes no API key — the signature is the authority — and answers 403 to an altered or expired
// link and to an export past its retention. The download is audited as the service the link was
// issued to.
func (s *server) downloadExport(w http.ResponseWriter, r *http.Request) (err error) {
	if s.exports == nil || s.exportFiles == nil {
		return notify.Errorf(notify.ENOTFOUND, "no such endpoint; see GET /openapi.json")
	}
	id, q := r.PathValue("id"), r.URL.Query()
	expires, perr := strconv.ParseInt(q.Get("expires"), 10, 64)
	sig := q.Get("sig")
	j, gerr := s.exports.GetExport(r.Context(), id)
	if gerr != nil && notify.ErrorCode(gerr) != notify.ENOTFOUND {
		return fmt.Errorf("download export: %w", gerr)
	}
	object := ""
	if j != nil {
		object = j.Object
	}
	if perr != nil || sig == "" || j == nil || !hmac.Equal([]byte(sig), []byte(s.exportSig(id, object, expires))) {
		return notify.Errorf(notify.EFORBIDDEN, "this download link is not valid")
	}
	if !s.clock.Now().Before(time.Unix(expires, 0)) {
		return notify.Errorf(notify.EFORBIDDEN, "this download link has expired; GET /v1/admin/exports/%s for a new one", id)
	}
	if j.Status != notify.ExportDone {
		return notify.Errorf(notify.EFORBIDDEN, "export %s is %s", id, j.Status)
	}
	infoOf(r).service = j.Service
	params := map[string]string{"rows": strconv.FormatInt(j.Rows, 10), "via": "signed_link"}
	defer s.audit(w, r, notify.AuditExportDownload, notify.AuditTargetExport, id, params, &err)
	f, err := s.exportFiles.Open(j.Object)
	if err != nil {
		if notify.ErrorCode(err) == notify.ENOTFOUND {
			return notify.Errorf(notify.EFORBIDDEN, "export %s has no file any more", id)
		}
		return fmt.Errorf("open export: %w", err)
	}
	defer f.Close()
	ctype := "text/csv; charset=utf-8"
	if j.Format == notify.ExportJSONL {
		ctype = "application/x-ndjson"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+"."+string(j.Format)+`"`)
	w.Header().Set("Cache-Control", "no-store")
	if st, err := f.Stat(); err == nil {
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
	return nil
}
