package apns

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/sideshow/apns2"

	"herald/internal/notify"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	const token = "a1b2c3d4e5f6a7b8c9d0"
	resp := func(status int, reason string) *apns2.Response {
		return &apns2.Response{StatusCode: status, Reason: reason}
	}
	urlErr := &url.Error{Op: "Post", URL: "https://api.push.apple.com/3/device/" + token,
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name string
		resp *apns2.Response
		err  error
		code string
	}{
		{"sent", resp(200, ""), nil, ""},
		{"unregistered", resp(410, apns2.ReasonUnregistered), nil, notify.EDEADADDRESS},
		{"expired token", resp(410, apns2.ReasonExpiredToken), nil, notify.EDEADADDRESS},
		{"410 without reason", resp(410, ""), nil, notify.EDEADADDRESS},
		{"bad device token", resp(400, apns2.ReasonBadDeviceToken), nil, notify.EDEADADDRESS},
		{"token not for topic", resp(400, apns2.ReasonDeviceTokenNotForTopic), nil, notify.EREJECTED},
		{"bad collapse id", resp(400, apns2.ReasonBadCollapseID), nil, notify.EREJECTED},
		{"missing topic", resp(400, apns2.ReasonMissingTopic), nil, notify.EREJECTED},
		{"payload too large", resp(413, apns2.ReasonPayloadTooLarge), nil, notify.EREJECTED},
		{"invalid provider token", resp(403, apns2.ReasonInvalidProviderToken), nil, notify.EAUTH},
		{"expired provider token", resp(403, apns2.ReasonExpiredProviderToken), nil, notify.EAUTH},
		{"missing provider token", resp(403, apns2.ReasonMissingProviderToken), nil, notify.EAUTH},
		{"bad certificate environment", resp(403, apns2.ReasonBadCertificateEnvironment), nil, notify.EAUTH},
		{"too many requests", resp(429, apns2.ReasonTooManyRequests), nil, notify.ETHROTTLED},
		{"too many token updates", resp(429, apns2.ReasonTooManyProviderTokenUpdates), nil, notify.ETHROTTLED},
		{"internal server error", resp(500, apns2.ReasonInternalServerError), nil, notify.EUNAVAILABLE},
		{"service unavailable", resp(503, apns2.ReasonServiceUnavailable), nil, notify.EUNAVAILABLE},
		{"shutdown", resp(503, apns2.ReasonShutdown), nil, notify.EUNAVAILABLE},
		{"bad path", resp(404, apns2.ReasonBadPath), nil, notify.EINTERNAL},
		{"method not allowed", resp(405, apns2.ReasonMethodNotAllowed), nil, notify.EINTERNAL},
		{"connection refused", nil, urlErr, notify.EUNAVAILABLE},
		{"deadline", nil, context.DeadlineExceeded, notify.EUNAVAILABLE},
		{"canceled", nil, context.Canceled, notify.EUNAVAILABLE},
		{"undecodable answer", &apns2.Response{}, errors.New("invalid character 'x'"), notify.EINTERNAL},
		{"no response", nil, nil, notify.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := classify(tt.resp, tt.err, token)
			if got := notify.ErrorCode(err); got != tt.code {
				t.Errorf("code = %q, want %q (%v)", got, tt.code, err)
			}
			if err == nil {
				return
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error text contains the raw token: %v", err)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("the transport error is not kept as the cause: %v", err)
			}
			if tt.resp != nil && tt.resp.Reason != "" && !strings.Contains(err.Error(), tt.resp.Reason) {
				t.Errorf("error %q does not name the reason %q", err, tt.resp.Reason)
			}
		})
	}
}
