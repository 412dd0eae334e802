package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

func TestStreamAPI(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		apis := []string{}
		for _, id := range s.ofType("AWS::ApiGatewayV2::Api") {
			if s.props(id)["ProtocolType"] == "WEBSOCKET" {
				apis = append(apis, id)
			}
		}
		if len(apis) != 1 {
			t.Fatalf("WebSocket APIs %v, want one", apis)
		}
		api := apis[0]
		if rse := s.props(api)["RouteSelectionExpression"]; rse != "$request.body.action" {
			t.Errorf("route selection %v", rse)
		}
		ref := mustJSON(map[string]any{"Ref": api})

		// $connect, $disconnect and $default, all to the stream function.
		fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-stream")
		routes := map[string]bool{}
		for _, id := range s.ofType("AWS::ApiGatewayV2::Route") {
			p := s.props(id)
			if mustJSON(p["ApiId"]) != ref {
				continue
			}
			routes[p["RouteKey"].(string)] = true
			integ := s.props(strings.TrimSuffix(strings.TrimPrefix(mustJSON(p["Target"]), `{"Fn::Join":["",["integrations/",{"Ref":"`), `"}]]}`))
			if integ == nil || integ["IntegrationType"] != "AWS_PROXY" || !strings.Contains(mustJSON(integ["IntegrationUri"]), fn) {
				t.Errorf("route %s targets %v, want the stream function", p["RouteKey"], p["Target"])
			}
		}
		if mustJSON(routes) != `{"$connect":true,"$default":true,"$disconnect":true}` {
			t.Errorf("routes %v", routes)
		}
		stage := ""
		for _, id := range s.ofType("AWS::ApiGatewayV2::Stage") {
			if mustJSON(s.props(id)["ApiId"]) == ref {
				stage = s.props(id)["StageName"].(string)
			}
		}
		if stage != streamStage {
			t.Errorf("stage %q, want %q", stage, streamStage)
		}

		// The connections table: by connection id, a by-user index, TTL.
		s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName":               "herald-" + s.env.Name + "-connections",
			"KeySchema":               []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
			"TimeToLiveSpecification": map[string]any{"AttributeName": "expires", "Enabled": true},
		})

		// execute-api:ManageConnections: only the publishers, only on this API's stage's
		// POST @connections, never any other execute-api action.
		var holders []string
		for id, r := range s.resources {
			// A role's statements may overflow from its inline policy into a managed one.
			if r["Type"] != "AWS::IAM::Policy" && r["Type"] != "AWS::IAM::ManagedPolicy" {
				continue
			}
			for _, st := range list(s.props(id)["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				for _, a := range list(st["Action"]) {
					if !strings.HasPrefix(a.(string), "execute-api:") {
						continue
					}
					if a != "execute-api:ManageConnections" {
						t.Errorf("%s: %s", id, a)
					}
					res := mustJSON(st["Resource"])
					if !strings.Contains(res, `{"Ref":"`+api+`"}`) || !strings.HasSuffix(res, `/live/POST/@connections/*"]]}`) {
						t.Errorf("%s: ManageConnections on %s, want only %s's stage's POST/@connections/*", id, res, api)
					}
					for _, role := range list(s.props(id)["Roles"]) {
						holders = append(holders, mustJSON(role))
					}
				}
			}
		}
		slices.Sort(holders)
		var want []string
		for _, name := range inboxPublishers {
			want = append(want, mustJSON(map[string]any{"Ref": "Fn" + pascal(name) + "Role" + roleSuffix(t, s, "Fn"+pascal(name)+"Role")}))
		}
		slices.Sort(want)
		if !slices.Equal(holders, want) {
			t.Errorf("roles allowed ManageConnections %v, want the publishers' %v", holders, want)
		}
	})
}

// roleSuffix is the hash CDK appends to construct id's logical id.
func roleSuffix(t *testing.T, s *synthesis, id string) string {
	for _, r := range s.ofType("AWS::IAM::Role") {
		if strings.HasPrefix(r, id) && len(r) == len(id)+8 {
			return r[len(id):]
		}
	}
	t.Fatalf("no role %s", id)
	return ""
}
