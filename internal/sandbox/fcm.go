package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The fake FCM HTTP v1 API: POST /v1/projects/{project}/messages:send, answered the way Google
// answers, error details included, so the Admin SDK's messaging.IsUnregistered & co. classify
// the fake's errors exactly as they classify Google's. Authentication is optional (an app with
// no credentials sends none); a service account whose token_uri is {sandbox}/token gets a token
// from the fake OAuth endpoint below, so the real credential path can be exercised too.

// fcmRequest is the body of messages:send, as much of it as the fake checks or records.
type fcmRequest struct {
	ValidateOnly bool        `json:"validate_only"`
	Message      *fcmMessage `json:"message"`
}

type fcmMessage struct {
	Token        string            `json:"token"`
	Topic        string            `json:"topic"`
	Condition    string            `json:"condition"`
	Data         map[string]string `json:"data"`
	Notification *struct {
		Title string `json:"title"`
		Body  string `json:"body"`
		Image string `json:"image"`
	} `json:"notification"`
	Android *struct {
		CollapseKey  string `json:"collapse_key"`
		Priority     string `json:"priority"`
		TTL          string `json:"ttl"`
		Notification *struct {
			Title string `json:"title"`
			Body  string `json:"body"`
			Tag   string `json:"tag"`
		} `json:"notification"`
	} `json:"android"`
	APNS *struct {
		Headers map[string]string `json:"headers"`
		Payload json.RawMessage   `json:"payload"`
	} `json:"apns"`
	Webpush *struct {
		Headers    map[string]string `json:"headers"`
		Data       map[string]string `json:"data"`
		FCMOptions *struct {
			Link string `json:"link"`
		} `json:"fcm_options"`
	} `json:"webpush"`
}

// fcmFailure is one canned FCM error answer.
type fcmFailure struct {
	status     int
	retryAfter string // "" for none
	body       []byte
}

func newFCMFailure(status int, grpcStatus, errorCode, message, retryAfter string) fcmFailure {
	type detail struct {
		Type      string `json:"@type"`
		ErrorCode string `json:"errorCode"`
	}
	var e struct {
		Error struct {
			Code    int      `json:"code"`
			Message string   `json:"message"`
			Status  string   `json:"status"`
			Details []detail `json:"details"`
		} `json:"error"`
	}
	e.Error.Code = status
	e.Error.Message = message
	e.Error.Status = grpcStatus
	if errorCode != "" { // Google's own refusals (a bad access token) carry no FCM error
		e.Error.Details = []detail{{Type: "type.googleapis.com/google.firebase.fcm.v1.FcmError", ErrorCode: errorCode}}
	}
	b, _ := json.Marshal(e)
	return fcmFailure{status: status, retryAfter: retryAfter, body: b}
}

var (
	fcmUnregistered = newFCMFailure(http.StatusNotFound, "NOT_FOUND", "UNREGISTERED",
		"Requested entity was not found.", "")
	fcmInvalidToken = newFCMFailure(http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
		"The registration token is not a valid FCM registration token", "")
	fcmThrottled = newFCMFailure(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED",
		"Quota exceeded for quota metric 'Send messages' (sandbox throttle rule).", "1")
	fcmUnavailable = newFCMFailure(http.StatusServiceUnavailable, "UNAVAILABLE", "UNAVAILABLE",
		"The service is currently unavailable (sandbox unavailable rule).", "0")
)

// fcmInvalid is a 400 INVALID_ARGUMENT naming what is wrong with the request.
func fcmInvalid(message string) fcmFailure {
	return newFCMFailure(http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message, "")
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxFCMBody bounds what the fake reads; real messages are at most 4 KB of payload.
const maxFCMBody = 64 << 10

func (s *Server) fcmRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/projects/{project}/messages:send", s.handleFCMSend)
	mux.HandleFunc("POST /token", handleOAuthToken)
}

func (s *Server) handleFCMSend(w http.ResponseWriter, req *http.Request) {
	project := req.PathValue("project")
	if s.refused("fcm", w) {
		return
	}
	if a := req.Header.Get("Authorization"); a != "" && !strings.HasPrefix(a, "Bearer ") {
		writeFCMFailure(w, newFCMFailure(http.StatusUnauthorized, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR",
			"Request had invalid authentication credentials.", ""))
		return
	}

	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(req.Body, maxFCMBody+1)); err != nil {
		writeFCMFailure(w, fcmInvalid("could not read the request body"))
		return
	}
	if buf.Len() > maxFCMBody {
		writeFCMFailure(w, fcmInvalid("Request contains an invalid argument: message is too big"))
		return
	}
	var r fcmRequest
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		writeFCMFailure(w, fcmInvalid("Invalid JSON payload received. "+err.Error()))
		return
	}
	m := r.Message
	if m == nil {
		writeFCMFailure(w, fcmInvalid("Request contains an invalid argument: message is required"))
		return
	}
	if msg := validateFCMMessage(m); msg != "" {
		writeFCMFailure(w, fcmInvalid(msg))
		return
	}

	address := m.Token
	switch {
	case m.Topic != "":
		address = "/topics/" + m.Topic
	case m.Condition != "":
		address = m.Condition
	case strings.Contains(m.Token, "unregistered"):
		writeFCMFailure(w, fcmUnregistered)
		return
	case strings.Contains(m.Token, "invalid"):
		writeFCMFailure(w, fcmInvalidToken)
		return
	}
	if kind, fail := s.failNow(address); fail {
		if kind == "throttle" {
			writeFCMFailure(w, fcmThrottled)
		} else {
			writeFCMFailure(w, fcmUnavailable)
		}
		return
	}

	id := nextMessageID()
	if !r.ValidateOnly {
		d := Delivery{Provider: "fcm", App: project, Address: address, Data: m.Data, MessageID: id}
		if n := m.Notification; n != nil {
			d.Title, d.Body = n.Title, n.Body
		}
		if a := m.Android; a != nil {
			d.CollapseID = a.CollapseKey
			if n := a.Notification; n != nil && d.Title == "" && d.Body == "" {
				d.Title, d.Body = n.Title, n.Body
			}
		}
		if err := s.Recorder.Add(d); err != nil {
			s.log.Error("fcm record", "err", err)
			writeFCMFailure(w, newFCMFailure(http.StatusInternalServerError, "INTERNAL", "INTERNAL",
				"Internal error encountered.", ""))
			return
		}
	}
	name, _ := json.Marshal(struct {
		Name string `json:"name"`
	}{"projects/" + project + "/messages/" + id})
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(name)))
	_, _ = w.Write(name)
}

// validateFCMMessage returns what FCM would reject in m, or "".
func validateFCMMessage(m *fcmMessage) string {
	n := 0
	for _, t := range []string{m.Token, m.Topic, m.Condition} {
		if t != "" {
			n++
		}
	}
	if n != 1 {
		return "Request contains an invalid argument: exactly one of token, topic or condition is required"
	}
	for k := range m.Data {
		if k == "from" || k == "notification" || k == "message_type" ||
			strings.HasPrefix(k, "google.") || strings.HasPrefix(k, "gcm.") {
			return "Invalid data payload key: " + k
		}
	}
	if a := m.Android; a != nil {
		switch strings.ToLower(a.Priority) {
		case "", "normal", "high":
		default:
			return "Invalid value at 'message.android.priority'"
		}
		if a.TTL != "" && !validDuration(a.TTL) {
			return "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration)"
		}
	}
	if a := m.APNS; a != nil {
		switch a.Headers["apns-priority"] {
		case "", "1", "5", "10":
		default:
			return "Invalid APNs headers: apns-priority"
		}
		if len(a.Headers["apns-collapse-id"]) > 64 {
			return "Invalid APNs headers: apns-collapse-id longer than 64 bytes"
		}
		if p := a.Payload; len(p) > 0 && p[0] != '{' && string(p) != "null" {
			return "Invalid value at 'message.apns.payload': an object is required"
		}
		if e := a.Headers["apns-expiration"]; e != "" {
			if _, err := strconv.ParseInt(e, 10, 64); err != nil {
				return "Invalid APNs headers: apns-expiration"
			}
		}
	}
	if wp := m.Webpush; wp != nil && wp.FCMOptions != nil && wp.FCMOptions.Link != "" &&
		!strings.HasPrefix(wp.FCMOptions.Link, "https://") {
		return "Invalid value at 'message.webpush.fcm_options.link': HTTPS URL required"
	}
	return ""
}

// validDuration reports whether s is a protobuf Duration in JSON form: "3.5s", "86400s".
func validDuration(s string) bool {
	num, ok := strings.CutSuffix(s, "s")
	if !ok || num == "" {
		return false
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || (hasFrac && (frac == "" || len(frac) > 9)) {
		return false
	}
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func writeFCMFailure(w http.ResponseWriter, f fcmFailure) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	if f.retryAfter != "" {
		h.Set("Retry-After", f.retryAfter)
	}
	w.WriteHeader(f.status)
	_, _ = w.Write(f.body)
}

// handleOAuthToken is a stand-in for https://oauth2.googleapis.com/token: it grants every
// service-account JWT assertion a bearer token, so an app configured with a service account
// whose token_uri points here runs the SDK's real authentication path.
func handleOAuthToken(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err != nil || req.PostForm.Get("assertion") == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"missing assertion"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"sandbox-`+nextMessageID()+`","token_type":"Bearer","expires_in":3600}`)
}
