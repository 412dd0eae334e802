package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// The Twilio fake speaks the Messages resource of the 2010-04-01 API as twilio-go calls it:
// form-encoded POST, HTTP basic auth, Twilio's JSON error bodies.

const (
	twilioMaxBody   = 1600 // characters, after concatenation
	twilioAPIPrefix = "/2010-04-01/Accounts/"
)

var twilioE164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func (s *Server) twilioRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /2010-04-01/Accounts/{AccountSid}/Messages.json", s.handleTwilioCreateMessage)
}

// twilioMessage is the Message resource, in Twilio's field order; nil pointers render as null.
type twilioMessage struct {
	AccountSID          string            `json:"account_sid"`
	APIVersion          string            `json:"api_version"`
	Body                string            `json:"body"`
	DateCreated         string            `json:"date_created"`
	DateSent            *string           `json:"date_sent"`
	DateUpdated         string            `json:"date_updated"`
	Direction           string            `json:"direction"`
	ErrorCode           *int              `json:"error_code"`
	ErrorMessage        *string           `json:"error_message"`
	From                *string           `json:"from"`
	MessagingServiceSID *string           `json:"messaging_service_sid"`
	NumMedia            string            `json:"num_media"`
	NumSegments         string            `json:"num_segments"`
	Price               *string           `json:"price"`
	PriceUnit           string            `json:"price_unit"`
	SID                 string            `json:"sid"`
	Status              string            `json:"status"`
	SubresourceURIs     map[string]string `json:"subresource_uris"`
	To                  string            `json:"to"`
	URI                 string            `json:"uri"`
}

func (s *Server) handleTwilioCreateMessage(w http.ResponseWriter, req *http.Request) {
	if s.refused("twilio", w) {
		return
	}
	account := req.PathValue("AccountSid")
	user, pass, ok := req.BasicAuth()
	// There is no credential store: the username must be the account in the path (auth token)
	// or an API key (SK…), and the password must be present. That catches a sender that sends
	// no credentials or mixes up accounts. A password starting "invalid" stands for a wrong
	// token or secret, so the refusal path can be chosen like the address-driven failures.
	if !ok || pass == "" || strings.HasPrefix(pass, "invalid") || !strings.HasPrefix(account, "AC") ||
		(user != account && !strings.HasPrefix(user, "SK")) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Twilio API"`)
		twilioError(w, http.StatusUnauthorized, 20003, "Authenticate")
		return
	}
	if err := req.ParseForm(); err != nil {
		twilioError(w, http.StatusBadRequest, 20001, "Could not parse the request body: "+err.Error())
		return
	}
	to := req.PostForm.Get("To")
	from := req.PostForm.Get("From")
	service := req.PostForm.Get("MessagingServiceSid")
	body := req.PostForm.Get("Body")
	switch {
	case to == "":
		twilioError(w, http.StatusBadRequest, 21604, "A 'To' phone number is required.")
		return
	case from == "" && service == "":
		twilioError(w, http.StatusBadRequest, 21603, "A 'From' phone number is required.")
		return
	case body == "" && req.PostForm.Get("MediaUrl") == "" && req.PostForm.Get("ContentSid") == "":
		twilioError(w, http.StatusBadRequest, 21602, "Message body is required.")
		return
	case len(utf16.Encode([]rune(body))) > twilioMaxBody:
		twilioError(w, http.StatusBadRequest, 21617, "The concatenated message body exceeds the 1600 character limit.")
		return
	case to == "+15005550001" || !twilioE164.MatchString(to):
		twilioError(w, http.StatusBadRequest, 21211, fmt.Sprintf("The 'To' number %s is not a valid phone number.", to))
		return
	case to == "+15005550009":
		twilioError(w, http.StatusBadRequest, 21614, fmt.Sprintf("The 'To' number %s is not a valid mobile number.", to))
		return
	}
	switch kind, fail := s.failNow(to); {
	case fail && kind == "throttle":
		w.Header().Set("Retry-After", "1")
		twilioError(w, http.StatusTooManyRequests, 20429, "Too Many Requests")
		return
	case fail:
		twilioError(w, http.StatusServiceUnavailable, 20503, "Service Unavailable")
		return
	}

	now := time.Now().UTC()
	sid := "SM" + randomHex(16)
	data := map[string]string{"account_sid": account}
	m := twilioMessage{
		AccountSID:  account,
		APIVersion:  "2010-04-01",
		Body:        body,
		DateCreated: now.Format(time.RFC1123Z),
		DateUpdated: now.Format(time.RFC1123Z),
		Direction:   "outbound-api",
		NumMedia:    strconv.Itoa(len(req.PostForm["MediaUrl"])),
		NumSegments: strconv.Itoa(smsSegments(body)),
		PriceUnit:   "USD",
		SID:         sid,
		Status:      "queued",
		To:          to,
		URI:         twilioAPIPrefix + account + "/Messages/" + sid + ".json",
		SubresourceURIs: map[string]string{
			"media": twilioAPIPrefix + account + "/Messages/" + sid + "/Media.json",
		},
	}
	if from != "" {
		m.From = &from
		data["from"] = from
	}
	if service != "" {
		m.MessagingServiceSID = &service
		data["messaging_service_sid"] = service
		if from == "" {
			m.Status = "accepted" // Twilio picks the sender from the service's pool later
		}
	}
	if err := s.Recorder.Add(Delivery{Provider: "twilio", Address: to, Body: body, Data: data, MessageID: sid, At: now}); err != nil {
		s.log.Error("twilio record", "err", err)
		twilioError(w, http.StatusInternalServerError, 20500, "An internal server error has occurred")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Twilio-Request-Id", "RQ"+randomHex(16))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(m)
}

func twilioError(w http.ResponseWriter, status, code int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Twilio-Request-Id", "RQ"+randomHex(16))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"code":      code,
		"message":   message,
		"more_info": fmt.Sprintf("https://www.twilio.com/docs/errors/%d", code),
		"status":    status,
	})
}

// smsSegments estimates the segments Twilio bills body as: printable ASCII (standing in for
// GSM-7) in 160-character parts (153 when concatenated), anything else as UCS-2 in 70 (67).
func smsSegments(body string) int {
	units := utf16.Encode([]rune(body))
	single, multi := 160, 153
	for _, r := range body {
		if r > 0x7e || (r < 0x20 && r != '\n' && r != '\r') {
			single, multi = 70, 67
			break
		}
	}
	switch n := len(units); {
	case n <= single:
		return 1
	default:
		return (n + multi - 1) / multi
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
