package api

import "encoding/json"

// GatewayAccessLogFormat is the access log of the API Gateway stage in front of the api and admin
// functions (infra): one JSON line per request, naming the route template ($context.routeKey),
// never the raw path — device tokens and user ids are in paths. It is why the api function logs
// only failed requests behind API Gateway (Options.LogFailuresOnly): every request is here.
func GatewayAccessLogFormat() string {
	b, _ := json.Marshal(map[string]string{
		"requestId":          "$context.requestId",
		"time":               "$context.requestTime",
		"route":              "$context.routeKey",
		"status":             "$context.status",
		"protocol":           "$context.protocol",
		"responseLength":     "$context.responseLength",
		"latencyMs":          "$context.responseLatency",
		"integrationLatency": "$context.integrationLatency",
		"integrationError":   "$context.integrationErrorMessage",
		"authorizerError":    "$context.authorizer.error",
		"caller":             "$context.identity.userArn", // the IAM principal of service routes
	})
	return string(b)
}
