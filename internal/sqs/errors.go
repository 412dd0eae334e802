package sqs

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"herald/internal/notify"
)

// translate gives an SQS error its notify code, keeping it as the cause, with context from
// format. The SDK has already retried what it retries (throttling, 5xx, connection errors).
func translate(err error, format string, args ...any) error {
	return notify.Wrap(errorCode(err), err, format, args...)
}

func errorCode(err error) string {
	var (
		noQueue     *types.QueueDoesNotExist
		noResource  *types.ResourceNotFoundException
		badReceipt  *types.ReceiptHandleIsInvalid
		notInFlight *types.MessageNotInflight
		throttled   *types.RequestThrottled
		tooLong     *types.BatchRequestTooLong
		contents    *types.InvalidMessageContents
		api         smithy.APIError
		resp        *awshttp.ResponseError
	)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return notify.EUNAVAILABLE
	case errors.As(err, &noQueue), errors.As(err, &noResource):
		return notify.ENOTFOUND
	case errors.As(err, &badReceipt), errors.As(err, &notInFlight):
		return notify.ECONFLICT
	case errors.As(err, &throttled):
		return notify.ETHROTTLED
	case errors.As(err, &tooLong):
		return notify.ETOOLARGE
	case errors.As(err, &contents):
		return notify.EINVALID
	}
	if errors.As(err, &api) {
		if c := codeOf(api.ErrorCode(), api.ErrorMessage(), api.ErrorFault() == smithy.FaultClient); c != "" {
			return c
		}
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		return notify.EUNAVAILABLE // no answer: connection refused or reset, DNS, timeout
	}
	if errors.As(err, &resp) {
		switch s := resp.HTTPStatusCode(); {
		case s == 429:
			return notify.ETHROTTLED
		case s >= 500:
			return notify.EUNAVAILABLE
		case s == 401 || s == 403:
			return notify.EAUTH
		}
		return notify.EINTERNAL
	}
	return notify.EINTERNAL
}

// codeOf maps an SQS error code (JSON or query-compatible form) to a notify code; "" when the
// code alone does not decide.
func codeOf(code, msg string, senderFault bool) string {
	switch code {
	case "RequestThrottled", "ThrottlingException", "Throttling", "OverLimit", "TooManyRequestsException",
		"RequestThrottledException", "SlowDown", "KMS.ThrottlingException", "KmsThrottled":
		return notify.ETHROTTLED
	case "AccessDenied", "AccessDeniedException", "InvalidSecurity", "InvalidClientTokenId",
		"UnrecognizedClientException", "SignatureDoesNotMatch", "ExpiredToken", "MissingAuthenticationToken":
		return notify.EAUTH
	case "InternalError", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException":
		return notify.EUNAVAILABLE
	}
	if strings.Contains(msg, "must be shorter than") || strings.Contains(code, "TooLong") {
		return notify.ETOOLARGE
	}
	if senderFault && (strings.HasPrefix(code, "Invalid") || strings.HasPrefix(code, "Missing") ||
		strings.Contains(code, "Validation") || strings.Contains(code, "BatchEntry")) {
		return notify.EINVALID
	}
	return ""
}

// entryCode is the notify code of one failed batch entry.
func entryCode(f types.BatchResultErrorEntry) string {
	if c := codeOf(aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault); c != "" {
		return c
	}
	if f.SenderFault {
		return notify.EINVALID
	}
	return notify.EUNAVAILABLE
}

// isGone reports SQS's answer to a visibility change for a receipt whose message no longer
// exists (InvalidParameterValue naming the ReceiptHandle).
func isGone(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "InvalidParameterValue" &&
		strings.Contains(api.ErrorMessage(), "ReceiptHandle") && strings.Contains(api.ErrorMessage(), "does not exist")
}
