package iam

import (
	"fmt"
	"sort"
	"strings"
)

// Unused is a grant of an identity policy that no observed call used.
type Unused struct {
	Principal string
	Statement StatementRef
	// Action is the statement's action pattern no call matched ("dynamodb:Query"); empty when
	// the statement uses NotAction and no call matched it at all.
	Action string
	// Resources are the statement's Resource (or NotResource) patterns, for the report.
	Resources []string
}

func (u Unused) String() string {
	what := u.Action
	if what == "" {
		what = "any action"
	}
	return fmt.Sprintf("%s: %s on %s is never used (%s)", u.Principal, what, strings.Join(u.Resources, ", "), u.Statement)
}

// UnusedGrants lists the Allow grants of identity policies that no call used. identity maps a
// principal (as it appears in Request.Principal) to its identity policies; calls are the
// requests observed (each evaluated with no resource policy). A grant is used by a call of its
// principal that the statement allows — action, resource and conditions, with the request
// context Evaluate builds (multivalued keys, the keys filled from the principal, policy
// variables) — whatever the final decision. An Allow statement with several actions is
// reported per unused action.
func UnusedGrants(identity map[string][]Policy, calls []Request) []Unused {
	type key struct {
		principal, policy string
		index             int
		action            string
	}
	used := map[key]bool{}
	for _, c := range calls {
		pols := identity[c.Principal]
		if len(pols) == 0 {
			continue
		}
		who := parsePrincipal(c.Principal)
		ctx := requestContext(c, who)
		for _, p := range pols {
			vars := p.Version == policyVariablesVersion
			for i, s := range p.Statements {
				if s.Effect != "Allow" || !s.resourceMatches(c.Resource, ctx, vars) || !s.conditionsHold(ctx, vars) {
					continue
				}
				if s.NotAction != nil {
					if s.actionMatches(c.Action) {
						used[key{c.Principal, p.ID, i, ""}] = true
					}
					continue
				}
				for _, a := range s.Action {
					if globMatch(strings.ToLower(a), strings.ToLower(c.Action)) {
						used[key{c.Principal, p.ID, i, a}] = true
					}
				}
			}
		}
	}
	var out []Unused
	principals := make([]string, 0, len(identity))
	for p := range identity {
		principals = append(principals, p)
	}
	sort.Strings(principals)
	for _, pr := range principals {
		for _, p := range identity[pr] {
			for i, s := range p.Statements {
				if s.Effect != "Allow" {
					continue
				}
				ref := StatementRef{Policy: p.ID, Index: i, Sid: s.Sid, Effect: s.Effect}
				res := s.Resource
				if res == nil {
					res = s.NotResource
				}
				if s.NotAction != nil {
					if !used[key{pr, p.ID, i, ""}] {
						out = append(out, Unused{Principal: pr, Statement: ref, Resources: res})
					}
					continue
				}
				for _, a := range s.Action {
					if !used[key{pr, p.ID, i, a}] {
						out = append(out, Unused{Principal: pr, Statement: ref, Action: a, Resources: res})
					}
				}
			}
		}
	}
	return out
}
