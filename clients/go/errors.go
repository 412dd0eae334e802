package herald

import (
	"errors"
	"fmt"
	"time"
)

// Error is what a call answers when Herald (or the queue) refused it or could not be reached:
// the HTTP status (0 when no answer came), Herald's error code (invalid, unauthorized,
// not_found, conflict, idempotency_key_reused, too_large, …; "unavailable" for a network
// failure or a timeout) and the field it names — a JSON path such as recipients[0].user_id.
type Error struct {
	Status     int
	Code       string
	Field      string
	Message    string
	RetryAfter time.Duration // the wait Herald asked for (429, 503), if any
	Err        error         // the transport's own error, when there was no answer
}

func (e *Error) Error() string {
	s := fmt.Sprintf("herald: %s", e.Code)
	if e.Status != 0 {
		s = fmt.Sprintf("herald: %d %s", e.Status, e.Code)
	}
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Message == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Error codes a caller may branch on; Herald's API documents the rest.
const (
	CodeInvalid      = "invalid"
	CodeKeyReused    = "idempotency_key_reused"
	CodeUnavailable  = "unavailable"
	CodeTooLarge     = "too_large"
	CodeTooMany      = "too_many_buffered"
	CodeClosed       = "closed"
	CodeUnauthorized = "unauthorized"
)

// IsCode reports whether err is an *Error with code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// FieldOf is the field an *Error names ("" for none, or another error).
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}
