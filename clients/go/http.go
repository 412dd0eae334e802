package herald

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Auth authenticates an HTTP request to Herald: APIKey, SigV4 or JWT.
type Auth interface {
	authorize(ctx context.Context, req *http.Request, body []byte) error
}

// APIKey is a service's API key (Authorization: Bearer), as `herald dev` and a deployment's
// services.api_keys take it.
func APIKey(key string) Auth {
	return bearer(func(context.Context) (string, error) { return key, nil })
}

// JWT is an end user's token for their own inbox routes, fetched for every request (so a
// refreshed token is used as soon as it is).
func JWT(token func(ctx context.Context) (string, error)) Auth { return bearer(token) }

type bearer func(ctx context.Context) (string, error)

func (b bearer) authorize(ctx context.Context, req *http.Request, _ []byte) error {
	tok, err := b(ctx)
	if err != nil {
		return &Error{Code: CodeUnauthorized, Message: "no token", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// SigV4 signs requests for API Gateway's IAM-authorized routes (service execute-api) with the
// caller's AWS credentials — its role, as services[].iam_principals lists it.
func SigV4(region string, creds aws.CredentialsProvider) Auth {
	return sigv4{region: region, creds: creds, signer: v4.NewSigner()}
}

type sigv4 struct {
	region string
	creds  aws.CredentialsProvider
	signer *v4.Signer
}

func (s sigv4) authorize(ctx context.Context, req *http.Request, body []byte) error {
	c, err := s.creds.Retrieve(ctx)
	if err != nil {
		return &Error{Code: CodeUnauthorized, Message: "no AWS credentials", Err: err}
	}
	sum := sha256.Sum256(body)
	return s.signer.SignHTTP(ctx, c, req, hex.EncodeToString(sum[:]), "execute-api", s.region, time.Now())
}

// HTTPTransport calls Herald's HTTP API.
type HTTPTransport struct {
	BaseURL string       // e.g. http://127.0.0.1:8080, or the API Gateway stage URL
	Auth    Auth         // required
	Client  *http.Client // nil: a client with a 10 s timeout
	Retry   Retry
}

// NewHTTP is an HTTPTransport for baseURL with auth.
func NewHTTP(baseURL string, auth Auth) *HTTPTransport {
	return &HTTPTransport{BaseURL: baseURL, Auth: auth}
}

var defaultHTTPClient = &http.Client{Timeout: 10 * time.Second}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 16 << 20

// do sends one call, retrying what is worth it with the same body, and decodes a 2xx answer into
// out (when not nil). It returns the final status.
func (t *HTTPTransport) do(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, invalid("", "encode the request: %v", err)
		}
	}
	u := strings.TrimRight(t.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	client := t.Client
	if client == nil {
		client = defaultHTTPClient
	}
	r := t.Retry.withDefaults()
	for attempt := 1; ; attempt++ {
		status, raw, retryAfter, err := t.once(ctx, client, method, u, body)
		if err == nil {
			if out != nil && len(raw) > 0 {
				if err := json.Unmarshal(raw, out); err != nil {
					return status, &Error{Status: status, Code: "unreadable_answer", Message: fmt.Sprintf("%s %s: %v", method, path, err)}
				}
			}
			return status, nil
		}
		var he *Error
		again := errors.As(err, &he) && (he.Status == 0 || retryable(he.Status)) && he.Code != CodeUnauthorized
		if !again || attempt >= r.MaxAttempts || ctx.Err() != nil {
			return status, err
		}
		if serr := sleep(ctx, r.wait(attempt, retryAfter)); serr != nil {
			return status, &Error{Status: he.Status, Code: he.Code, Field: he.Field, Message: he.Message + " (gave up: " + serr.Error() + ")", Err: serr}
		}
	}
}

// once is one try: the status, the answer's body, its Retry-After, and an *Error for anything
// but 2xx.
func (t *HTTPTransport) once(ctx context.Context, client *http.Client, method, u string, body []byte) (int, []byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, invalid("", "request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if t.Auth == nil {
		return 0, nil, 0, &Error{Code: CodeUnauthorized, Message: "the transport has no Auth"}
	}
	if err := t.Auth.authorize(ctx, req, body); err != nil {
		return 0, nil, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, 0, &Error{Code: CodeUnavailable, Message: "no answer", Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err != nil {
			return resp.StatusCode, nil, 0, &Error{Status: resp.StatusCode, Code: CodeUnavailable, Message: "the answer broke off", Err: err}
		}
		return resp.StatusCode, raw, 0, nil
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	he := &Error{Status: resp.StatusCode, RetryAfter: retryAfter}
	if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
		he.Code, he.Message, he.Field = e.Error.Code, e.Error.Message, e.Error.Field
	} else {
		he.Code, he.Message = http.StatusText(resp.StatusCode), strings.TrimSpace(string(raw))
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
			he.Code = CodeUnauthorized
		}
	}
	return resp.StatusCode, nil, retryAfter, he
}

// Send implements Sender: POST /v1/notifications.
func (t *HTTPTransport) Send(ctx context.Context, req *SendRequest) (*Accepted, error) {
	if err := checkKey(req.IdempotencyKey, ""); err != nil {
		return nil, err
	}
	var a Accepted
	status, err := t.do(ctx, http.MethodPost, "/v1/notifications", nil, req, &a)
	if err != nil {
		return nil, err
	}
	a.Replayed = status == http.StatusOK
	return &a, nil
}

// MaxBatch is the most requests one SendBatch takes over HTTP.
const MaxBatch = 50

// SendBatch implements Sender: POST /v1/notifications/batch, up to MaxBatch requests; one bad
// request fails the whole batch, naming it (notifications[2].recipients[0].email).
func (t *HTTPTransport) SendBatch(ctx context.Context, reqs []*SendRequest) ([]Accepted, error) {
	if len(reqs) == 0 || len(reqs) > MaxBatch {
		return nil, invalid("notifications", "want 1 to %d send requests, got %d", MaxBatch, len(reqs))
	}
	for i, r := range reqs {
		if err := checkKey(r.IdempotencyKey, fmt.Sprintf("notifications[%d].", i)); err != nil {
			return nil, err
		}
	}
	var out struct {
		Notifications []Accepted `json:"notifications"`
	}
	if _, err := t.do(ctx, http.MethodPost, "/v1/notifications/batch", nil, map[string]any{"notifications": reqs}, &out); err != nil {
		return nil, err
	}
	return out.Notifications, nil
}
