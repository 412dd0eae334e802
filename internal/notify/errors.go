package notify

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Every error that crosses a port carries one of these, and the retry decision is
// made from the code alone (see IsRetryable), in this one place.
const (
	EINVALID      = "invalid"      // bad input or payload; permanent
	ENOTFOUND     = "not_found"    // the thing does not exist
	ECONFLICT     = "conflict"     // a conditional write lost (someone else holds or changed it)
	EUNAUTHORIZED = "unauthorized" // missing or unknown credentials
	EFORBIDDEN    = "forbidden"    // known caller, not allowed to do this
	ETOOLARGE     = "too_large"    // body or batch over a limit; permanent
	ETHROTTLED    = "throttled"    // provider or limiter said slow down; retryable, honour RetryAfter
	EUNAVAILABLE  = "unavailable"  // 5xx, timeout, connection error; retryable
	EDEADADDRESS  = "dead_address" // token unregistered, mailbox gone: permanent, and clean the address up
	EREJECTED     = "rejected"     // provider refused this message or address; permanent
	ESUPPRESSED   = "suppressed"   // address is on the suppression list; permanent
	// EAUTH: our credentials, account or balance were refused. Retryable here (an AWS call's
	// expired or not-yet-propagated credentials recover), but a provider's EAUTH fails its
	// delivery at once, reason provider_auth, and alerts operators (pipeline.providerAuthFailed).
	EAUTH     = "provider_auth"
	EINTERNAL = "internal" // anything unclassified; retryable so nothing is lost

	// EKEYREUSED: an idempotency key already names a notification made from a different
	// request; permanent (the caller must pick a new key). A conflict: HTTP 409.
	EKEYREUSED = "idempotency_key_reused"
	// EFINISHED: the notification or campaign already reached an end state, so it can't be
	// canceled (or changed) any more; permanent. A conflict: HTTP 409.
	EFINISHED = "already_finished"
)

// EUNREACHABLE says the channel cannot reach this person at this address: a phone number that is
// not a KakaoTalk user, or whose user blocked the channel. It is permanent for that channel (not
// retryable), but not the address's fault — the phone may still take an SMS — so it never
// suppresses the address, and it is what triggers an AlimTalk delivery's SMS/LMS fallback.
const EUNREACHABLE = "unreachable"

// EUNKNOWNSTATUS says a provider answered a message with a status Herald's table does not
// know (Solapi's sample answers carry TEST1000): what became of the message cannot be told, so
// it is never sent again — a resend could deliver it twice — and the delivery fails with the
// provider's code in its message, for an operator to read.
const EUNKNOWNSTATUS = "unknown_status"

// retryable is the one table that decides whether a failure is tried again.
var retryable = map[string]bool{
	ETHROTTLED:   true,
	EUNAVAILABLE: true,
	EAUTH:        true,
	EINTERNAL:    true,
}

// Error is Herald's error type: a code from the table above, a message safe to show to a caller
// (never a raw address or secret), and optionally the provider's Retry-After.
type Error struct {
	Code       string
	Message    string
	Field      string        // for EINVALID: the offending field, e.g. "recipients[3].email"
	RetryAfter time.Duration // for ETHROTTLED/EUNAVAILABLE when the provider said so
	Err        error
}

func (e *Error) Error() string {
	s := e.Code
	if e.Field != "" {
		s += " " + e.Field
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError returns an EINVALID error naming the offending field.
func FieldError(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Wrap gives err a code, keeping it as the cause.
func Wrap(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for any other error,
// and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of err's *Error, or a generic text.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Message != "" {
			return e.Message
		}
		return e.Code
	}
	return "internal error"
}

// RetryAfter returns the provider's Retry-After carried by err, or 0.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// IsRetryable reports whether a failure with err's code should be tried again.
func IsRetryable(err error) bool { return err != nil && retryable[ErrorCode(err)] }

// notRetriedOnSend are the retryable codes a provider's answer to a send is not retried on:
// EAUTH there is our credentials, account or balance refused, which the same attempt meets
// again until an operator acts, while an AWS call's EAUTH (credentials expiring, a role's grant
// still propagating) may pass on the next try.
var notRetriedOnSend = map[string]bool{EAUTH: true}

// IsRetryableSend is IsRetryable for a provider's answer to one message of a send.
func IsRetryableSend(err error) bool { return IsRetryable(err) && !notRetriedOnSend[ErrorCode(err)] }

// IsCode reports whether err carries code.
func IsCode(err error, code string) bool { return err != nil && ErrorCode(err) == code }

// RetryPolicy is one provider's retries of a retryable failure: MaxAttempts sends in all, the
// n-th retry after Delays[n-1] (the last delay again past the list), or the provider's
// Retry-After when that is longer.
type RetryPolicy struct {
	MaxAttempts int
	Delays      []time.Duration
}

// Delay is the wait before the retry that follows attempt (1 for the first send).
func (rp RetryPolicy) Delay(attempt int, retryAfter time.Duration) time.Duration {
	if len(rp.Delays) == 0 {
		return retryAfter
	}
	i := min(max(attempt, 1), len(rp.Delays)) - 1
	return max(rp.Delays[i], retryAfter)
}

// Backoff is the delay before attempt (1-based) is retried: exponential from base, capped at
// max, never shorter than the provider's Retry-After.
func Backoff(attempt int, base, max, retryAfter time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if retryAfter > d {
		d = retryAfter
	}
	return d
}
