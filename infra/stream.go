package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	cdknag "github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The live inbox stream: an API Gateway WebSocket API whose $connect, $disconnect and $default
// routes go to the stream function (functions/stream). The stages that write inbox items —
// prepare (new items), api (reads and deletes), campaign (broadcasts) — and the stream function
// itself (resume answers) post to users' connections through the stage's management API, found
// in the connections table (internal/ddb.ConnectionsTable).

const (
	streamFunction = "stream"
	streamStage    = "live"
)

// inboxPublishers are the functions that post inbox events to connections.
var inboxPublishers = []string{"api", "ingest", "prepare", "campaign", streamFunction}

// addStreamAPI creates the WebSocket API and its stage (before the functions, whose environment
// names them); addStreamRoutes wires the routes once the stream function exists. Without
// functions/stream there is no stream.
func (h *herald) addStreamAPI() {
	if !containsString(h.props.Functions, streamFunction) {
		return
	}
	h.wsAPI = awsapigatewayv2.NewCfnApi(h.stack, jsii.String("StreamApi"), &awsapigatewayv2.CfnApiProps{
		Name:                     jsii.String(h.name("stream")),
		Description:              jsii.String("Herald live inbox stream (" + h.env + "): WebSocket, JWT checked at $connect by the stream function"),
		ProtocolType:             jsii.String("WEBSOCKET"),
		RouteSelectionExpression: jsii.String("$request.body.action"),
	})
	stage := awsapigatewayv2.NewCfnStage(h.stack, jsii.String("StreamApiStage"), &awsapigatewayv2.CfnStageProps{
		ApiId:      h.wsAPI.Ref(),
		StageName:  jsii.String(streamStage),
		AutoDeploy: jsii.Bool(true),
		DefaultRouteSettings: &awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingRateLimit:  jsii.Number(h.settings.API.RateLimit),
			ThrottlingBurstLimit: jsii.Number(float64(h.settings.API.BurstLimit)),
		},
	})
	// Stack-wide, but only for this exact resource (a role's statements may overflow into a
	// managed policy CDK creates after per-role suppressions are attached). Who holds it is
	// pinned by TestStreamAPI.
	cdknag.NagSuppressions_AddStackSuppressions(h.stack, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Connection ids are minted by API Gateway at $connect, so posting to a user's connections needs " +
			"POST @connections/* — on this WebSocket API's live stage only, the one action execute-api:ManageConnections"),
		AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<StreamApi>/" + streamStage + "/POST/@connections/*"},
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(stage, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-APIG1"),
		Reason: jsii.String("WebSocket stage logging needs the account-wide API Gateway CloudWatch role, which this stack does not own; " +
			"the stream function logs every connect, refusal and disconnect (by connection id) instead"),
	}}, jsii.Bool(true))
}

// streamEnv adds to a publishing function's environment the connections table and the
// management endpoint, and grants it the table and execute-api:ManageConnections on this API's
// stage's POST @connections only.
func (h *herald) streamEnv(name string, role awsiam.Role, env map[string]*string) {
	if h.wsAPI == nil || !containsString(inboxPublishers, name) {
		return
	}
	env["HERALD_CONNECTIONS_TABLE"] = h.tables["connections"].TableName()
	env["HERALD_WEBSOCKET_ENDPOINT"] = jsii.String(fmt.Sprintf("https://%s.execute-api.%s.%s/%s", *h.wsAPI.Ref(), *h.stack.Region(), *h.stack.UrlSuffix(), streamStage))
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:     jsii.String("PostToStreamConnections"),
		Actions: jsii.Strings("execute-api:ManageConnections"),
		Resources: jsii.Strings(fmt.Sprintf("arn:%s:execute-api:%s:%s:%s/%s/POST/@connections/*",
			*h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), *h.wsAPI.Ref(), streamStage)),
	}))
	if name == streamFunction {
		jwt := h.settings.API.JWT
		env["HERALD_JWT_ISSUER"] = jsii.String(jwt.Issuer)
		env["HERALD_JWT_AUDIENCE"] = jsii.String(joinComma(jwt.Audience))
	}
}

// addStreamRoutes routes $connect, $disconnect and $default to the stream function.
func (h *herald) addStreamRoutes() {
	fn, ok := h.functions[streamFunction]
	if h.wsAPI == nil || !ok {
		return
	}
	integration := awsapigatewayv2.NewCfnIntegration(h.stack, jsii.String("StreamApiIntegration"), &awsapigatewayv2.CfnIntegrationProps{
		ApiId:           h.wsAPI.Ref(),
		IntegrationType: jsii.String("AWS_PROXY"),
		IntegrationUri: jsii.String(fmt.Sprintf("arn:%s:apigateway:%s:lambda:path/2015-03-31/functions/%s/invocations",
			*h.stack.Partition(), *h.stack.Region(), *fn.FunctionArn())),
	})
	stage := h.stack.Node().FindChild(jsii.String("StreamApiStage")).(awsapigatewayv2.CfnStage)
	for _, key := range []string{"$connect", "$disconnect", "$default"} {
		route := awsapigatewayv2.NewCfnRoute(h.stack, jsii.String("StreamApiRoute"+pascal(key[1:])), &awsapigatewayv2.CfnRouteProps{
			ApiId:             h.wsAPI.Ref(),
			RouteKey:          jsii.String(key),
			AuthorizationType: jsii.String("NONE"),
			Target:            jsii.String("integrations/" + *integration.Ref()),
		})
		cdknag.NagSuppressions_AddResourceSuppressions(route, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-APIG4"),
			Reason: jsii.String("WebSocket APIs take no JWT authorizer: the stream function verifies the user's JWT (issuer, audience, " +
				"expiry, signature) at $connect and refuses the connection otherwise; later routes act only for connections it recorded"),
		}}, jsii.Bool(true))
		if key == "$connect" {
			// Anyone may open a connection (the function checks its JWT), so $connect is capped
			// as the HTTP API's open routes are.
			stage.SetRouteSettings(map[string]any{key: h.openRouteThrottle()})
			stage.AddDependency(route)
		}
	}
	fn.AddPermission(jsii.String("StreamApiInvoke"), &awslambda.Permission{
		Principal: awsiam.NewServicePrincipal(jsii.String("apigateway.amazonaws.com"), nil),
		SourceArn: jsii.String(fmt.Sprintf("arn:%s:execute-api:%s:%s:%s/%s/*",
			*h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), *h.wsAPI.Ref(), streamStage)),
	})
	awscdk.NewCfnOutput(h.stack, jsii.String("StreamUrl"), &awscdk.CfnOutputProps{
		Value:       jsii.String(fmt.Sprintf("wss://%s.execute-api.%s.%s/%s", *h.wsAPI.Ref(), *h.stack.Region(), *h.stack.UrlSuffix(), streamStage)),
		Description: jsii.String("Live inbox WebSocket URL (?access_token=<the user's JWT>)"),
	})
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
