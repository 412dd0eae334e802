package scheduler

import (
	"herald/internal/awserr"
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

// translate gives an SDK error its notify code (awserr, with this service's table).
func translate(err error, format string, args ...any) error {
	return awserr.Wrap(err, errorCodes, format, args...)
}
