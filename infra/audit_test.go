package main

import (
	"slices"
	"strings"
	"testing"
)

// TestAdminWritesOnlyTheNotificationsTable: the admin function writes the notifications table
// — the audit log, export jobs, and the console operators' cancels, reschedules, pauses and
// resumes, as the api function does for services — and no other table: it reads deliveries and
// users, and writes neither, nor suppressions or inboxes.
func TestAdminWritesOnlyTheNotificationsTable(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		roles := s.roleIDs(t)
		notifications := s.idByProp(t, "AWS::DynamoDB::Table", "TableName", "herald-"+s.env.Name+"-notifications")
		writesNotifications := false
		for _, id := range append(s.ofType("AWS::IAM::Policy"), s.ofType("AWS::IAM::ManagedPolicy")...) {
			p := s.props(id)
			admin := slices.ContainsFunc(list(p["Roles"]), func(r any) bool { return roles[ref(r)] == adminFunction })
			if !admin {
				continue
			}
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				var writes []string
				for _, a := range list(st["Action"]) {
					a := a.(string)
					if a == "*" || a == "dynamodb:*" || strings.HasPrefix(a, "dynamodb:Put") || strings.HasPrefix(a, "dynamodb:Update") ||
						strings.HasPrefix(a, "dynamodb:Delete") || strings.HasPrefix(a, "dynamodb:BatchWrite") || strings.HasPrefix(a, "dynamodb:PartiQL") {
						writes = append(writes, a)
					}
				}
				if len(writes) == 0 {
					continue
				}
				for _, r := range list(st["Resource"]) {
					if ref(r) != notifications {
						t.Errorf("admin may %v on %s; want writes on the notifications table only", writes, mustJSON(r))
						continue
					}
					writesNotifications = true
				}
			}
		}
		if !writesNotifications {
			t.Error("admin may not write the notifications table: the audit log and the console's actions need it")
		}
	})
}

// TestAdminPausesOnlyHeraldsMappings: the admin function learns each queue's event source
// mapping (HERALD_CONSUMER_MAPPINGS), and may read and update those mappings and no other
// Lambda resource — an update naming a function only one of the environment's own.
func TestAdminPausesOnlyHeraldsMappings(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		roles := s.roleIDs(t)
		mappings := len(s.ofType("AWS::Lambda::EventSourceMapping"))
		found := false
		for _, id := range s.ofType("AWS::IAM::Policy") {
			p := s.props(id)
			admin := slices.ContainsFunc(list(p["Roles"]), func(r any) bool { return roles[ref(r)] == adminFunction })
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				lambdaActions := slices.ContainsFunc(list(st["Action"]), func(a any) bool { return strings.HasPrefix(a.(string), "lambda:") })
				if !lambdaActions || st["Sid"] != "PauseAndResumeConsumers" {
					continue
				}
				if !admin {
					t.Errorf("a role other than admin's may change event source mappings: %s", mustJSON(st))
				}
				found = true
				if got := list(st["Resource"]); len(got) != mappings {
					t.Errorf("the pause statement names %d resources, want the %d mappings: %s", len(got), mappings, mustJSON(st))
				}
				for _, r := range list(st["Resource"]) {
					if !strings.Contains(mustJSON(r), "event-source-mapping") {
						t.Errorf("the pause statement names %s, not a mapping", mustJSON(r))
					}
				}
				if !strings.Contains(mustJSON(st["Condition"]), "lambda:FunctionArn") {
					t.Errorf("an update may point a mapping at any function: %s", mustJSON(st))
				}
			}
		}
		if mappings > 0 && !found {
			t.Error("the admin function may not pause any queue's consumers")
		}
		fn := s.idByProp(t, "AWS::Lambda::Function", "FunctionName", "herald-"+s.env.Name+"-admin")
		env := mustJSON(s.props(fn)["Environment"])
		if !strings.Contains(env, envConsumerMappings) {
			t.Errorf("the admin function is not told the mappings (%s): %s", envConsumerMappings, env)
		}
	})
}
