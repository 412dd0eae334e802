// Package api is Herald's HTTP API as one http.Handler: services send notifications and read
// their status; their backends register devices, contacts and preferences and serve users'
// inboxes. The same handler is served by the local runtime and, behind API Gateway, by the API
// Lambda through aws-lambda-go-api-proxy. It is written against the ports in internal/notify only.
package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"herald/internal/erasure"
	"herald/internal/netguard"
	"herald/internal/notify"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the handler. Store and Queue are required.
type Options struct {
	Store notify.Store
	Queue notify.Producer
	Clock notify.Clock // default notify.SystemClock
	// Keys maps a bearer API key to the service it authenticates.
	Keys map[string]string
	// MaxBodyBytes limits request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives the access log and internal errors; default discards.
	Logger *slog.Logger
	// LogFailuresOnly leaves requests answered below 400 out of the access log: behind API
	// Gateway, whose own access log (GatewayAccessLogFormat) has every request, a second line
	// per request would only add to the CloudWatch Logs bill.
	LogFailuresOnly bool
	// Authenticate, when set, replaces bearer-key authentication: behind API Gateway the
	// gateway has already verified a SigV4 signature (a service) or a JWT (an end user) and the
	// handler only maps that identity. Errors it returns are rendered as they are (use
	// notify.EUNAUTHORIZED); the zero Principal with no error falls back to the bearer keys.
	Authenticate func(r *http.Request) (Principal, error)
	// Admin is the queue the operator routes inspect and redrive, Queues the source queues they
	// cover (each with its DLQ), and AdminServices the services allowed to call them. Nil Admin:
	// the routes answer 404.
	Admin         notify.Queue
	Queues        []string
	AdminServices []string
	// Consumers pauses and resumes a queue's consumers (POST /v1/admin/queues/{queue}/pause,
	// /resume). Nil: those routes answer 501.
	Consumers notify.Consumers
	// Extra registers more handlers by mux pattern (e.g. "GET /sandbox/deliveries"). They need no
	// API key and share the access log and panic recovery.
	Extra map[string]http.Handler
	// Scheduler re-arms and disarms reserved sends for PATCH and DELETE /v1/notifications/{id};
	// it must be the one ingest schedules with. Nil: rescheduling answers 501, and cancelling
	// still works (a fire finds the notification CANCELED and does nothing).
	Scheduler notify.Scheduler
	// Campaigns serves /v1/campaigns; nil: those routes answer 501.
	Campaigns Campaigns
	// AudienceLists serves /v1/audience-lists (uploads) and scopes campaigns' user_list sources
	// to the caller's lists; nil: Store, if it is one, else those routes answer 501.
	AudienceLists AudienceLists
	// MaxUploadBytes limits an audience list upload; default DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// Apps are the provider apps configured per platform (herald.yaml's providers.fcm.apps and
	// providers.apns.apps). A device, direct-token recipient or campaign source naming another
	// app is refused with 400 naming the field. Nil: apps are not checked.
	Apps map[notify.Platform][]string
	// CursorKey authenticates the paging cursors the API hands out (next_cursor), so a cursor
	// that was altered, or made for another list, is refused. Every instance serving the same
	// deployment must share it. Empty: a fixed key, which still catches damaged and foreign
	// cursors but not deliberately forged ones.
	CursorKey []byte
	// UnsubscribeKey checks one-click unsubscribe tokens (notify.UnsubscribeKeyFrom of the
	// deployment's contact key, as the senders sign them). Nil: /u/{token} answers 404 to all.
	UnsubscribeKey []byte
	// VAPIDPublicKey is the Web Push application server key (providers.webpush), served at GET
	// /v1/web-push/vapid-public-key for pages to subscribe with. Empty: web push is not
	// configured, and that route and registering a subscription answer 501.
	VAPIDPublicKey string
	// LocalPushEndpoints also accepts web push endpoints on http://127.0.0.1, ::1 and localhost
	// — the sandbox's push service. Only the sandbox mode sets it; otherwise endpoints are https.
	LocalPushEndpoints bool
	// ResolveHost looks up the host of a Web Push endpoint being registered, to refuse a name
	// that resolves to a private or metadata address; nil is netguard.Resolve.
	ResolveHost func(ctx context.Context, host string) ([]netip.Addr, error)
	// Routes selects the routes served (default AllRoutes): in AWS the api function serves
	// ServiceRoutes and the admin function AdminRoutes; the others answer 404.
	Routes RouteSet
	// Audit records every operator action and serves GET /v1/admin/audit (see audit.go). Nil:
	// nothing is recorded and that route answers 501.
	Audit notify.AuditLog
	// RequestID returns the id the front end gave the request (API Gateway's request id), which
	// audit entries carry and derive their id from, so a request served twice is recorded once.
	// Nil or "": entries get a random id.
	RequestID func(r *http.Request) string
	// Exports keeps export jobs (/v1/admin/exports; see exports.go); nil: those routes answer
	// 501. ExportLinks mints download links (presigned in AWS); without it the API signs its own
	// links to GET /exports/{id}, served from ExportFiles. ExportLinkTTL is how long a link is
	// valid (default notify.ExportLinkTTL).
	Exports       notify.ExportStore
	ExportLinks   ExportLinks
	ExportFiles   ExportFiles
	ExportLinkTTL time.Duration
	// InboxEvents hears inbox reads and deletes made through the API (the live inbox stream);
	// nil: none.
	InboxEvents notify.InboxEvents
	// InboxStream serves GET /v1/users/{user}/inbox/stream, the WebSocket upgrade, after the
	// caller is authenticated for {user} (r.PathValue("user")). Nil: that route answers 501.
	InboxStream http.Handler
	// ErasureBudget is how long DELETE /v1/users/{user} works before answering 202 (default
	// DefaultErasureBudget). The erasure needs a Store that is a notify.ErasureStore; its one
	// audit entry goes to Audit, and the user's live connections are closed when InboxEvents is
	// a notify.ConnectionCloser.
	ErasureBudget time.Duration
}

// Principal is who a request acts as: a calling service, or an end user, who may only use
// their own inbox.
type Principal struct {
	Service string
	User    string
	// Operator is a person signed in to the console (in AWS: a JWT carrying the configured admin
	// group or scope), named by User. It may call the operator routes through /console/api/…
	// only, and the audit log names User.
	Operator bool
}

// route is one endpoint. This table is the only list of Herald's routes: New registers it on the
// mux and the OpenAPI test checks openapi.json against it.
type route struct {
	Method  string
	Path    string // a Go ServeMux path, which is also the OpenAPI path
	Public  bool   // served without an API key
	EndUser bool   // an end user may call it for their own {user}
	// QueryKey also takes the bearer key from the access_token query parameter: a browser
	// cannot set headers on a WebSocket handshake.
	QueryKey bool
	// UserChange is the audit action of a change to a user's shared data (docs/design.md §
	// "Authorization between services"): made by a service, it is audited, naming the service.
	UserChange notify.AuditAction
	handle     func(s *server, w http.ResponseWriter, r *http.Request) error
}

var routes = []route{
	{Method: "GET", Path: "/healthz", Public: true, handle: (*server).health},
	{Method: "GET", Path: "/u/{token}", Public: true, handle: (*server).unsubscribePage},
	{Method: "POST", Path: "/u/{token}", Public: true, handle: (*server).unsubscribe},
	{Method: "GET", Path: "/openapi.json", Public: true, handle: (*server).openAPI},

	{Method: "POST", Path: "/v1/notifications", handle: (*server).createNotification},
	{Method: "POST", Path: "/v1/notifications/batch", handle: (*server).createNotificationBatch},
	{Method: "GET", Path: "/v1/notifications/{id}", handle: (*server).getNotification},
	{Method: "PATCH", Path: "/v1/notifications/{id}", handle: (*server).rescheduleNotification},
	{Method: "DELETE", Path: "/v1/notifications/{id}", handle: (*server).cancelNotification},

	{Method: "POST", Path: "/v1/campaigns", handle: (*server).createCampaign},
	{Method: "GET", Path: "/v1/campaigns/{id}", handle: (*server).getCampaign},
	{Method: "PATCH", Path: "/v1/campaigns/{id}", handle: (*server).rescheduleCampaign},
	{Method: "DELETE", Path: "/v1/campaigns/{id}", handle: (*server).cancelCampaign},
	{Method: "POST", Path: "/v1/campaigns/{id}/pause", handle: (*server).pauseCampaign},
	{Method: "POST", Path: "/v1/campaigns/{id}/resume", handle: (*server).resumeCampaign},
	{Method: "POST", Path: "/v1/campaigns/{id}/cancel", handle: (*server).cancelCampaign},

	{Method: "POST", Path: "/v1/audience-lists/{list}/members", handle: (*server).appendAudienceList},
	{Method: "GET", Path: "/v1/audience-lists/{list}", handle: (*server).getAudienceList},

	{Method: "GET", Path: "/v1/templates", handle: (*server).listTemplates},
	{Method: "PUT", Path: "/v1/templates/{name}", handle: (*server).putTemplate},
	{Method: "GET", Path: "/v1/templates/{name}", handle: (*server).getTemplate},
	{Method: "POST", Path: "/v1/templates/{name}/preview", handle: (*server).previewTemplate},

	{Method: "DELETE", Path: "/v1/users/{user}", handle: (*server).eraseUser},
	{Method: "GET", Path: "/v1/users/{user}/erasure", handle: (*server).getErasure},
	{Method: "GET", Path: "/v1/users/{user}/devices", handle: (*server).listDevices},
	{Method: "PUT", Path: "/v1/users/{user}/devices/{token}", handle: (*server).putDevice},
	{Method: "DELETE", Path: "/v1/users/{user}/devices/{token}", UserChange: notify.AuditUserDeviceDelete, handle: (*server).deleteDevice},
	{Method: "GET", Path: "/v1/users/{user}/contacts", handle: (*server).getContacts},
	{Method: "PUT", Path: "/v1/users/{user}/contacts", UserChange: notify.AuditUserContactsPut, handle: (*server).putContacts},
	{Method: "GET", Path: "/v1/users/{user}/preferences", handle: (*server).getPreferences},
	{Method: "GET", Path: "/v1/users/{user}/web-push-subscriptions", handle: (*server).listWebPushSubscriptions},
	{Method: "PUT", Path: "/v1/users/{user}/web-push-subscriptions", handle: (*server).putWebPushSubscription},
	{Method: "DELETE", Path: "/v1/users/{user}/web-push-subscriptions", UserChange: notify.AuditUserWebPushDelete, handle: (*server).deleteWebPushSubscription},
	{Method: "GET", Path: "/v1/web-push/vapid-public-key", handle: (*server).vapidPublicKeyRoute},
	{Method: "PUT", Path: "/v1/users/{user}/preferences", UserChange: notify.AuditUserPreferencesPut, handle: (*server).putPreferences},

	{Method: "GET", Path: "/v1/users/{user}/inbox", EndUser: true, handle: (*server).listInbox},
	{Method: "GET", Path: "/v1/users/{user}/inbox/unread-count", EndUser: true, handle: (*server).unreadCount},
	{Method: "POST", Path: "/v1/users/{user}/inbox/read-all", EndUser: true, handle: (*server).markAllRead},
	{Method: "POST", Path: "/v1/users/{user}/inbox/{id}/read", EndUser: true, handle: (*server).markRead},
	{Method: "DELETE", Path: "/v1/users/{user}/inbox/{id}", EndUser: true, UserChange: notify.AuditUserInboxDelete, handle: (*server).deleteInboxItem},
	{Method: "GET", Path: "/v1/users/{user}/inbox/stream", EndUser: true, QueryKey: true, handle: (*server).inboxStream},

	{Method: "GET", Path: "/v1/admin/queues", handle: (*server).listQueues},
	{Method: "GET", Path: "/v1/admin/queues/{queue}/dead-letters", handle: (*server).listDeadLetters},
	{Method: "DELETE", Path: "/v1/admin/queues/{queue}/dead-letters", handle: (*server).purgeDeadLetters},
	{Method: "GET", Path: "/v1/admin/queues/{queue}/messages", handle: (*server).listQueueMessages},
	{Method: "POST", Path: "/v1/admin/queues/{queue}/pause", handle: (*server).pauseQueue},
	{Method: "POST", Path: "/v1/admin/queues/{queue}/resume", handle: (*server).resumeQueue},
	{Method: "POST", Path: "/v1/admin/queues/{queue}/redrive", handle: (*server).redrive},
	{Method: "POST", Path: "/v1/admin/queues/{queue}/dead-letters/{message}/redrive", handle: (*server).redriveDeadLetter},
	{Method: "DELETE", Path: "/v1/admin/queues/{queue}/dead-letters/{message}", handle: (*server).deleteDeadLetter},
	{Method: "POST", Path: "/v1/admin/schedules/rearm", handle: (*server).rearmSchedules},
	{Method: "GET", Path: "/v1/admin/audit", handle: (*server).listAudit},
	{Method: "POST", Path: "/v1/admin/exports", handle: (*server).createExport},
	{Method: "GET", Path: "/v1/admin/exports", handle: (*server).listExports},
	{Method: "GET", Path: "/v1/admin/exports/{id}", handle: (*server).getExport},
	{Method: "DELETE", Path: "/v1/admin/exports/{id}", handle: (*server).cancelExport},
	{Method: "GET", Path: "/exports/{id}", Public: true, handle: (*server).downloadExport},
	{Method: "GET", Path: "/v1/admin/reserved", handle: (*server).listReserved},
	{Method: "GET", Path: "/v1/admin/notifications", handle: (*server).listNotifications},
	{Method: "GET", Path: "/v1/admin/recipients", handle: (*server).findRecipient},
	{Method: "GET", Path: "/v1/admin/notifications/{id}", handle: (*server).adminGetNotification},
	{Method: "PATCH", Path: "/v1/admin/notifications/{id}", handle: (*server).adminRescheduleNotification},
	{Method: "DELETE", Path: "/v1/admin/notifications/{id}", handle: (*server).adminCancelNotification},
	{Method: "GET", Path: "/v1/admin/campaigns", handle: (*server).listCampaigns},
	{Method: "GET", Path: "/v1/admin/campaigns/{id}", handle: (*server).adminGetCampaign},
	{Method: "PATCH", Path: "/v1/admin/campaigns/{id}", handle: (*server).adminRescheduleCampaign},
	{Method: "POST", Path: "/v1/admin/campaigns/{id}/pause", handle: (*server).adminPauseCampaign},
	{Method: "POST", Path: "/v1/admin/campaigns/{id}/resume", handle: (*server).adminResumeCampaign},
	{Method: "POST", Path: "/v1/admin/campaigns/{id}/cancel", handle: (*server).adminCancelCampaign},
}

// probeMethods are tried to tell a wrong method (405) from an unknown path (404).
var probeMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

type server struct {
	unsubscribeKey []byte
	store          notify.Store
	queue          notify.Producer
	clock          notify.Clock
	keys           []apiKey
	maxBody        int64
	log            *slog.Logger
	logAll         bool
	mux            *http.ServeMux

	authenticateFunc func(r *http.Request) (Principal, error)
	admin            notify.Queue
	consumers        notify.Consumers
	queues           []string
	admins           map[string]bool
	scheduler        notify.Scheduler
	campaigns        Campaigns
	lists            AudienceLists
	maxUpload        int64
	apps             map[notify.Platform][]string
	cursorKey        []byte
	auditLog         notify.AuditLog
	requestID        func(r *http.Request) string
	vapidPublicKey   string
	localPush        bool
	// resolveHost looks up a Web Push endpoint's host (netguard.Resolve; Options.ResolveHost).
	resolveHost   func(ctx context.Context, host string) ([]netip.Addr, error)
	exports       notify.ExportStore
	exportLinks   ExportLinks
	exportFiles   ExportFiles
	exportLinkTTL time.Duration
	inboxEvents   notify.InboxEvents
	stream        http.Handler
	eraser        *erasure.Eraser
	erasureBudget time.Duration
}

type apiKey struct {
	sum     [sha256.Size]byte
	service string
}

// New returns Herald's HTTP API. It panics if Store or Queue is missing or an Extra pattern
// conflicts with a route: both are wiring mistakes that main should fail on at start.
func New(o Options) http.Handler {
	if o.Store == nil || o.Queue == nil {
		panic("api.New: Options.Store and Options.Queue are required")
	}
	s := &server{
		store:   o.Store,
		queue:   o.Queue,
		clock:   o.Clock,
		maxBody: o.MaxBodyBytes,
		log:     o.Logger,
		logAll:  !o.LogFailuresOnly,
		mux:     http.NewServeMux(),

		authenticateFunc: o.Authenticate,
		admin:            o.Admin,
		consumers:        o.Consumers,
		queues:           o.Queues,
		admins:           map[string]bool{},
		scheduler:        o.Scheduler,
		campaigns:        o.Campaigns,
		lists:            o.AudienceLists,
		maxUpload:        o.MaxUploadBytes,
		apps:             o.Apps,
		cursorKey:        o.CursorKey,
		unsubscribeKey:   o.UnsubscribeKey,
		auditLog:         o.Audit,
		requestID:        o.RequestID,
		vapidPublicKey:   o.VAPIDPublicKey,
		localPush:        o.LocalPushEndpoints,
		resolveHost:      o.ResolveHost,
		exports:          o.Exports,
		exportLinks:      o.ExportLinks,
		exportFiles:      o.ExportFiles,
		exportLinkTTL:    o.ExportLinkTTL,
		inboxEvents:      o.InboxEvents,
		erasureBudget:    cmp.Or(o.ErasureBudget, DefaultErasureBudget),
		stream:           o.InboxStream,
	}
	if s.resolveHost == nil {
		s.resolveHost = netguard.Resolve
	}
	s.eraser = s.eraserFor(o)
	if s.exportLinkTTL <= 0 {
		s.exportLinkTTL = notify.ExportLinkTTL
	}
	if l, ok := o.Store.(AudienceLists); ok && s.lists == nil {
		s.lists = l
	}
	if s.maxUpload <= 0 {
		s.maxUpload = DefaultMaxUploadBytes
	}
	for _, a := range o.AdminServices {
		s.admins[a] = true
	}
	if s.clock == nil {
		s.clock = notify.SystemClock{}
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for key, service := range o.Keys {
		if key == "" || service == "" {
			continue // an empty key must never match an empty or missing header
		}
		s.keys = append(s.keys, apiKey{sum: sha256.Sum256([]byte(key)), service: service})
	}
	for _, rt := range routes {
		if !o.Routes.serves(rt) {
			continue
		}
		s.mux.Handle(rt.Method+" "+rt.Path, s.endpoint(rt))
	}
	if o.Routes != ServiceRoutes {
		s.registerConsole()
	}
	for pattern, h := range o.Extra {
		s.mux.Handle(pattern, h)
	}
	s.mux.HandleFunc("/", s.unmatched)
	return s
}

// requestInfo is filled in while a request is served and read by the access log.
type requestInfo struct {
	service   string // "user" for an end user
	user      string // an end user's subject
	unmatched bool
	console   bool // came in through the console's API prefix
	operator  bool // a console sign-in (Principal.Operator)
}

type infoKey struct{}

func infoOf(r *http.Request) *requestInfo {
	if i, ok := r.Context().Value(infoKey{}).(*requestInfo); ok {
		return i
	}
	return &requestInfo{}
}

// serviceOf is the service the request's API key authenticated.
func serviceOf(r *http.Request) string { return infoOf(r).service }

// ServeHTTP serves one request with panic recovery and one access log line. The line carries
// the route pattern, never the path: paths hold user ids and device tokens.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(r.Context(), "panic serving request",
				slog.String("method", r.Method), slog.String("route", r.Pattern),
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			if !sw.wroteHeader {
				writeJSON(sw, http.StatusInternalServerError, errorBody{Error: errorDetail{Code: notify.EINTERNAL, Message: "internal error"}})
			} else {
				sw.status = http.StatusInternalServerError // the response is cut short; log it as failed
			}
		}
		route := r.Pattern
		if info.unmatched {
			route = ""
		}
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		if !s.logAll && sw.code() < 400 {
			return
		}
		s.log.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", sw.code()),
			slog.Duration("duration", time.Since(start)),
			slog.String("service", info.service),
			slog.Int64("bytes", sw.bytes))
	}()
	if s.refuseMalformed(sw, r) {
		info.unmatched = true
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// endpoint wraps a route's handler with authentication, path parameter checks and error
// rendering.
func (s *server) endpoint(rt route) http.Handler {
	params := pathParams(rt.Path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.Public {
			if tok := r.URL.Query().Get("access_token"); rt.QueryKey && tok != "" && r.Header.Get("Authorization") == "" {
				r.Header.Set("Authorization", "Bearer "+tok)
			}
			p, err := s.principal(r)
			if err != nil {
				if notify.IsCode(err, notify.EUNAUTHORIZED) { // a known caller refused (403) needs no new credentials
					w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
				}
				s.writeError(w, r, err)
				return
			}
			if p.Operator {
				if err := operatorPrincipal(r, rt); err != nil {
					s.writeError(w, r, err)
					return
				}
				infoOf(r).operator = true
				p.Service = "console"
			}
			if p.Service == "" { // an end user: only their own inbox
				if !rt.EndUser || r.PathValue("user") != p.User {
					s.writeError(w, r, notify.Errorf(notify.EFORBIDDEN, "an end user may only use their own inbox"))
					return
				}
				p.Service = "user"
			}
			infoOf(r).service, infoOf(r).user = p.Service, p.User
		}
		for _, p := range params {
			if err := checkPathParam(p, r.PathValue(p)); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		err := rt.handle(s, w, r)
		if rt.UserChange != "" && infoOf(r).user == "" {
			s.audit(w, r, rt.UserChange, notify.AuditTargetUser, r.PathValue("user"), userChangeParams(r), &err)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// userChangeParams are an audited change's parameters from its path and query: the device
// token masked (under "device": a parameter named token is never kept), the subscription's id,
// the inbox item.
func userChangeParams(r *http.Request) map[string]string {
	p := map[string]string{}
	if t := r.PathValue("token"); t != "" {
		p["device"] = notify.MaskToken(t)
	}
	if id := r.PathValue("id"); id != "" {
		p["item"] = id
	}
	q := r.URL.Query()
	if id := q.Get("id"); id != "" {
		p["subscription"] = id
	} else if ep := q.Get("endpoint"); ep != "" {
		p["subscription"] = notify.WebPushID(ep)
	}
	return p
}

func (s *server) principal(r *http.Request) (Principal, error) {
	if s.authenticateFunc != nil {
		p, err := s.authenticateFunc(r)
		if err != nil || p != (Principal{}) {
			return p, err
		}
	}
	service, err := s.authenticate(r)
	return Principal{Service: service}, err
}

// authenticate returns the service of the request's bearer key. Every configured key is
// compared, in constant time, against a hash of the presented one, so neither a key's content
// nor its length leaks through timing.
func (s *server) authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, token, _ := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if h == "" || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "missing API key: send the header Authorization: Bearer <key>")
	}
	sum := sha256.Sum256([]byte(token))
	service := ""
	for _, k := range s.keys {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			service = k.service
		}
	}
	if service == "" {
		return "", notify.Errorf(notify.EUNAUTHORIZED, "unknown API key")
	}
	return service, nil
}

// unmatched answers requests no route matches: 405 with Allow when the path exists under
// another method, 404 otherwise, both as JSON.
func (s *server) unmatched(w http.ResponseWriter, r *http.Request) {
	infoOf(r).unmatched = true
	var allow []string
	for _, m := range probeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
			if m == "GET" {
				allow = append(allow, "HEAD")
			}
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: errorDetail{
			Code:    "method_not_allowed",
			Message: fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, strings.Join(allow, ", ")),
		}})
		return
	}
	s.writeError(w, r, notify.Errorf(notify.ENOTFOUND, "no such endpoint; see GET /openapi.json"))
}

func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// statusWriter remembers what was written, for the access log and panic recovery.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bytes       int64
	errCode     string // the code of the error response written, for the audit log
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status = code
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
