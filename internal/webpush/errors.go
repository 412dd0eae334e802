package webpush

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"herald/internal/notify"
)

// classify translates a push service's answer (RFC 8030, RFC 8292) for one subscription into
// Herald's codes (nil when sent):
//
//	2xx (201 Created, 202 Accepted)        sent
//	404 Not Found, 410 Gone                EDEADADDRESS (the subscription expired or was
//	                                       unsubscribed: cleanup removes it)
//	413 Payload Too Large                  EREJECTED
//	429 Too Many Requests                  ETHROTTLED, RetryAfter from Retry-After
//	400, 401, 403                          EREJECTED: a malformed request or a VAPID key the
//	                                       subscription was not created with — retrying the
//	                                       same request cannot succeed
//	other 4xx                              EREJECTED
//	5xx                                    EUNAVAILABLE, RetryAfter from Retry-After
//	timeouts, connection errors            EUNAVAILABLE
//	a payload too big to encrypt           EREJECTED
//	anything else                          EINTERNAL
//
// Messages name the endpoint masked; a transport error is kept as the cause with the endpoint
// (in the request URL) masked.
func classify(status int, h http.Header, err error, endpoint string, now time.Time) error {
	masked := notify.MaskWebPushEndpoint(endpoint)
	if err != nil {
		e := &notify.Error{Err: notify.Redact(err, endpoint, masked)}
		var ne net.Error
		switch {
		case errors.Is(err, webpushgo.ErrMaxPadExceeded):
			e.Code, e.Message = notify.EREJECTED, "webpush: payload too large to encrypt in one record"
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			e.Code, e.Message = notify.EUNAVAILABLE, "webpush push interrupted"
		case errors.As(err, &ne), notify.NoResponse(err):
			e.Code, e.Message = notify.EUNAVAILABLE, "push service unreachable"
		default:
			e.Code, e.Message = notify.EINTERNAL, "webpush push failed"
		}
		return e
	}
	if status >= 200 && status < 300 {
		return nil
	}
	e := &notify.Error{Message: "push service answered " + strconv.Itoa(status) + " " + http.StatusText(status) + " for " + masked}
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		e.Code = notify.EDEADADDRESS
	case status == http.StatusTooManyRequests:
		e.Code = notify.ETHROTTLED
		e.RetryAfter = notify.ParseRetryAfter(h.Get("Retry-After"), now)
	case status >= 500:
		e.Code = notify.EUNAVAILABLE
		e.RetryAfter = notify.ParseRetryAfter(h.Get("Retry-After"), now)
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Code = notify.EREJECTED
		e.Message += " (a malformed request, or a VAPID key the subscription was not made with)"
	case status >= 400:
		e.Code = notify.EREJECTED
	default:
		e.Code = notify.EINTERNAL
	}
	return e
}
