package main

import (
	"slices"
	"strings"
	"testing"
)

// TestAdminAppendsOnlyToTheAuditLog: the admin function reads the notifications table (re-arming
// schedules) and writes nothing there but audit log items: its only DynamoDB write is PutItem on
// that table, conditioned on every leading key starting AUDIT# — no update, no delete — and,
// with functions/export, export jobs, under EXPORT# keys alone.
func TestAdminAppendsOnlyToTheAuditLog(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		roles := s.roleIDs(t)
		notifications := s.idByProp(t, "AWS::DynamoDB::Table", "TableName", "herald-"+s.env.Name+"-notifications")
		appends := 0
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
				res := list(st["Resource"])
				cond := mustJSON(st["Condition"])
				if slices.Equal(writes, []string{"dynamodb:PutItem"}) && len(res) == 1 && ref(res[0]) == notifications &&
					cond == `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["EXPORT#*"]}}` && slices.Contains(s.functions, exportFunction) {
					continue // export jobs (exports.go)
				}
				if !slices.Equal(writes, []string{"dynamodb:PutItem"}) || len(res) != 1 || ref(res[0]) != notifications ||
					cond != `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["AUDIT#*"]}}` {
					t.Errorf("admin may %v on %s under %s; want only PutItem on the notifications table's AUDIT# keys", writes, mustJSON(res), cond)
					continue
				}
				appends++
			}
		}
		if appends != 1 {
			t.Errorf("%d statements let admin append to the audit log, want 1", appends)
		}
	})
}
