package ses

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"herald/internal/notify"
)

// sdkError wraps apiErr the way the SDK does: operation error → AWS response error → API error.
func sdkError(status int, header http.Header, apiErr error) error {
	if header == nil {
		header = http.Header{}
	}
	return &smithy.OperationError{ServiceID: "SESv2", OperationName: "SendEmail", Err: &awshttp.ResponseError{
		RequestID: "req-1",
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: header}},
			Err:      apiErr,
		},
	}}
}

func generic(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }

func TestClassifyError(t *testing.T) {
	t.Parallel()
	const addr = "Jun.Park@example.com"
	tests := []struct {
		name       string
		err        error
		code       string
		retryAfter time.Duration
		inMessage  string
	}{
		{"message rejected", sdkError(400, nil, &types.MessageRejected{Message: new("Email address is not verified: " + addr)}), notify.EREJECTED, 0, "MessageRejected"},
		{"bad request", sdkError(400, nil, &types.BadRequestException{Message: new("Illegal address")}), notify.EREJECTED, 0, "BadRequestException: Illegal address"},
		{"invalid parameter", sdkError(400, nil, generic("InvalidParameterValue", "Missing final '@domain'")), notify.EREJECTED, 0, "InvalidParameterValue"},
		{"mail from domain", sdkError(400, nil, &types.MailFromDomainNotVerifiedException{}), notify.EREJECTED, 0, "MailFromDomainNotVerified"},
		{"account suspended", sdkError(400, nil, &types.AccountSuspendedException{}), notify.EAUTH, 0, "AccountSuspended"},
		{"sending paused", sdkError(400, nil, &types.SendingPausedException{}), notify.EAUTH, 0, "SendingPaused"},
		{"access denied", sdkError(403, nil, generic("AccessDeniedException", "not authorized to perform ses:SendEmail")), notify.EAUTH, 0, "AccessDenied"},
		{"not authorized", sdkError(403, nil, generic("NotAuthorized", "")), notify.EAUTH, 0, "NotAuthorized"},
		{"bad signature", sdkError(403, nil, generic("SignatureDoesNotMatch", "")), notify.EAUTH, 0, "SignatureDoesNotMatch"},
		{"configuration set missing", sdkError(404, nil, &types.NotFoundException{}), notify.EAUTH, 0, "NotFound"},
		{"too many requests", sdkError(429, http.Header{"Retry-After": {"3"}}, &types.TooManyRequestsException{}), notify.ETHROTTLED, 3 * time.Second, "TooManyRequests"},
		{"quota", sdkError(400, nil, &types.LimitExceededException{}), notify.ETHROTTLED, 0, "LimitExceeded"},
		{"throttling", sdkError(400, nil, generic("Throttling", "Rate exceeded")), notify.ETHROTTLED, 0, "Throttling"},
		{"unknown 429", sdkError(429, nil, generic("SomethingNew", "")), notify.ETHROTTLED, 0, "SomethingNew"},
		{"internal failure", sdkError(500, nil, generic("InternalFailure", "")), notify.EUNAVAILABLE, 0, "InternalFailure"},
		{"502 html", sdkError(502, nil, &smithy.DeserializationError{Err: errors.New("invalid character '<'")}), notify.EUNAVAILABLE, 0, "HTTP 502"},
		{"unknown 400", sdkError(400, nil, generic("SomethingNew", "")), notify.EREJECTED, 0, "SomethingNew"},
		{"unknown 401", sdkError(401, nil, generic("SomethingNew", "")), notify.EAUTH, 0, "SomethingNew"},
		{"connection refused", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}}}, notify.EUNAVAILABLE, 0, "no response"},
		{"timeout", &smithy.OperationError{Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}, notify.EUNAVAILABLE, 0, "timed out"},
		{"canceled", &smithy.OperationError{Err: &smithy.CanceledError{Err: context.Canceled}}, notify.EUNAVAILABLE, 0, "canceled"},
		{"anything else", errors.New("boom"), notify.EINTERNAL, 0, "unexpected error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := classifyError(tt.err, "d_1", addr)
			if e.Code != tt.code {
				t.Errorf("code %s, want %s (%v)", e.Code, tt.code, e)
			}
			if e.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter %v, want %v", e.RetryAfter, tt.retryAfter)
			}
			if !strings.Contains(e.Message, tt.inMessage) || !strings.Contains(e.Message, "d_1") {
				t.Errorf("message %q lacks %q or the delivery id", e.Message, tt.inMessage)
			}
			for _, s := range []string{e.Message, e.Error()} {
				if strings.Contains(strings.ToLower(s), strings.ToLower(addr)) {
					t.Errorf("raw address in %q", s)
				}
			}
			if !errors.Is(e, tt.err) {
				t.Errorf("the SDK error is not in the chain")
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{" 30 ", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := notify.ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
