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
