package scheduler

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"herald/internal/notify"
)

// errorCodes maps EventBridge Scheduler (and generic AWS) error codes to Herald's codes.
var errorCodes = map[string]string{
	"ValidationException":       notify.EINVALID,
	"ConflictException":         notify.ECONFLICT, // another change to the same schedule is in flight
	"ResourceNotFoundException": notify.ENOTFOUND, // for Create/Update: the schedule group is missing

	// Slow down. The quota on existing schedules also frees up as schedules fire and delete
	// themselves, so waiting is the remedy there too.
	"ThrottlingException":           notify.ETHROTTLED,
	"ServiceQuotaExceededException": notify.ETHROTTLED,

	// Our role or credentials: every call fails until an operator acts.
	"AccessDeniedException":       notify.EAUTH,
	"UnrecognizedClientException": notify.EAUTH,
	"InvalidSignatureException":   notify.EAUTH,
	"ExpiredTokenException":       notify.EAUTH,

	"InternalServerException": notify.EUNAVAILABLE,
}

// apiCode is the service's error code in err, or "".
func apiCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// translate gives an SDK error a notify code: the service's code decides; the HTTP status
// decides when the code is unknown; a request that got no response is EUNAVAILABLE.
func translate(err error, format string, args ...any) error {
	code, ok := errorCodes[apiCode(err)]
	if !ok {
		var respErr *awshttp.ResponseError
		status := 0
		if errors.As(err, &respErr) {
			status = respErr.HTTPStatusCode()
		}
		switch {
		case status == http.StatusTooManyRequests:
			code = notify.ETHROTTLED
		case status >= 500:
			code = notify.EUNAVAILABLE
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			code = notify.EAUTH
		case status == 0 && notify.NoResponse(err):
			code = notify.EUNAVAILABLE
		default:
			code = notify.EINTERNAL
		}
	}
	return notify.Wrap(code, err, format, args...)
}
