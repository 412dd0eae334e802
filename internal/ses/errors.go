package ses

import (
	"errors"
	"fmt"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"herald/internal/notify"
)

// errorCodes maps SES (and generic AWS) error codes to Herald's codes.
var errorCodes = map[string]string{
	// This message or recipient: permanent.
	"MessageRejected":                    notify.EREJECTED,
	"BadRequestException":                notify.EREJECTED,
	"InvalidParameterValue":              notify.EREJECTED,
	"MailFromDomainNotVerifiedException": notify.EREJECTED,

	// Our account, identity or credentials: every message fails until an operator acts.
	"AccountSuspendedException":           notify.EAUTH,
	"SendingPausedException":              notify.EAUTH,
	"NotFoundException":                   notify.EAUTH, // configuration set or identity missing
	"NotAuthorized":                       notify.EAUTH,
	"AccessDenied":                        notify.EAUTH,
	"AccessDeniedException":               notify.EAUTH,
	"UnrecognizedClientException":         notify.EAUTH,
	"InvalidClientTokenId":                notify.EAUTH,
	"InvalidSignatureException":           notify.EAUTH,
	"SignatureDoesNotMatch":               notify.EAUTH,
	"IncompleteSignature":                 notify.EAUTH,
	"MissingAuthenticationTokenException": notify.EAUTH,
	"ExpiredToken":                        notify.EAUTH,
	"ExpiredTokenException":               notify.EAUTH,

	// Slow down.
	"TooManyRequestsException": notify.ETHROTTLED,
	"LimitExceededException":   notify.ETHROTTLED,
	"Throttling":               notify.ETHROTTLED,
	"ThrottlingException":      notify.ETHROTTLED,

	// SES's side.
	"InternalFailure":             notify.EUNAVAILABLE,
	"InternalServerError":         notify.EUNAVAILABLE,
	"ServiceUnavailable":          notify.EUNAVAILABLE,
	"ServiceUnavailableException": notify.EUNAVAILABLE,
}

// classifyError turns a SendEmail error into a *notify.Error. The provider's code decides; the
// HTTP status decides when the code is unknown; a request that got no response is EUNAVAILABLE.
// Neither the message nor the wrapped error's text contains the raw address.
func classifyError(err error, deliveryID, address string) *notify.Error {
	var (
		apiCode, apiMsg string
		status          int
		retryAfter      time.Duration
	)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		apiCode, apiMsg = apiErr.ErrorCode(), apiErr.ErrorMessage()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.Response != nil {
		status = respErr.HTTPStatusCode()
		retryAfter = notify.ParseRetryAfter(respErr.Response.Header.Get("Retry-After"), time.Now())
	}

	code, ok := errorCodes[apiCode]
	switch {
	case ok:
	case notify.CodeForStatus(status) != "":
		code = notify.CodeForStatus(status)
	case notify.NoResponse(err):
		code = notify.EUNAVAILABLE
	default:
		code = notify.EINTERNAL
	}

	mask := maskFunc(address)
	var what string
	switch {
	case apiCode != "":
		what = apiCode
		if apiMsg != "" && apiMsg != apiCode {
			what += ": " + apiMsg
		}
	default:
		what = notify.Failure(err, status)
	}
	return &notify.Error{
		Code:       code,
		Message:    mask(fmt.Sprintf("ses send %s to %s: %s", deliveryID, notify.MaskEmail(address), what)),
		RetryAfter: retryAfter,
		Err:        notify.Redact(err, address, notify.MaskEmail(address), strings.ToLower(address), notify.MaskEmail(address)),
	}
}

// maskFunc returns a function replacing address (as given and lower-cased) with its mask, since
// SES error messages can name the recipient.
func maskFunc(address string) func(string) string {
	if address == "" {
		return func(s string) string { return s }
	}
	m := notify.MaskEmail(address)
	r := strings.NewReplacer(address, m, strings.ToLower(address), m)
	return r.Replace
}
