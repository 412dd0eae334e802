package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"herald/internal/notify"
)

// The operator console: a page of plain HTML, JS and CSS embedded in the binary, served at
// /console by whichever handler serves the operator routes (locally the one handler, in AWS the
// admin function). The page itself holds no data and loads without credentials; everything it
// shows comes from the operator routes, which it calls under /console/api/… — each such path is
// /v1/admin/… with its prefix swapped, served by the same route and checks. Locally the console
// sends an admin service's API key as the bearer token; in AWS API Gateway verifies the
// operator's JWT on /console/api/… (one authorizer per route: /v1/admin/… keeps IAM for the CLI)
// and Options.Authenticate maps it to an operator Principal.

//go:embed console
var consoleFiles embed.FS

// consoleAssets are the files under /console/ besides the page.
var consoleAssets = map[string]string{
	"app.js":    "text/javascript; charset=utf-8",
	"style.css": "text/css; charset=utf-8",
}

// consoleAPIPrefix is where the console calls the operator routes: /console/api/x is /v1/admin/x.
const consoleAPIPrefix = "/console/api/"

// registerConsole adds the console's page, assets and API prefix to the mux.
func (s *server) registerConsole() {
	s.mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		serveConsoleFile(w, r, "index.html", "text/html; charset=utf-8")
	})
	s.mux.HandleFunc("GET /console/{file}", func(w http.ResponseWriter, r *http.Request) {
		ct, ok := consoleAssets[r.PathValue("file")]
		if !ok {
			infoOf(r).unmatched = true
			s.writeError(w, r, notify.Errorf(notify.ENOTFOUND, "no such console file"))
			return
		}
		serveConsoleFile(w, r, r.PathValue("file"), ct)
	})
	s.mux.HandleFunc(consoleAPIPrefix+"{path...}", func(w http.ResponseWriter, r *http.Request) {
		target := adminPrefix + r.PathValue("path")
		if path.Clean(target) != target { // an escaped "..", "." or "/" must not step out of /v1/admin/
			infoOf(r).unmatched = true
			s.writeError(w, r, notify.Errorf(notify.ENOTFOUND, "no such endpoint; see GET /openapi.json"))
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = target
		r2.URL.RawPath = ""
		r2.Pattern = ""
		infoOf(r).console = true
		s.mux.ServeHTTP(w, r2)
	})
}

// consoleFile is an embedded file as served: its bytes, gzipped, and its ETag.
type consoleFile struct {
	raw, gz []byte
	etag    string
}

var consoleServed = func() map[string]consoleFile {
	out := map[string]consoleFile{}
	for _, name := range append(slices.Collect(maps.Keys(consoleAssets)), "index.html") {
		b, err := consoleFiles.ReadFile("console/" + name)
		if err != nil {
			continue // served as missing: a build mistake
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		sum := sha256.Sum256(b)
		out[name] = consoleFile{raw: b, gz: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return out
}()

// serveConsoleFile serves an embedded file with a strong ETag (a 304 for If-None-Match: the
// browser revalidates, no-cache, and gets nothing again while the binary is the same) and
// gzipped when the client takes it.
func serveConsoleFile(w http.ResponseWriter, r *http.Request, name, contentType string) {
	f, ok := consoleServed[name]
	if !ok { // every name served is embedded: a build mistake
		http.Error(w, "console file missing", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// Only the console's own files and its own origin's routes: no inline script, no third party.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	if etagMatches(r.Header.Get("If-None-Match"), f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.raw
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// etagMatches reports whether an If-None-Match header names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip (and not with q=0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// isAdmin reports whether the request may use the operator routes: an admin service's key, or an
// operator signed in to the console.
func (s *server) isAdmin(r *http.Request) bool {
	i := infoOf(r)
	return i.operator || s.admins[i.service]
}

// operatorOnly refuses a caller that may not use the operator routes (see isAdmin): every
// /v1/admin/ handler calls it first (after arming its audit entry, where it writes one, so a
// refused attempt is audited too).
func (s *server) operatorOnly(r *http.Request) error {
	if !s.isAdmin(r) {
		return notify.Errorf(notify.EFORBIDDEN, "the operator routes (%s…) need a service listed as admin in herald.yaml, or a console operator", adminPrefix)
	}
	return nil
}

// operatorPrincipal checks an operator Principal: only through the console's API prefix, only on
// the operator routes.
func operatorPrincipal(r *http.Request, rt route) error {
	if !infoOf(r).console || !strings.HasPrefix(rt.Path, adminPrefix) {
		return notify.Errorf(notify.EFORBIDDEN, "a console sign-in may only call the operator routes under %s", consoleAPIPrefix)
	}
	return nil
}

// operatorView reports whether the request is an operator route called by an admin: those read
// and act on any service's notifications and campaigns, which the service routes scope to the
// caller.
func (s *server) operatorView(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, adminPrefix) && s.isAdmin(r)
}

// The operator's views of one notification and one campaign, and the campaign controls, for any
// service: the same answers as the service routes, which only show the caller's own.

func (s *server) adminGetNotification(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	return s.getNotification(w, r)
}

func (s *server) adminGetCampaign(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	return s.getCampaign(w, r)
}

func (s *server) adminPauseCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditCampaignPause, notify.AuditTargetCampaign, s.pauseCampaign)
}

func (s *server) adminResumeCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditCampaignResume, notify.AuditTargetCampaign, s.resumeCampaign)
}

func (s *server) adminCancelCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditCampaignCancel, notify.AuditTargetCampaign, s.cancelCampaign)
}
