package iam

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Request is one call to authorize.
type Request struct {
	// Principal is who calls: a role ARN ("arn:aws:iam::123456789012:role/herald-dev-send"), an
	// assumed-role session ARN (matched as its role), an account id or root ARN, or a service
	// principal ("scheduler.amazonaws.com").
	Principal string
	Action    string // "sqs:SendMessage"
	Resource  string // the resource's ARN
	// ResourceAccount is the account owning the resource when its ARN has none (S3); empty:
	// the account in Resource, or the principal's when that has none either.
	ResourceAccount string
	// Context holds condition keys (aws:SourceArn, aws:SourceAccount…), matched without regard
	// to case. aws:PrincipalArn, aws:PrincipalAccount, aws:PrincipalServiceName and
	// aws:PrincipalType are filled from Principal unless set (and aws:username for an IAM
	// user); aws:SecureTransport is "true" unless set (AWS SDKs call over TLS).
	Context map[string]string
	// Multi holds multivalued condition keys (dynamodb:LeadingKeys, dynamodb:Attributes,
	// aws:CalledVia…), matched without regard to case: each is a set of values, tested with the
	// ForAllValues: and ForAnyValue: qualifiers. A key in Multi hides the same key in Context;
	// an empty set is the same as an absent key. A single-valued key is a set of one.
	Multi map[string][]string
}

// StatementRef points at one statement of a policy.
type StatementRef struct {
	Policy string // Policy.ID
	Index  int    // the statement's position in the policy, from 0
	Sid    string
	Effect string
	// Resource is true for a statement of a resource policy.
	Resource bool
}

func (r StatementRef) String() string {
	if r.Sid != "" {
		return fmt.Sprintf("%s statement %d (%s)", r.Policy, r.Index, r.Sid)
	}
	return fmt.Sprintf("%s statement %d", r.Policy, r.Index)
}

// Decision is the outcome of Evaluate.
type Decision struct {
	Allowed bool
	// Reason says why, naming the deciding statement, in a sentence fit for a test failure.
	Reason string
	// Statement is the deciding statement: the explicit Deny, or the Allow that granted (an
	// identity one first). Nil for an implicit deny.
	Statement *StatementRef
	// Allows are every Allow statement that matched the request, identity and resource ones.
	Allows []StatementRef
}

// Evaluate decides a request against the principal's identity policies and the resource's
// policies, as AWS does within one account and across accounts:
//
//   - an explicit Deny in any of them wins;
//   - within the resource's account, an Allow in either the identity or the resource policies
//     grants — except that a resource policy naming only the principal's account (its id or
//     root) delegates to the account's identity policies rather than granting by itself;
//   - across accounts, both must allow;
//   - a service principal has no identity policies: only the resource policies can allow it;
//   - a KMS key (a resource whose ARN's service is kms) is the exception to the first rule
//     within an account: its key policy must allow the request, either by naming the
//     principal, or by naming the principal's account (its root), which lets the account's
//     identity policies decide; an identity Allow alone has no effect ("Key policies in AWS
//     KMS"). A service principal needs a key policy statement naming it;
//   - otherwise the request is implicitly denied.
//
// Grants, permission boundaries, SCPs and session policies are not modelled.
func Evaluate(req Request, identity, resource []Policy) Decision {
	who := parsePrincipal(req.Principal)
	ctx := requestContext(req, who)
	resAccount := req.ResourceAccount
	if resAccount == "" {
		resAccount = arnAccount(req.Resource)
	}
	if resAccount == "" {
		resAccount = who.account
	}
	crossAccount := who.account != "" && resAccount != "" && who.account != resAccount

	var d Decision
	var idAllow, resAllow, resDelegate *StatementRef
	check := func(p Policy, isResource bool) *StatementRef {
		vars := p.Version == policyVariablesVersion
		for i, s := range p.Statements {
			ref := StatementRef{Policy: p.ID, Index: i, Sid: s.Sid, Effect: s.Effect, Resource: isResource}
			byAccount := false
			if isResource {
				m, acct := s.principalMatches(who)
				if !m {
					continue
				}
				byAccount = acct
			}
			if !s.actionMatches(req.Action) || !s.resourceMatches(req.Resource, ctx, vars) || !s.conditionsHold(ctx, vars) {
				continue
			}
			if s.Effect == "Deny" {
				return &ref
			}
			d.Allows = append(d.Allows, ref)
			switch {
			case !isResource:
				if idAllow == nil {
					idAllow = &ref
				}
			case byAccount:
				if resDelegate == nil {
					resDelegate = &ref
				}
			default:
				if resAllow == nil {
					resAllow = &ref
				}
			}
		}
		return nil
	}
	if who.kind != principalService {
		for _, p := range identity {
			if deny := check(p, false); deny != nil {
				return Decision{Reason: fmt.Sprintf("%s may not %s on %s: explicit deny in %s", req.Principal, req.Action, req.Resource, deny), Statement: deny}
			}
		}
	}
	for _, p := range resource {
		if deny := check(p, true); deny != nil {
			return Decision{Reason: fmt.Sprintf("%s may not %s on %s: explicit deny in %s", req.Principal, req.Action, req.Resource, deny), Statement: deny}
		}
	}
	allow := func(ref *StatementRef, why string) Decision {
		d.Allowed, d.Statement = true, ref
		d.Reason = fmt.Sprintf("%s may %s on %s: %s %s", req.Principal, req.Action, req.Resource, why, ref)
		return d
	}
	switch {
	case crossAccount:
		if idAllow != nil && (resAllow != nil || resDelegate != nil) {
			return allow(idAllow, "cross-account, allowed by the resource policy and by")
		}
		d.Reason = fmt.Sprintf("%s may not %s on %s: cross-account access needs an Allow in both the identity policies (%s) and the resource policy (%s)",
			req.Principal, req.Action, req.Resource, found(idAllow), found(firstNonNil(resAllow, resDelegate)))
		return d
	case isKMS(req.Resource):
		switch {
		case idAllow != nil && resDelegate != nil:
			return allow(idAllow, fmt.Sprintf("the key policy lets IAM policies decide (%s), and allowed by", resDelegate))
		case resAllow != nil:
			return allow(resAllow, "allowed by the key policy's")
		}
		d.Reason = fmt.Sprintf("%s may not %s on %s: ", req.Principal, req.Action, req.Resource)
		switch {
		case idAllow != nil && len(resource) == 0:
			d.Reason += fmt.Sprintf("%s allows it, but a KMS key's policy must allow the request too, and this key has none here (implicit deny)", idAllow)
		case idAllow != nil:
			d.Reason += fmt.Sprintf("%s allows it, but a KMS key's policy must allow the request too, and none of its statements names the principal, "+
				"or names the account (arn:aws:iam::%s:root) for this action to let IAM policies decide (implicit deny)", idAllow, who.account)
		case resDelegate != nil:
			d.Reason += fmt.Sprintf("no statement allows it (implicit deny); %s names only the account, which leaves the decision to the identity policies", resDelegate)
		default:
			d.Reason += "no statement allows it (implicit deny)"
		}
		return d
	case idAllow != nil:
		return allow(idAllow, "allowed by")
	case resAllow != nil:
		return allow(resAllow, "allowed by the resource policy's")
	}
	d.Reason = fmt.Sprintf("%s may not %s on %s: no statement allows it (implicit deny)", req.Principal, req.Action, req.Resource)
	if resDelegate != nil {
		d.Reason += fmt.Sprintf("; %s names only the account, which leaves the decision to the identity policies", resDelegate)
	}
	return d
}

func found(r *StatementRef) string {
	if r == nil {
		return "none"
	}
	return r.String()
}

func firstNonNil(a, b *StatementRef) *StatementRef {
	if a != nil {
		return a
	}
	return b
}

type principalKind int

const (
	principalAWS principalKind = iota
	principalService
	principalAnonymous
)

type principal struct {
	kind     principalKind
	raw      string
	account  string
	roleName string // for roles and assumed-role sessions
	userName string // for IAM users
	arn      string // the principal's ARN, sessions as their role's
}

func parsePrincipal(p string) principal {
	switch {
	case p == "" || p == "*":
		return principal{kind: principalAnonymous, raw: p}
	case !strings.HasPrefix(p, "arn:") && strings.HasSuffix(p, ".amazonaws.com"):
		return principal{kind: principalService, raw: p}
	case isAccountID(p):
		return principal{raw: p, account: p, arn: "arn:aws:iam::" + p + ":root"}
	}
	pr := principal{raw: p, arn: p, account: arnAccount(p)}
	parts := strings.SplitN(p, ":", 6)
	if len(parts) == 6 {
		res := parts[5]
		switch {
		case parts[2] == "sts" && strings.HasPrefix(res, "assumed-role/"):
			seg := strings.Split(res, "/")
			if len(seg) >= 2 {
				pr.roleName = seg[1]
				pr.arn = fmt.Sprintf("arn:%s:iam::%s:role/%s", parts[1], parts[4], seg[1])
			}
		case parts[2] == "iam" && strings.HasPrefix(res, "role/"):
			seg := strings.Split(res, "/")
			pr.roleName = seg[len(seg)-1]
		case parts[2] == "iam" && strings.HasPrefix(res, "user/"):
			seg := strings.Split(res, "/")
			pr.userName = seg[len(seg)-1]
		}
	}
	return pr
}

var accountRE = regexp.MustCompile(`^[0-9]{12}$`)

func isAccountID(s string) bool { return accountRE.MatchString(s) }

func arnAccount(a string) string {
	parts := strings.SplitN(a, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return ""
	}
	return parts[4]
}

// isKMS reports whether a resource is a KMS key (or alias): an ARN whose service is kms.
func isKMS(resource string) bool {
	parts := strings.SplitN(resource, ":", 4)
	return len(parts) == 4 && parts[0] == "arn" && parts[2] == "kms"
}

// reqContext is a request's condition keys, with lower-case names.
type reqContext struct {
	single map[string]string
	multi  map[string][]string
}

// values returns a key's set of values: a multivalued key's, or a single-valued key's one.
// It is empty when the key is absent or its set is empty, which AWS treats alike.
func (c *reqContext) values(key string) []string {
	k := strings.ToLower(key)
	if v, ok := c.multi[k]; ok {
		return v
	}
	if v, ok := c.single[k]; ok {
		return []string{v}
	}
	return nil
}

// singleValue returns a single-valued key, as a policy variable reads it: a multivalued key
// cannot be a policy variable.
func (c *reqContext) singleValue(key string) (string, bool) {
	k := strings.ToLower(key)
	if _, ok := c.multi[k]; ok {
		return "", false
	}
	v, ok := c.single[k]
	return v, ok
}

// requestContext is the request's condition keys with the ones AWS fills from the principal.
func requestContext(req Request, who principal) *reqContext {
	ctx := &reqContext{single: make(map[string]string, len(req.Context)+4)}
	for k, v := range req.Context {
		ctx.single[strings.ToLower(k)] = v
	}
	if len(req.Multi) > 0 {
		ctx.multi = make(map[string][]string, len(req.Multi))
		for k, v := range req.Multi {
			k = strings.ToLower(k)
			ctx.multi[k] = append(ctx.multi[k], v...)
		}
	}
	def := func(k, v string) {
		if ctx.values(k) == nil && v != "" {
			ctx.single[k] = v
		}
	}
	switch who.kind {
	case principalAWS:
		def("aws:principalarn", who.arn)
		def("aws:principalaccount", who.account)
		switch {
		case who.roleName != "":
			def("aws:principaltype", "AssumedRole")
		case who.userName != "":
			def("aws:principaltype", "User")
			def("aws:username", who.userName)
		}
	case principalService:
		def("aws:principalservicename", who.raw)
	}
	def("aws:securetransport", "true")
	return ctx
}

// principalMatches reports whether a resource policy statement applies to the principal, and
// whether it did so only by naming the principal's account.
func (s *Statement) principalMatches(who principal) (match, byAccount bool) {
	if s.Principal == nil && s.NotPrincipal == nil {
		// A resource policy statement without a principal applies to nobody.
		return false, false
	}
	if s.Principal != nil {
		match, byAccount = s.Principal.matches(who)
	}
	if s.NotPrincipal != nil {
		m, _ := s.NotPrincipal.matches(who)
		return !m, false
	}
	return match, byAccount
}

func (p *Principals) matches(who principal) (match, byAccount bool) {
	if p.All {
		return true, false
	}
	switch who.kind {
	case principalService:
		for _, s := range p.Service {
			if s == who.raw {
				return true, false
			}
		}
		return false, false
	case principalAnonymous:
		return false, false
	}
	for _, a := range p.AWS {
		switch {
		case a == "*":
			return true, false
		case a == who.arn || a == who.raw:
			return true, false
		case isAccountID(a) || strings.HasSuffix(a, ":root"):
			acct := a
			if !isAccountID(a) {
				acct = arnAccount(a)
			}
			if acct == who.account {
				byAccount = true
			}
		case who.roleName != "" && strings.HasPrefix(a, "arn:") && arnAccount(a) == who.account:
			// A role named with a path matches the session of that role.
			if parts := strings.SplitN(a, ":", 6); len(parts) == 6 && strings.HasPrefix(parts[5], "role/") {
				seg := strings.Split(parts[5], "/")
				if seg[len(seg)-1] == who.roleName {
					return true, false
				}
			}
		}
	}
	return byAccount, byAccount
}

func (s *Statement) actionMatches(action string) bool {
	list, negate := s.Action, false
	if s.NotAction != nil {
		list, negate = s.NotAction, true
	}
	for _, a := range list {
		if globMatch(strings.ToLower(a), strings.ToLower(action)) {
			return !negate
		}
	}
	return negate
}

// resourceMatches reports whether the statement applies to the resource: a Resource entry
// matches it, or no NotResource entry does. vars is whether the policy's version has policy
// variables.
func (s *Statement) resourceMatches(resource string, ctx *reqContext, vars bool) bool {
	match := func(entry string) bool {
		p := pattern{text: entry}
		if vars {
			p = expand(entry, ctx)
		}
		return resourceMatches(p, resource)
	}
	switch {
	case s.Resource != nil:
		for _, r := range s.Resource {
			if match(r) {
				return true
			}
		}
		return false
	case s.NotResource != nil:
		for _, r := range s.NotResource {
			if match(r) {
				return false
			}
		}
		return true
	}
	return true
}

func (s *Statement) conditionsHold(ctx *reqContext, vars bool) bool {
	for _, c := range s.Conditions {
		if !c.holds(ctx, vars) {
			return false
		}
	}
	return true
}

// holds evaluates the condition against the request's values of its key, a set ("IAM JSON
// policy elements: Condition operators", "Single-valued vs. multivalued context keys"):
//
//   - ForAllValues: every value of the set matches at least one condition value (with a
//     negated operator, matches none of them); true for an absent key or an empty set;
//   - ForAnyValue: at least one value matches one condition value (negated: matches none of
//     them); false for an absent key or an empty set;
//   - without a qualifier the key is tested like ForAnyValue: a single-valued key is a set of
//     one, and a negated operator holds for an absent key;
//   - …IfExists holds for an absent key; Null tests whether the key is absent (or empty).
//
// Condition values of the string and ARN operators have their policy variables substituted
// when vars is set.
func (c *Condition) holds(ctx *reqContext, vars bool) bool {
	got := ctx.values(c.Key)
	if c.base == "Null" {
		want := len(c.Values) > 0 && strings.EqualFold(c.Values[0], "true")
		return (len(got) == 0) == want
	}
	negated := strings.Contains(c.base, "Not")
	if len(got) == 0 {
		switch {
		case c.ifExists, c.qualifier == "ForAllValues":
			return true
		case c.qualifier == "ForAnyValue":
			return false
		}
		return negated
	}
	positive := strings.Replace(c.base, "Not", "", 1)
	wants := make([]pattern, len(c.Values))
	substitute := vars && (strings.HasPrefix(positive, "String") || strings.HasPrefix(positive, "Arn"))
	for i, w := range c.Values {
		wants[i] = pattern{text: w}
		if substitute {
			wants[i] = expand(w, ctx)
		}
	}
	matches := func(v string) bool {
		for _, w := range wants {
			if !w.none && compare(positive, v, w) {
				return true
			}
		}
		return false
	}
	if c.qualifier == "ForAllValues" {
		for _, v := range got {
			if matches(v) == negated {
				return false
			}
		}
		return true
	}
	for _, v := range got {
		if matches(v) != negated {
			return true
		}
	}
	return false
}

func compare(op, got string, want pattern) bool {
	switch op {
	case "StringEquals":
		return got == want.text
	case "StringEqualsIgnoreCase":
		return strings.EqualFold(got, want.text)
	case "StringLike":
		return stringLike(want, got)
	case "ArnEquals", "ArnLike":
		return arnLike(want, got)
	case "Bool":
		return strings.EqualFold(got, want.text)
	}
	if rel, ok := strings.CutPrefix(op, "Numeric"); ok {
		g, err1 := strconv.ParseFloat(got, 64)
		w, err2 := strconv.ParseFloat(want.text, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch rel {
		case "Equals":
			return g == w
		case "LessThan":
			return g < w
		case "LessThanEquals":
			return g <= w
		case "GreaterThan":
			return g > w
		case "GreaterThanEquals":
			return g >= w
		}
	}
	return false
}
