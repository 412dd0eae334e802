// Package iam evaluates AWS IAM policies — the identity and resource policies of a synthesized
// CloudFormation template, already resolved to concrete ARNs — for one request at a time, so a
// local run of the stack can refuse what AWS would refuse.
//
// It implements what CDK-generated templates use: Effect Allow and Deny; Action/NotAction;
// Resource/NotResource with * and ? wildcards matched segment by segment as AWS matches ARNs;
// Principal/NotPrincipal (AWS ARNs, account ids and roots, Service, "*"); the String…, Arn…,
// Bool, Null and Numeric… condition operators with the …IfExists suffix and the ForAnyValue:/
// ForAllValues: qualifiers over single- and multivalued context keys; policy variables
// (${aws:PrincipalAccount}, ${key, 'default'}, ${*}…) in policies of version 2012-10-17; and
// KMS key policies, which must allow a request on their key even within the account.
// ParsePolicy refuses any other element or operator, naming it. Grants, permission boundaries,
// SCPs and session policies are not modelled.
//
// No maintained Go library evaluates IAM policies offline (the public ones are learning projects
// or call the IAM simulator API), hence this one.
package iam

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Policy is one policy document and where it came from.
type Policy struct {
	// ID names the policy in decisions and reports: a template logical id, a managed policy ARN.
	ID         string
	Version    string
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid    string
	Effect string // Allow or Deny
	// Principal and NotPrincipal are set in resource policies only.
	Principal, NotPrincipal *Principals
	Action, NotAction       []string
	Resource, NotResource   []string
	Conditions              []Condition
}

// Principals is a Principal element. All is "*" (or {"AWS": "*"} for AWS principals).
type Principals struct {
	All       bool
	AWS       []string
	Service   []string
	Federated []string
}

// Condition is one operator-key test: {"StringEquals": {"aws:SourceArn": ["…"]}} is Operator
// "StringEquals", Key "aws:SourceArn", Values ["…"].
type Condition struct {
	Operator string // as written, e.g. "ForAnyValue:StringLikeIfExists"
	Key      string
	Values   []string

	base      string // StringLike
	ifExists  bool
	qualifier string // "", "ForAnyValue", "ForAllValues"
}

// ParsePolicy reads a policy document. It refuses elements and condition operators this
// package does not evaluate.
func ParsePolicy(id string, doc []byte) (Policy, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(doc, &raw); err != nil {
		return Policy{}, fmt.Errorf("policy %s: %w", id, err)
	}
	p := Policy{ID: id}
	for k, v := range raw {
		switch k {
		case "Version":
			if err := json.Unmarshal(v, &p.Version); err != nil {
				return Policy{}, fmt.Errorf("policy %s: Version: %w", id, err)
			}
		case "Id":
		case "Statement":
			var list []json.RawMessage
			if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
				list = []json.RawMessage{v}
			} else if err := json.Unmarshal(v, &list); err != nil {
				return Policy{}, fmt.Errorf("policy %s: Statement: %w", id, err)
			}
			for i, s := range list {
				st, err := parseStatement(s)
				if err != nil {
					return Policy{}, fmt.Errorf("policy %s: Statement[%d]: %w", id, i, err)
				}
				p.Statements = append(p.Statements, st)
			}
		default:
			return Policy{}, fmt.Errorf("policy %s: element %q is not supported", id, k)
		}
	}
	if p.Version == policyVariablesVersion {
		for i, st := range p.Statements {
			if err := st.checkVariables(); err != nil {
				return Policy{}, fmt.Errorf("policy %s: Statement[%d]: %w", id, i, err)
			}
		}
	}
	return p, nil
}

// checkVariables refuses the policy variables AWS refuses ("IAM policy elements: Variables and
// tags"): a malformed one, and one in a Resource or NotResource entry before the resource part
// of the ARN (after its fifth colon). Policies of other versions have no variables.
func (s *Statement) checkVariables() error {
	for _, r := range append(slices.Clone(s.Resource), s.NotResource...) {
		i := strings.Index(r, "${")
		if i < 0 {
			continue
		}
		if !strings.HasPrefix(r, "arn:") || strings.Count(r[:i], ":") < 5 {
			return fmt.Errorf("resource %q: policy variables may stand only in the resource part of an ARN, after its fifth colon", r)
		}
		if err := checkVariables(r); err != nil {
			return fmt.Errorf("resource %q: %w", r, err)
		}
	}
	for _, c := range s.Conditions {
		for _, v := range c.Values {
			if err := checkVariables(v); err != nil {
				return fmt.Errorf("condition %s %s: %w", c.Operator, c.Key, err)
			}
		}
	}
	return nil
}

// MustParsePolicy is ParsePolicy for literal documents in tests and tables; it panics on error.
func MustParsePolicy(id, doc string) Policy {
	p, err := ParsePolicy(id, []byte(doc))
	if err != nil {
		panic(err)
	}
	return p
}

func parseStatement(raw json.RawMessage) (Statement, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return Statement{}, err
	}
	var s Statement
	var err error
	for k, v := range f {
		switch k {
		case "Sid":
			err = json.Unmarshal(v, &s.Sid)
		case "Effect":
			err = json.Unmarshal(v, &s.Effect)
			if err == nil && s.Effect != "Allow" && s.Effect != "Deny" {
				err = fmt.Errorf("%q is not Allow or Deny", s.Effect)
			}
		case "Action":
			s.Action, err = stringOrList(v)
		case "NotAction":
			s.NotAction, err = stringOrList(v)
		case "Resource":
			s.Resource, err = stringOrList(v)
		case "NotResource":
			s.NotResource, err = stringOrList(v)
		case "Principal":
			s.Principal, err = parsePrincipals(v)
		case "NotPrincipal":
			s.NotPrincipal, err = parsePrincipals(v)
		case "Condition":
			s.Conditions, err = parseConditions(v)
		default:
			return Statement{}, fmt.Errorf("element %q is not supported", k)
		}
		if err != nil {
			return Statement{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	switch {
	case s.Effect == "":
		return Statement{}, fmt.Errorf("no Effect")
	case (s.Action == nil) == (s.NotAction == nil):
		return Statement{}, fmt.Errorf("needs exactly one of Action and NotAction")
	case s.Resource != nil && s.NotResource != nil:
		return Statement{}, fmt.Errorf("both Resource and NotResource")
	}
	for _, r := range append(slices.Clone(s.Resource), s.NotResource...) {
		// "You can't use a wildcard in the service segment that identifies the AWS product"
		// (IAM JSON policy elements: Resource).
		if parts := strings.SplitN(r, ":", 4); len(parts) == 4 && parts[0] == "arn" && strings.ContainsAny(parts[2], "*?") {
			return Statement{}, fmt.Errorf("resource %q: AWS does not allow a wildcard in the service segment of an ARN", r)
		}
	}
	return s, nil
}

func stringOrList(v json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, fmt.Errorf("must be a string or a list of strings, not %s", v)
	}
	if list == nil {
		list = []string{}
	}
	return list, nil
}

func parsePrincipals(v json.RawMessage) (*Principals, error) {
	var star string
	if err := json.Unmarshal(v, &star); err == nil {
		if star != "*" {
			return nil, fmt.Errorf("a string principal must be \"*\", not %q", star)
		}
		return &Principals{All: true}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	p := &Principals{}
	for k, raw := range m {
		list, err := stringOrList(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		switch k {
		case "AWS":
			p.AWS = list
		case "Service":
			p.Service = list
		case "Federated":
			p.Federated = list
		default:
			return nil, fmt.Errorf("principal type %q is not supported", k)
		}
	}
	return p, nil
}

// conditionOperators are the operators evaluated (before IfExists and the set qualifiers).
var conditionOperators = []string{
	"StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
	"StringLike", "StringNotLike",
	"ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike",
	"NumericEquals", "NumericNotEquals", "NumericLessThan", "NumericLessThanEquals",
	"NumericGreaterThan", "NumericGreaterThanEquals",
	"Bool", "Null",
}

func parseConditions(v json.RawMessage) ([]Condition, error) {
	var m map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	var out []Condition
	for _, op := range sortedKeys(m) {
		c := Condition{Operator: op}
		rest := op
		for _, q := range []string{"ForAnyValue", "ForAllValues"} {
			if r, ok := strings.CutPrefix(rest, q+":"); ok {
				c.qualifier, rest = q, r
			}
		}
		rest, c.ifExists = strings.CutSuffix(rest, "IfExists")
		if !slices.Contains(conditionOperators, rest) || (rest == "Null" && (c.ifExists || c.qualifier != "")) {
			return nil, fmt.Errorf("condition operator %q is not supported", op)
		}
		c.base = rest
		for _, key := range sortedKeys(m[op]) {
			raw := m[op][key]
			var vals []string
			var anyVals []any
			if err := json.Unmarshal(raw, &anyVals); err != nil {
				var one any
				if err := json.Unmarshal(raw, &one); err != nil {
					return nil, fmt.Errorf("%s %s: %w", op, key, err)
				}
				anyVals = []any{one}
			}
			for _, a := range anyVals {
				switch x := a.(type) {
				case string:
					vals = append(vals, x)
				case bool, float64:
					vals = append(vals, fmt.Sprint(x))
				default:
					return nil, fmt.Errorf("%s %s: value %v is not a string, number or boolean", op, key, a)
				}
			}
			cc := c
			cc.Key, cc.Values = key, vals
			out = append(out, cc)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
