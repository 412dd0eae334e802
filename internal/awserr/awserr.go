// Package awserr gives errors from AWS SDK calls Herald's codes, the same way for every AWS
// service an adapter calls (EventBridge Scheduler, EventBridge, Step Functions, the DynamoDB
// rate limiter): the service's own error code decides through the adapter's table; else the
// HTTP status; a call that got no response is EUNAVAILABLE; anything else EINTERNAL, which is
// retried, since an unexpected AWS answer is not the message's fault.
package awserr

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"herald/internal/notify"
)

// APICode is the service's error code in err ("ThrottlingException"), or "".
func APICode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// Code is err's notify code, with codes mapping the service's error codes.
func Code(err error, codes map[string]string) string {
	if code, ok := codes[APICode(err)]; ok {
		return code
	}
	var respErr *awshttp.ResponseError
	status := 0
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	switch {
	case status == http.StatusTooManyRequests:
		return notify.ETHROTTLED
	case status >= 500:
		return notify.EUNAVAILABLE
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return notify.EAUTH
	case status == 0 && notify.NoResponse(err):
		return notify.EUNAVAILABLE
	}
	return notify.EINTERNAL
}

// Wrap is notify.Wrap with err's Code.
func Wrap(err error, codes map[string]string, format string, args ...any) error {
	return notify.Wrap(Code(err, codes), err, format, args...)
}
