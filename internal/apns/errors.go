package apns

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/sideshow/apns2"

	"herald/internal/notify"
)

// classify translates APNs's answer for one device token into Herald's codes (nil when sent):
//
//	410 Unregistered, ExpiredToken; 400 BadDeviceToken          EDEADADDRESS (clean the token up)
//	400 DeviceTokenNotForTopic, other 4xx reasons, 413          EREJECTED
//	403 InvalidProviderToken, ExpiredProviderToken, certificate EAUTH
//	429 TooManyRequests                                         ETHROTTLED
//	5xx, timeouts, connection errors                            EUNAVAILABLE
//	anything else                                               EINTERNAL
//
// DeviceTokenNotForTopic is not treated as a dead token: a wrong topic in the config would
// otherwise delete every device of the app. (BadDeviceToken has the same risk when an
// environment is misconfigured; Apple documents it as a dead token, so it is one here.)
// Messages name the token masked; transport errors are kept as the cause with the token (which
// is in the request URL) masked.
func classify(resp *apns2.Response, err error, token string) error {
	masked := notify.MaskToken(token)
	if err != nil {
		e := &notify.Error{Err: notify.Redact(err, token, masked)}
		var ne net.Error
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			e.Code, e.Message = notify.EUNAVAILABLE, "apns push interrupted"
		case errors.As(err, &ne):
			e.Code, e.Message = notify.EUNAVAILABLE, "apns unreachable"
		default:
			e.Code, e.Message = notify.EINTERNAL, "apns push failed"
		}
		return e
	}
	if resp == nil {
		return &notify.Error{Code: notify.EINTERNAL, Message: "apns: no response"}
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}

	code := notify.EINTERNAL
	switch resp.Reason {
	case apns2.ReasonUnregistered, apns2.ReasonExpiredToken, apns2.ReasonBadDeviceToken:
		code = notify.EDEADADDRESS
	case apns2.ReasonInvalidProviderToken, apns2.ReasonExpiredProviderToken, apns2.ReasonMissingProviderToken,
		apns2.ReasonBadCertificate, apns2.ReasonBadCertificateEnvironment, apns2.ReasonForbidden:
		code = notify.EAUTH
	case apns2.ReasonTooManyRequests, apns2.ReasonTooManyProviderTokenUpdates:
		code = notify.ETHROTTLED
	case apns2.ReasonPayloadTooLarge, apns2.ReasonDeviceTokenNotForTopic:
		code = notify.EREJECTED
	default:
		switch s := resp.StatusCode; {
		case s == http.StatusGone:
			code = notify.EDEADADDRESS
		case s == http.StatusForbidden:
			code = notify.EAUTH
		case s == http.StatusTooManyRequests:
			code = notify.ETHROTTLED
		case s >= 500:
			code = notify.EUNAVAILABLE
		case s == http.StatusBadRequest, s == http.StatusRequestEntityTooLarge:
			code = notify.EREJECTED
		}
	}
	reason := resp.Reason
	if reason == "" {
		reason = http.StatusText(resp.StatusCode)
	}
	return &notify.Error{Code: code, Message: "apns " + reason + " for " + masked}
}
