package awsenv

import (
	"net/http"
	"strings"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"herald/internal/api"
	"herald/internal/config"
	"herald/internal/notify"
)

// gatewayAuth maps the identity API Gateway already verified to a Principal: a JWT (end-user
// inbox routes) becomes the user in its "sub" claim; a SigV4 caller (service routes) becomes the
// service whose iam_principals list its role or user. A request the gateway did not
// authenticate falls back to the bearer API keys.
func gatewayAuth(cfg *config.Config) func(r *http.Request) (api.Principal, error) {
	byPrincipal := map[string]string{}
	for _, s := range cfg.Services {
		for _, p := range s.IAMPrincipals {
			byPrincipal[p] = s.Name
		}
	}
	return func(r *http.Request) (api.Principal, error) {
		rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
		if !ok || rc.Authorizer == nil {
			return api.Principal{}, nil
		}
		if jwt := rc.Authorizer.JWT; jwt != nil {
			if sub := jwt.Claims["sub"]; sub != "" {
				return api.Principal{User: sub}, nil
			}
			return api.Principal{}, notify.Errorf(notify.EUNAUTHORIZED, "the token has no sub claim")
		}
		if iam := rc.Authorizer.IAM; iam != nil && iam.UserARN != "" {
			if svc, ok := byPrincipal[principalOf(iam.UserARN)]; ok {
				return api.Principal{Service: svc}, nil
			}
			// The gateway verified who it is; Herald does not let it in. 403, not 401: no other
			// credentials for this principal would help, so no bearer challenge either.
			return api.Principal{}, notify.Errorf(notify.EFORBIDDEN, "this IAM principal is not in any service's iam_principals")
		}
		return api.Principal{}, nil
	}
}

// gatewayRequestID is API Gateway's id of the request, which audit entries carry (and derive
// their id from); "" outside API Gateway.
func gatewayRequestID(r *http.Request) string {
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
		return rc.RequestID
	}
	return ""
}

// principalOf turns a caller ARN into the IAM ARN configured for it: an assumed-role session
// (arn:aws:sts::123456789012:assumed-role/orders-api/i-0abc) becomes its role
// (arn:aws:iam::123456789012:role/orders-api); users stay as they are.
func principalOf(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "sts" || !strings.HasPrefix(parts[5], "assumed-role/") {
		return arn
	}
	role := strings.TrimPrefix(parts[5], "assumed-role/")
	if i := strings.LastIndexByte(role, '/'); i >= 0 {
		role = role[:i]
	}
	return parts[0] + ":" + parts[1] + ":iam::" + parts[4] + ":role/" + role
}
