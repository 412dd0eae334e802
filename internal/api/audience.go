package api

import (
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"herald/internal/audience"
	"herald/internal/notify"
)

// DefaultMaxUploadBytes is the audience list upload limit when Options.MaxUploadBytes is 0:
// 64 MiB, about four million ids of 16 bytes. API Gateway caps a request at 10 MB, so in AWS a
// larger list goes through S3 (lists/<service>/<list>, internal/audience.Importer).
const DefaultMaxUploadBytes = 64 << 20

// AudienceLists is the store side of the audience list routes: both the SQLite and the DynamoDB
// store are one.
type AudienceLists = audience.Store

// audienceUpload is POST /v1/audience-lists/{list}/members.
type audienceUpload struct {
	ListID        string              `json:"list_id"`
	Appended      int                 `json:"appended"`   // members this upload added
	Duplicates    int                 `json:"duplicates"` // lines repeating an earlier id of the upload
	Members       int64               `json:"members"`    // the list's size now
	Lines         int                 `json:"lines"`
	Rejected      []audience.Rejected `json:"rejected"` // the first 100 rejected lines
	RejectedTotal int                 `json:"rejected_total"`
}

// audienceListView is GET /v1/audience-lists/{list}.
type audienceListView struct {
	ListID  string `json:"list_id"`
	Members int64  `json:"members"`
}

// listParam returns the {list} path parameter, checked, and the store's id for it (scoped to the
// calling service).
func listParam(r *http.Request) (list, stored string, err error) {
	list = r.PathValue("list")
	if !audience.ValidListID(list) {
		return "", "", notify.FieldError("list", "must be 1–%d printable ASCII characters without spaces or /", audience.MaxListIDBytes)
	}
	return list, audience.StoredListID(serviceOf(r), list), nil
}

// appendAudienceList streams the body — one user id per line, or CSV whose first column is the
// id — into the list. It is POST, not PUT, because it appends: sending the same file twice adds
// its ids twice (within one upload they are deduplicated). Content-Length is required, so a body
// over the limit is refused before anything is appended.
func (s *server) appendAudienceList(w http.ResponseWriter, r *http.Request) (err error) {
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditAudienceListUpload, notify.AuditTargetAudienceList, r.PathValue("list"), params, &err)
	if s.lists == nil {
		writeNotImplemented(w, "audience lists are not available in this runtime")
		return nil
	}
	list, stored, err := listParam(r)
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "text/plain" && mt != "text/csv" && mt != "application/octet-stream") {
			return notify.FieldError("Content-Type", "send the list as text/plain or text/csv (one user id per line, or CSV with the id first), not %q", ct)
		}
	}
	switch {
	case r.ContentLength < 0:
		return notify.FieldError("Content-Length", "required: the upload is refused before reading when it is over %d bytes", s.maxUpload)
	case r.ContentLength > s.maxUpload:
		return &notify.Error{Code: notify.ETOOLARGE, Field: "Content-Length",
			Message: fmt.Sprintf("the list is larger than %d bytes; split it, or in AWS upload it to S3 under lists/<service>/%s", s.maxUpload, list)}
	}
	// The server's timeouts are sized for JSON requests (NewServer); an upload gets time for its
	// size at a slow but steady 256 KiB/s, and its import as long again. Where deadlines cannot
	// be moved (Lambda, a test recorder) this does nothing.
	rc := http.NewResponseController(w)
	allow := 30*time.Second + time.Duration(r.ContentLength/(256<<10))*time.Second
	_ = rc.SetReadDeadline(time.Now().Add(allow))
	_ = rc.SetWriteDeadline(time.Now().Add(2 * allow))
	body := http.MaxBytesReader(w, r.Body, s.maxUpload)
	res, err := audience.Import(r.Context(), body, s.lists, stored, audience.Options{})
	params["bytes"], params["lines"], params["appended"] = strconv.FormatInt(r.ContentLength, 10), strconv.Itoa(res.Lines), strconv.Itoa(res.Appended)
	params["rejected"] = strconv.Itoa(res.RejectedTotal)
	if notify.IsCode(err, notify.EINVALID) {
		msg := fmt.Sprintf("no valid user id in the upload (%d lines)", res.Lines)
		for i, rj := range res.Rejected {
			if i == 3 {
				msg += "; …"
				break
			}
			msg += fmt.Sprintf("; line %d: %s", rj.Line, rj.Reason)
		}
		return notify.FieldError("body", "%s", msg)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "audience list upload stopped", slog.String("list_id", list),
			slog.String("service", serviceOf(r)), slog.Int("appended", res.Appended), slog.Int("lines", res.Lines))
		return fmt.Errorf("append audience list %s after %d members: %w", list, res.Appended, err)
	}
	if res.Rejected == nil {
		res.Rejected = []audience.Rejected{}
	}
	writeJSON(w, http.StatusOK, audienceUpload{ListID: list, Appended: res.Appended, Duplicates: res.Duplicates,
		Members: res.LastSeq, Lines: res.Lines, Rejected: res.Rejected, RejectedTotal: res.RejectedTotal})
	return nil
}

// getAudienceList reports the list's size: its last sequence number, since a list's numbers are
// dense. A list never uploaded has 0 members (not 404: an empty list and a missing one behave
// alike for a campaign, which refuses both).
func (s *server) getAudienceList(w http.ResponseWriter, r *http.Request) error {
	if s.lists == nil {
		writeNotImplemented(w, "audience lists are not available in this runtime")
		return nil
	}
	list, stored, err := listParam(r)
	if err != nil {
		return err
	}
	n, err := s.lists.AppendAudienceList(r.Context(), stored, nil)
	if err != nil {
		return fmt.Errorf("read audience list %s: %w", list, err)
	}
	writeJSON(w, http.StatusOK, audienceListView{ListID: list, Members: n})
	return nil
}

// scopeAudience points the campaign's user_list sources at the caller's own lists and refuses a
// list that has no members (when the store is at hand), naming the source's field.
func (s *server) scopeAudience(r *http.Request, c *notify.Campaign) error {
	for i := range c.Audience.Sources {
		src := &c.Audience.Sources[i]
		if src.Kind != notify.AudienceUserList {
			continue
		}
		field := fmt.Sprintf("audience.sources[%d].list_id", i)
		if !audience.ValidListID(src.ListID) {
			return notify.FieldError(field, "must be 1–%d printable ASCII characters without spaces or /", audience.MaxListIDBytes)
		}
		list := src.ListID
		src.ListID = audience.StoredListID(c.Service, list)
		if s.lists == nil {
			continue
		}
		n, err := s.lists.AppendAudienceList(r.Context(), src.ListID, nil)
		if err != nil {
			return fmt.Errorf("read audience list %s: %w", list, err)
		}
		if n == 0 {
			return notify.FieldError(field, "list %q has no members: upload it first (POST /v1/audience-lists/%s/members)", list, list)
		}
	}
	return nil
}

// unscopedListID is the caller's name for a stored list id.
func unscopedListID(service, stored string) string {
	return strings.TrimPrefix(stored, service+"/")
}
