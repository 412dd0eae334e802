package awserr

import (
	"errors"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"herald/internal/notify"
)

func status(code int, err error) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}}
}

func TestCode(t *testing.T) {
	t.Parallel()
	codes := map[string]string{"ThrottlingException": notify.ETHROTTLED, "ValidationException": notify.EINVALID}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"the service's code decides", status(400, &smithy.GenericAPIError{Code: "ValidationException"}), notify.EINVALID},
		{"over the status", status(500, &smithy.GenericAPIError{Code: "ThrottlingException"}), notify.ETHROTTLED},
		{"429", status(429, &smithy.GenericAPIError{Code: "SomethingNew"}), notify.ETHROTTLED},
		{"5xx", status(503, errors.New("x")), notify.EUNAVAILABLE},
		{"403", status(403, &smithy.GenericAPIError{Code: "AccessDenied"}), notify.EAUTH},
		{"unknown 4xx is retried, not dropped", status(404, errors.New("x")), notify.EINTERNAL},
		{"no response", &smithyhttp.RequestSendError{Err: errors.New("connection refused")}, notify.EUNAVAILABLE},
		{"anything else", errors.New("boom"), notify.EINTERNAL},
	} {
		if got := Code(c.err, codes); got != c.want {
			t.Errorf("%s: Code = %q, want %q", c.name, got, c.want)
		}
	}
	if got := APICode(status(400, &smithy.GenericAPIError{Code: "ValidationException"})); got != "ValidationException" {
		t.Errorf("APICode = %q", got)
	}
}
