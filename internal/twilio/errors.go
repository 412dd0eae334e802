package twilio

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twilio/twilio-go/client"

	"herald/internal/notify"
)

// errorCodes maps Twilio error codes (https://www.twilio.com/docs/api/errors) to Herald's codes.
// Codes not listed are decided by the HTTP status.
var errorCodes = map[int]string{
	21211: notify.EREJECTED,   // invalid 'To' number
	21614: notify.EREJECTED,   // 'To' is not a mobile number
	21612: notify.EREJECTED,   // cannot route to this number from this sender
	21408: notify.EREJECTED,   // region not enabled for this account (geo permissions)
	21610: notify.ESUPPRESSED, // the recipient replied STOP
	20429: notify.ETHROTTLED,  // too many requests
	20003: notify.EAUTH,       // authentication failed
	20005: notify.EAUTH,       // account not active
	21222: notify.EAUTH,       // twilio-go: illegal characters in the username
	21224: notify.EAUTH,       // twilio-go: illegal characters in the password
}

// classifyError turns a CreateMessage error into a *notify.Error. status and retryAfter are the
// HTTP response's, as seen by the transport (0 and 0 when there was none). Neither the message nor
// the wrapped error's text contains the raw phone number.
func classifyError(err error, status int, retryAfter time.Duration, deliveryID, phone string) *notify.Error {
	var tre *client.TwilioRestError
	twilioCode := 0
	what := ""
	if errors.As(err, &tre) {
		twilioCode = tre.Code
		if tre.Status != 0 {
			status = tre.Status
		}
		what = strconv.Itoa(tre.Code) + " " + tre.Message
	}

	code, ok := errorCodes[twilioCode]
	switch {
	case ok:
	case status == http.StatusNotFound:
		code = notify.EAUTH // the account in the URL does not exist for these credentials
	case notify.CodeForStatus(status) != "":
		code = notify.CodeForStatus(status)
	case status == 0 && notify.NoResponse(err):
		code = notify.EUNAVAILABLE
	default:
		code = notify.EINTERNAL
	}

	if what == "" {
		what = notify.Failure(err, status)
	}
	mask := maskFunc(phone)
	return &notify.Error{
		Code:       code,
		Message:    mask(fmt.Sprintf("twilio send %s to %s: %s", deliveryID, notify.MaskPhone(phone), what)),
		RetryAfter: retryAfter,
		Err:        notify.Redact(err, phone, notify.MaskPhone(phone)),
	}
}

// maskFunc returns a function replacing phone with its mask, since Twilio's messages name it
// ("The 'To' number +15005550001 is not a valid phone number.").
func maskFunc(phone string) func(string) string {
	if phone == "" {
		return func(s string) string { return s }
	}
	return strings.NewReplacer(phone, notify.MaskPhone(phone)).Replace
}
