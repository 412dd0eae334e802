package awsenv

import (
	"encoding/json"
	"net/http"
	"slices"
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

// operatorAuth is the admin function's authentication: a JWT — which reaches it only on the
// console's data routes, the one place API Gateway puts the JWT authorizer in front of it — is an
// operator's when its claims hold group or scope, checked here again so a route wired by mistake
// does not admit any token of the issuer; any other JWT is refused. Other requests are next's.
func operatorAuth(next func(r *http.Request) (api.Principal, error), group, scope string) func(r *http.Request) (api.Principal, error) {
	return func(r *http.Request) (api.Principal, error) {
		rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
		if !ok || rc.Authorizer == nil || rc.Authorizer.JWT == nil {
			return next(r)
		}
		claims := rc.Authorizer.JWT.Claims
		sub := claims["sub"]
		if sub == "" {
			return api.Principal{}, notify.Errorf(notify.EUNAUTHORIZED, "the token has no sub claim")
		}
		admitted := group != "" && (slices.Contains(claimList(claims["cognito:groups"]), group) || slices.Contains(claimList(claims["groups"]), group)) ||
			scope != "" && (slices.Contains(claimList(claims["scope"]), scope) || slices.Contains(claimList(claims["scp"]), scope))
		if !admitted {
			return api.Principal{}, notify.Errorf(notify.EFORBIDDEN, "the token does not carry the console's admin group or scope")
		}
		operator := sub
		if u := claims["username"]; u != "" {
			operator = u
		} else if u := claims["cognito:username"]; u != "" {
			operator = u
		}
		return api.Principal{User: operator, Operator: true}, nil
	}
}

// claimList splits a claim API Gateway flattened to a string: a space-separated scope, or a list
// claim, which arrives as "[a b]" (or as JSON, ["a","b"]).
func claimList(v string) []string {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "[") {
		var list []string
		if json.Unmarshal([]byte(v), &list) == nil {
			return list
		}
		v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
}
