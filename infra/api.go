package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/jsii-runtime-go"
	cdknag "github.com/cdklabs/cdk-nag-go/cdknag/v2"

	heraldapi "herald/internal/api"
)

// addAPI puts the api function behind an HTTP API: service routes need SigV4 (IAM), end users'
// inbox routes need a JWT from the configured issuer, /healthz is open; the operator routes
// (/v1/admin/…, SigV4) go to the admin function.
func (h *herald) addAPI() {
	fn, ok := h.functions["api"]
	if !ok {
		return
	}
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("ApiIntegration"), fn,
		&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
			PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
		})
	api := awsapigatewayv2.NewHttpApi(h.stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(h.name("api")),
		Description:        jsii.String("Herald HTTP API (" + h.env + ")"),
		CreateDefaultStage: jsii.Bool(false),
	})
	stage := awsapigatewayv2.NewHttpStage(h.stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(h.settings.API.RateLimit),
			BurstLimit: jsii.Number(float64(h.settings.API.BurstLimit)),
		},
	})
	logs := h.newLogGroup("ApiAccessLogs", "/aws/apigateway/"+h.name("api"))
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: logs.LogGroupArn(),
		Format:         jsii.String(heraldapi.GatewayAccessLogFormat()),
	})
	h.apiURL = stage.Url()

	any := &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY}
	iam := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String("/v1/{proxy+}"), Methods: any, Integration: integration, Authorizer: iam,
	})
	var adminIntegration awsapigatewayv2.HttpRouteIntegration
	if admin, ok := h.functions[adminFunction]; ok {
		// The operator routes go to the admin function (more specific than /v1/{proxy+}); the
		// api function does not serve them (internal/api.ServiceRoutes) and its role cannot
		// touch dead letters.
		adminIntegration = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("AdminIntegration"), admin,
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0()})
		api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path: jsii.String("/v1/admin/{proxy+}"), Methods: any, Authorizer: iam, Integration: adminIntegration,
		})
	}
	// The routes anyone may call without credentials, each capped on its own
	// (stack.api.open_routes) below the API's stage limit.
	var open []awsapigatewayv2.HttpRoute
	if jwt := h.settings.API.JWT; jwt.Issuer != "" {
		auth := awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("InboxJwt"), jsii.String(jwt.Issuer),
			&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{
				AuthorizerName: jsii.String(h.name("inbox-jwt")),
				JwtAudience:    jsii.Strings(jwt.Audience...),
			})
		if h.settings.API.Console && adminIntegration != nil {
			open = append(open, h.addConsole(api, adminIntegration, auth)...)
		}
		// More specific than /v1/{proxy+}, so API Gateway picks these for inbox paths.
		for _, path := range []string{"/v1/users/{user}/inbox", "/v1/users/{user}/inbox/{proxy+}"} {
			api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path: jsii.String(path), Methods: any, Integration: integration, Authorizer: auth,
			})
		}
	}
	health := api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String("/healthz"), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET},
		Integration: integration, Authorizer: awsapigatewayv2.NewHttpNoneAuthorizer(),
	})
	cdknag.NagSuppressions_AddResourceSuppressions((*health)[0], &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-APIG4"),
		Reason: jsii.String("GET /healthz is a liveness probe for load balancers and uptime checks; it returns no data"),
	}}, jsii.Bool(true))
	open = append(open, *health...)
	// One-click unsubscribe (RFC 8058): the signed token in the path is the credential, and a
	// mailbox provider posts without any other.
	unsubscribe := api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path:        jsii.String("/u/{token}"),
		Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET, awsapigatewayv2.HttpMethod_POST},
		Integration: integration, Authorizer: awsapigatewayv2.NewHttpNoneAuthorizer(),
	})
	for _, r := range *unsubscribe {
		cdknag.NagSuppressions_AddResourceSuppressions(r, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-APIG4"),
			Reason: jsii.String("/u/{token} is marketing email's one-click unsubscribe (RFC 8058): mailbox providers post to it " +
				"with no credentials, so the HMAC-signed token in the path is the credential; throttled as an open route"),
		}}, jsii.Bool(true))
	}
	open = append(open, *unsubscribe...)
	// The senders put the API's address in those links, unless herald.yaml names another
	// (marketing.unsubscribe_base_url).
	for _, name := range []string{"ingest", "send"} {
		if f, ok := h.functions[name]; ok {
			f.AddEnvironment(jsii.String(envPublicURL), api.ApiEndpoint(), nil)
		}
	}
	h.throttleOpenRoutes(stage.Node().DefaultChild().(awsapigatewayv2.CfnStage), open)
	h.api = api
}

// throttleOpenRoutes caps each unauthenticated route at stack.api.open_routes: API Gateway
// answers 429 above it, so a flood on a route that needs no credentials cannot take the
// concurrency the stages' consumers need. A stage's route settings name routes by key, and
// CloudFormation refuses one whose route does not exist yet, hence the dependencies.
func (h *herald) throttleOpenRoutes(stage awsapigatewayv2.CfnStage, routes []awsapigatewayv2.HttpRoute) {
	settings := map[string]any{}
	for _, r := range routes {
		cfn := r.Node().DefaultChild().(awsapigatewayv2.CfnRoute)
		settings[*cfn.RouteKey()] = h.openRouteThrottle()
		stage.Node().AddDependency(r)
	}
	stage.SetRouteSettings(settings)
}

// openRouteThrottle is the throttle of one unauthenticated route.
// RouteSettings is a plain JSON map in the template, so the keys are CloudFormation's own.
func (h *herald) openRouteThrottle() map[string]any {
	return map[string]any{
		"ThrottlingRateLimit":  h.settings.API.OpenRoutes.RateLimit,
		"ThrottlingBurstLimit": h.settings.API.OpenRoutes.BurstLimit,
	}
}

// addConsole routes the operator console to the admin function. A route has one authorizer, so
// /v1/admin/… keeps IAM (the CLI, SigV4) and the console's data routes are their own paths,
// /console/api/… (the admin function serves each as the /v1/admin/… route of the same name),
// behind the JWT authorizer; the function admits only tokens with the configured admin group or
// scope, and the audit log names the operator. The page and its script (GET /console,
// /console/{file}) carry no data and are open: a browser navigating to a page sends no bearer
// token, so an authorizer there would keep every operator out.
// It returns those open routes.
func (h *herald) addConsole(api awsapigatewayv2.HttpApi, admin awsapigatewayv2.HttpRouteIntegration, auth awsapigatewayv2.IHttpRouteAuthorizer) []awsapigatewayv2.HttpRoute {
	var open []awsapigatewayv2.HttpRoute
	api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String("/console/api/{proxy+}"), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
		Integration: admin, Authorizer: auth,
	})
	for _, path := range []string{"/console", "/console/{proxy+}"} {
		page := api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path: jsii.String(path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_GET},
			Integration: admin, Authorizer: awsapigatewayv2.NewHttpNoneAuthorizer(),
		})
		cdknag.NagSuppressions_AddResourceSuppressions((*page)[0], &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String("AwsSolutions-APIG4"),
			Reason: jsii.String("the console's page and script hold no data; its data routes (/console/api/...) need a JWT with the admin group or scope"),
		}}, jsii.Bool(true))
		open = append(open, *page...)
	}
	return open
}
