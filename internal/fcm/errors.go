package fcm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"firebase.google.com/go/v4/errorutils"
	"firebase.google.com/go/v4/messaging"

	"herald/internal/notify"
)

// errRefused marks an error the SDK returned for a message before making any request for it:
// its checks of the payload refused it (sendChunk tells that from a failure after a request).
var errRefused = errors.New("fcm: invalid message")

// classify translates an error of the Admin SDK for one token into Herald's codes:
//
//	UNREGISTERED, SENDER_ID_MISMATCH            EDEADADDRESS (clean the token up)
//	INVALID_ARGUMENT, SDK payload validation    EREJECTED
//	QUOTA_EXCEEDED, other 429s                  ETHROTTLED, RetryAfter from the Retry-After header
//	THIRD_PARTY_AUTH_ERROR, 401, 403, OAuth     EAUTH
//	UNAVAILABLE, INTERNAL, timeouts, transport  EUNAVAILABLE (RetryAfter when the server said)
//	anything else                               EINTERNAL
//
// The message names the token masked; the SDK's error is kept as the cause with any copy of the
// raw token masked too.
func classify(err error, token string) error {
	if err == nil {
		return nil
	}
	masked := notify.MaskToken(token)
	e := &notify.Error{Err: notify.Redact(err, token, masked)}
	switch {
	case messaging.IsUnregistered(err):
		e.Code, e.Message = notify.EDEADADDRESS, "fcm: token "+masked+" is not registered"
	case messaging.IsSenderIDMismatch(err):
		e.Code, e.Message = notify.EDEADADDRESS, "fcm: token "+masked+" belongs to another sender"
	case messaging.IsInvalidArgument(err):
		e.Code, e.Message = notify.EREJECTED, "fcm rejected the message to "+masked
	case messaging.IsQuotaExceeded(err), errorutils.IsResourceExhausted(err):
		e.Code, e.Message = notify.ETHROTTLED, "fcm quota exceeded"
		e.RetryAfter = retryAfter(errorutils.HTTPResponse(err))
	case messaging.IsThirdPartyAuthError(err):
		e.Code, e.Message = notify.EAUTH, "fcm: the project's APNs or web push credentials were refused"
	case errorutils.IsUnauthenticated(err), errorutils.IsPermissionDenied(err):
		e.Code, e.Message = notify.EAUTH, "fcm refused our credentials"
	case messaging.IsUnavailable(err), messaging.IsInternal(err),
		errorutils.IsUnavailable(err), errorutils.IsInternal(err), errorutils.IsDeadlineExceeded(err):
		e.Code, e.Message = notify.EUNAVAILABLE, "fcm unavailable"
		e.RetryAfter = retryAfter(errorutils.HTTPResponse(err))
	case errorutils.IsInvalidArgument(err):
		e.Code, e.Message = notify.EREJECTED, "fcm rejected the message to "+masked
	case errorutils.IsUnknown(err) && errorutils.HTTPResponse(err) == nil:
		// A transport failure the SDK could not name: connection reset, TLS, or the OAuth token
		// exchange, which the SDK reports only as text.
		if strings.Contains(err.Error(), "oauth2:") {
			e.Code, e.Message = notify.EAUTH, "fcm: could not obtain an access token"
		} else {
			e.Code, e.Message = notify.EUNAVAILABLE, "fcm unreachable"
		}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.Code, e.Message = notify.EUNAVAILABLE, "fcm send interrupted"
	case isNetError(err):
		e.Code, e.Message = notify.EUNAVAILABLE, "fcm unreachable"
	case errors.Is(err, errRefused):
		// The SDK validates the payload before sending (e.g. a malformed image URL).
		e.Code, e.Message = notify.EREJECTED, "fcm: invalid message"
	default:
		e.Code, e.Message = notify.EINTERNAL, "fcm send failed"
	}
	return e
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// retryAfter is resp's Retry-After; 0 when absent.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	return notify.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
}
