package sandbox

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// The fake APNs provider API: POST /3/device/{token} over HTTP/2, with token (JWT) auth checked
// against keys registered with TrustAPNsKey. It answers like APNs: an apns-id header on every
// response, an empty body on success, {"reason": …} on failure.

// apnsMaxPayload is APNs's limit for alert notifications.
const apnsMaxPayload = 4096

// apnsTokenMaxAge is how long APNs accepts a provider token after its iat.
const apnsTokenMaxAge = time.Hour

// apnsKey is a trusted provider key; apnsKeys maps key id → apnsKey.
type apnsKey struct {
	teamID string
	pub    *ecdsa.PublicKey
}

// TrustAPNsKey makes the fake APNs accept provider tokens signed by pub with the given key id
// and team id (the iss claim), as Apple does once a key is created in the developer account.
// Registering a key again replaces it and forgets every token verified so far.
func (s *Server) TrustAPNsKey(keyID, teamID string, pub *ecdsa.PublicKey) {
	s.apnsKeysMu.Lock()
	s.apnsKeys[keyID] = apnsKey{teamID: teamID, pub: pub}
	s.apnsKeysMu.Unlock()
	s.apnsTokens.Clear()
}

func (s *Server) apnsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /3/device/{token}", s.handleAPNsPush)
}

// apnsAps is the part of the aps dictionary the fake records.
type apnsAps struct {
	Alert json.RawMessage `json:"alert"`
}

type apnsAlert struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

func (s *Server) handleAPNsPush(w http.ResponseWriter, req *http.Request) {
	apnsID := req.Header.Get("apns-id")
	if apnsID == "" {
		apnsID = newUUID()
	} else if !validUUID(apnsID) {
		apnsID = newUUID()
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "BadMessageId")
		return
	}

	if s.refused("apns", w) {
		return
	}
	if status, reason := s.checkAPNsAuth(req.Header.Get("authorization")); status != 0 {
		writeAPNsReason(w, apnsID, status, reason)
		return
	}
	topic := req.Header.Get("apns-topic")
	if topic == "" {
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "MissingTopic")
		return
	}
	if reason := validateAPNsHeaders(req.Header); reason != "" {
		writeAPNsReason(w, apnsID, http.StatusBadRequest, reason)
		return
	}

	token := req.PathValue("token")
	switch {
	case token == "":
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "MissingDeviceToken")
		return
	case strings.Contains(token, "unregistered"):
		h := w.Header()
		h.Set("apns-id", apnsID)
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"reason":"Unregistered","timestamp":`+strconv.FormatInt(time.Now().UnixMilli(), 10)+`}`)
		return
	case strings.Contains(token, "invalid"):
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "BadDeviceToken")
		return
	}

	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(req.Body, apnsMaxPayload+1)); err != nil {
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "BadRequest")
		return
	}
	if buf.Len() == 0 {
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "PayloadEmpty")
		return
	}
	if buf.Len() > apnsMaxPayload {
		writeAPNsReason(w, apnsID, http.StatusRequestEntityTooLarge, "PayloadTooLarge")
		return
	}
	d, ok := parseAPNsPayload(buf.Bytes())
	if !ok {
		writeAPNsReason(w, apnsID, http.StatusBadRequest, "BadRequest")
		return
	}

	if kind, fail := s.failNow(token); fail {
		if kind == "throttle" {
			writeAPNsReason(w, apnsID, http.StatusTooManyRequests, "TooManyRequests")
		} else {
			writeAPNsReason(w, apnsID, http.StatusServiceUnavailable, "ServiceUnavailable")
		}
		return
	}

	d.Provider = "apns"
	d.App = topic
	d.Address = token
	d.CollapseID = req.Header.Get("apns-collapse-id")
	d.MessageID = apnsID
	if err := s.Recorder.Add(d); err != nil {
		s.log.Error("apns record", "err", err)
		writeAPNsReason(w, apnsID, http.StatusInternalServerError, "InternalServerError")
		return
	}
	w.Header().Set("apns-id", apnsID)
	w.WriteHeader(http.StatusOK)
}

// checkAPNsAuth verifies "bearer <JWT>" and returns 0 or the failure status and reason. A token
// verified once is remembered, as a real provider connection would be, so ES256 verification
// costs once per token rather than once per push.
func (s *Server) checkAPNsAuth(header string) (status int, reason string) {
	const prefix = "bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return http.StatusForbidden, "MissingProviderToken"
	}
	raw := header[len(prefix):]
	if v, ok := s.apnsTokens.Load(raw); ok {
		if time.Since(time.Unix(v.(int64), 0)) > apnsTokenMaxAge {
			return http.StatusForbidden, "ExpiredProviderToken"
		}
		return 0, ""
	}

	var teamID string
	tok, err := jwt.NewParser(jwt.WithValidMethods([]string{"ES256"})).Parse(raw, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		s.apnsKeysMu.Lock()
		k, ok := s.apnsKeys[kid].(apnsKey)
		s.apnsKeysMu.Unlock()
		if !ok {
			return nil, errors.New("unknown key id")
		}
		teamID = k.teamID
		return k.pub, nil
	})
	if err != nil || !tok.Valid {
		return http.StatusForbidden, "InvalidProviderToken"
	}
	claims, _ := tok.Claims.(jwt.MapClaims)
	if iss, _ := claims["iss"].(string); iss != teamID {
		return http.StatusForbidden, "InvalidProviderToken"
	}
	iatF, ok := claims["iat"].(float64)
	if !ok {
		return http.StatusForbidden, "InvalidProviderToken"
	}
	iat := int64(iatF)
	if time.Since(time.Unix(iat, 0)) > apnsTokenMaxAge {
		return http.StatusForbidden, "ExpiredProviderToken"
	}
	s.apnsTokens.Store(raw, iat)
	return 0, ""
}

// validateAPNsHeaders returns the APNs reason for a malformed header, or "".
func validateAPNsHeaders(h http.Header) string {
	switch h.Get("apns-priority") {
	case "", "1", "5", "10":
	default:
		return "BadPriority"
	}
	if e := h.Get("apns-expiration"); e != "" {
		if _, err := strconv.ParseInt(e, 10, 64); err != nil {
			return "BadExpirationDate"
		}
	}
	if len(h.Get("apns-collapse-id")) > 64 {
		return "BadCollapseId"
	}
	switch h.Get("apns-push-type") {
	case "", "alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
		"liveactivity", "pushtotalk", "widgets":
	default:
		return "InvalidPushType"
	}
	return ""
}

// parseAPNsPayload reads the title and body of aps.alert and every custom top-level key as a
// string (JSON strings unquoted, anything else as its JSON text).
func parseAPNsPayload(b []byte) (Delivery, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil || top == nil {
		return Delivery{}, false
	}
	var d Delivery
	if raw, ok := top["aps"]; ok {
		var aps apnsAps
		if err := json.Unmarshal(raw, &aps); err != nil {
			return Delivery{}, false
		}
		if len(aps.Alert) > 0 && aps.Alert[0] == '"' {
			_ = json.Unmarshal(aps.Alert, &d.Body)
		} else if len(aps.Alert) > 0 {
			var a apnsAlert
			if err := json.Unmarshal(aps.Alert, &a); err != nil {
				return Delivery{}, false
			}
			d.Title, d.Body = a.Title, a.Body
		}
	}
	for k, v := range top {
		if k == "aps" {
			continue
		}
		if d.Data == nil {
			d.Data = make(map[string]string, len(top))
		}
		var s string
		if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
			d.Data[k] = s
		} else {
			d.Data[k] = string(v)
		}
	}
	return d, true
}

func writeAPNsReason(w http.ResponseWriter, apnsID string, status int, reason string) {
	h := w.Header()
	h.Set("apns-id", apnsID)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"reason":"`+reason+`"}`)
}
