package iam_test

import (
	"strings"
	"testing"

	"herald/internal/stackbox/iam"
)

// allowIf is an identity policy allowing s:A on everything when cond holds.
func allowIf(cond string) []iam.Policy {
	return []iam.Policy{iam.MustParsePolicy("P", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s:A","Resource":"*","Condition":`+cond+`}]}`)}
}

func TestMultiValuedConditions(t *testing.T) {
	const lk = "dynamodb:LeadingKeys"
	set := func(v ...string) map[string][]string { return map[string][]string{lk: v} }
	cases := []struct {
		name  string
		cond  string
		multi map[string][]string
		ctx   map[string]string
		want  bool
	}{
		{"ForAllValues: every value matches", `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("AUDIT#1", "AUDIT#2"), nil, true},
		{"ForAllValues: one value matches none", `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("AUDIT#1", "USER#1"), nil, false},
		{"ForAllValues: each value may match another policy value", `{"ForAllValues:StringEquals":{"dynamodb:LeadingKeys":["a","b","c"]}}`, set("a", "c"), nil, true},
		{"ForAllValues: empty set", `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set(), nil, true},
		{"ForAllValues: absent key", `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, nil, nil, true},
		{"ForAnyValue: one value matches", `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("USER#1", "AUDIT#1"), nil, true},
		{"ForAnyValue: no value matches", `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("USER#1", "USER#2"), nil, false},
		{"ForAnyValue: empty set", `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set(), nil, false},
		{"ForAnyValue: absent key", `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, nil, nil, false},
		{"ForAllValues negated: no value matches", `{"ForAllValues:StringNotLike":{"dynamodb:LeadingKeys":["AUDIT#*","EXPORT#*"]}}`, set("USER#1", "USER#2"), nil, true},
		{"ForAllValues negated: one value matches", `{"ForAllValues:StringNotLike":{"dynamodb:LeadingKeys":["AUDIT#*","EXPORT#*"]}}`, set("USER#1", "EXPORT#1"), nil, false},
		{"ForAllValues negated: empty set", `{"ForAllValues:StringNotLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set(), nil, true},
		{"ForAnyValue negated: one value matches none", `{"ForAnyValue:StringNotLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("AUDIT#1", "USER#1"), nil, true},
		{"ForAnyValue negated: every value matches", `{"ForAnyValue:StringNotLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("AUDIT#1", "AUDIT#2"), nil, false},
		{"ForAnyValue negated: absent key", `{"ForAnyValue:StringNotEquals":{"dynamodb:LeadingKeys":"x"}}`, nil, nil, false},
		{"no qualifier is ForAnyValue", `{"StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("USER#1", "AUDIT#1"), nil, true},
		{"no qualifier, no value matches", `{"StringLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("USER#1"), nil, false},
		{"no qualifier negated: one value matches none", `{"StringNotLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("AUDIT#1", "USER#1"), nil, true},
		{"no qualifier negated: absent key", `{"StringNotLike":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, nil, nil, true},
		{"ForAnyValue IfExists: absent key", `{"ForAnyValue:StringLikeIfExists":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, nil, nil, true},
		{"ForAnyValue IfExists: present, no match", `{"ForAnyValue:StringLikeIfExists":{"dynamodb:LeadingKeys":"AUDIT#*"}}`, set("USER#1"), nil, false},
		{"ForAllValues IfExists: present, all match", `{"ForAllValues:StringEqualsIfExists":{"dynamodb:LeadingKeys":["a","b"]}}`, set("b"), nil, true},
		{"IfExists: empty set is absent", `{"StringEqualsIfExists":{"dynamodb:LeadingKeys":"a"}}`, set(), nil, true},
		{"Null: absent", `{"Null":{"dynamodb:LeadingKeys":"true"}}`, nil, nil, true},
		{"Null: empty set", `{"Null":{"dynamodb:LeadingKeys":"true"}}`, set(), nil, true},
		{"Null: present", `{"Null":{"dynamodb:LeadingKeys":"false"}}`, set("a"), nil, true},
		{"Null true: present", `{"Null":{"dynamodb:LeadingKeys":"true"}}`, set("a"), nil, false},
		{"keys ignore case", `{"ForAllValues:StringLike":{"DynamoDB:leadingKeys":"AUDIT#*"}}`, map[string][]string{"DYNAMODB:LEADINGKEYS": {"USER#1"}}, nil, false},
		{"a single-valued key is a set of one", `{"ForAllValues:StringLike":{"k":"AUDIT#*"}}`, nil, map[string]string{"k": "USER#1"}, false},
		{"a single-valued key is a set of one, ForAnyValue", `{"ForAnyValue:StringLike":{"k":"AUDIT#*"}}`, nil, map[string]string{"k": "AUDIT#1"}, true},
		{"Multi hides Context", `{"StringEquals":{"k":"ctx"}}`, map[string][]string{"k": {"multi"}}, map[string]string{"k": "ctx"}, false},
		{"aws:CalledVia", `{"ForAnyValue:StringEquals":{"aws:CalledVia":"athena.amazonaws.com"}}`, map[string][]string{"aws:CalledVia": {"athena.amazonaws.com"}}, nil, true},
		{"ArnLike over a set", `{"ForAllValues:ArnLike":{"k":"arn:aws:sns:*:111111111111:*"}}`, map[string][]string{"k": {"arn:aws:sns:eu-west-1:111111111111:a", "arn:aws:sns:eu-west-1:222222222222:b"}}, nil, false},
		{"Numeric over a set", `{"ForAllValues:NumericLessThan":{"k":"10"}}`, map[string][]string{"k": {"1", "9"}}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := iam.Evaluate(iam.Request{Principal: sendRole, Action: "s:A", Resource: queue, Context: c.ctx, Multi: c.multi}, allowIf(c.cond), nil)
			if d.Allowed != c.want {
				t.Fatalf("%s: allowed=%v, want %v (%s)", c.cond, d.Allowed, c.want, d.Reason)
			}
		})
	}
}

// TestLeadingKeysDeny: a Deny on any AUDIT# partition key refuses a batch with one among
// others, and no other batch.
func TestLeadingKeysDeny(t *testing.T) {
	id := []iam.Policy{iam.MustParsePolicy("Tables", `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":"dynamodb:BatchWriteItem","Resource":"`+table+`"},
		{"Sid":"AuditIsAppendOnly","Effect":"Deny","Action":["dynamodb:BatchWriteItem","dynamodb:DeleteItem"],"Resource":"`+table+`",
		 "Condition":{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":["AUDIT#*"]}}}]}`)}
	for _, c := range []struct {
		keys    []string
		allowed bool
	}{
		{[]string{"USER#1", "AUDIT#2026-01-01", "USER#2"}, false},
		{[]string{"AUDIT#x"}, false},
		{[]string{"USER#1", "USER#2", "EXPORT#1"}, true},
		{[]string{"audit#1"}, true}, // StringLike is case-sensitive
		{nil, true},
	} {
		d := iam.Evaluate(iam.Request{Principal: sendRole, Action: "dynamodb:BatchWriteItem", Resource: table,
			Multi: map[string][]string{"dynamodb:LeadingKeys": c.keys}}, id, nil)
		if d.Allowed != c.allowed || (!c.allowed && !strings.Contains(d.Reason, "explicit deny in Tables statement 1 (AuditIsAppendOnly)")) {
			t.Errorf("%v: allowed=%v %s; want %v", c.keys, d.Allowed, d.Reason, c.allowed)
		}
	}
}

// TestResourceWildcards follows "IAM JSON policy elements: Resource": wildcards apply within
// the colon-separated segments of an ARN; a * that ends a segment can expand beyond the colon
// boundaries; the resource segment's * and ? match any character, ':' and '/' included.
func TestResourceWildcards(t *testing.T) {
	cases := []struct {
		pattern, arn string
		want         bool
	}{
		{"arn:aws:sqs:*:123456789012:herald-*", "arn:aws:sqs:us-east-1:123456789012:herald-dev-x", true},
		{"arn:aws:sqs:*:123456789012:herald-*", "arn:aws:sqs:us-east-1:999999999999:herald-dev-x", false},
		{"arn:aws:sqs:*:123456789012:herald-*", "arn:aws:sqs:us-east-1:123456789012:other", false},
		// The * ends the region segment: the documentation lets it expand beyond the colons.
		{"arn:aws:sqs:*", "arn:aws:sqs:us-east-1:1:q", true},
		{"arn:aws:sqs:*", "arn:aws:sns:us-east-1:1:q", false},
		{"arn:*", "arn:aws:sns:us-east-1:1:t", true},
		// A * inside a segment stays in it (a whole-ARN glob would match across the colon).
		{"arn:aws:sqs:us-*-1:123456789012:q", "arn:aws:sqs:us-east-1:123456789012:q", true},
		{"arn:aws:sqs:us-*-1:123456789012:q", "arn:aws:sqs:us-east:x-1:123456789012:q", false},
		{"arn:aws:sqs:eu-west-?:123456789012:q", "arn:aws:sqs:eu-west-1:123456789012:q", true},
		// A ? before the resource segment is one character of the segment, never the colon.
		{"arn:aws:sqs:eu-west-1?123456789012:q", "arn:aws:sqs:eu-west-1:123456789012:q", false},
		{"arn:aws:iam::*:role/x", "arn:aws:iam::123456789012:role/x", true},
		{"arn:aws:iam::*:role/x", "arn:aws:iam::123456789012:role/y", false},
		// The resource segment: * runs over '/' and ':'.
		{"arn:aws:s3:::bucket/*/test/*", "arn:aws:s3:::bucket/1/2/test/3/object.jpg", true},
		{"arn:aws:s3:::bucket/*/test/*", "arn:aws:s3:::bucket//test/object.jpg", true},
		{"arn:aws:s3:::bucket/*/test/*", "arn:aws:s3:::bucket/1-test/object.jpg", false},
		{"arn:aws:lambda:eu-west-1:123456789012:function:herald-*", "arn:aws:lambda:eu-west-1:123456789012:function:herald-dev-send:live", true},
		{"arn:aws:lambda:eu-west-1:123456789012:function:herald-???", "arn:aws:lambda:eu-west-1:123456789012:function:herald-a:1", true},
		{"arn:aws:dynamodb:eu-west-1:123456789012:table/t", "arn:aws:dynamodb:eu-west-1:123456789012:table/t/index/i", false},
		{"arn:aws:dynamodb:eu-west-1:123456789012:table/t*", "arn:aws:dynamodb:eu-west-1:123456789012:table/t/index/i", true},
		// Resources are case-sensitive; "*" is every resource, ARN or not.
		{"arn:aws:sqs:*:123456789012:Herald-*", "arn:aws:sqs:us-east-1:123456789012:herald-x", false},
		{"*", "arn:aws:sqs:us-east-1:123456789012:q", true},
		{"*", "*", true},
		{"arn:aws:sqs:*", "*", false},
	}
	for _, c := range cases {
		t.Run(c.pattern+" "+c.arn, func(t *testing.T) {
			// The ARNs name various accounts: the principal's account owns them all here, so the
			// cross-account rule stays out of the way.
			req := iam.Request{Principal: sendRole, Action: "s:A", Resource: c.arn, ResourceAccount: acct}
			id := []iam.Policy{iam.MustParsePolicy("P", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s:A","Resource":"`+c.pattern+`"}]}`)}
			if d := iam.Evaluate(req, id, nil); d.Allowed != c.want {
				t.Fatalf("Resource: allowed=%v, want %v (%s)", d.Allowed, c.want, d.Reason)
			}
			not := []iam.Policy{iam.MustParsePolicy("P", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s:A","NotResource":"`+c.pattern+`"}]}`)}
			if d := iam.Evaluate(req, not, nil); d.Allowed == c.want {
				t.Fatalf("NotResource: allowed=%v, want %v (%s)", d.Allowed, !c.want, d.Reason)
			}
		})
	}
}

// TestPolicyVariables follows "IAM policy elements: Variables and tags".
func TestPolicyVariables(t *testing.T) {
	const user = "arn:aws:iam::111111111111:user/alice"
	type req = iam.Request
	cases := []struct {
		name    string
		version string // the policy's Version; "" leaves it out
		stmt    string // the statement's Resource/NotResource and Condition
		req     iam.Request
		want    bool
	}{
		{"account variable in the resource", "2012-10-17", `"Resource":"arn:aws:sqs:eu-west-1:*:q-${aws:PrincipalAccount}"`,
			req{Principal: sendRole, Resource: "arn:aws:sqs:eu-west-1:111111111111:q-111111111111"}, true},
		{"account variable, another account's queue", "2012-10-17", `"Resource":"arn:aws:sqs:eu-west-1:*:q-${aws:PrincipalAccount}"`,
			req{Principal: sendRole, Resource: "arn:aws:sqs:eu-west-1:111111111111:q-222222222222"}, false},
		{"an IAM user's name", "2012-10-17", `"Resource":"arn:aws:s3:::home/${aws:username}/*"`,
			req{Principal: user, Resource: "arn:aws:s3:::home/alice/notes"}, true},
		{"another user's home", "2012-10-17", `"Resource":"arn:aws:s3:::home/${aws:username}/*"`,
			req{Principal: user, Resource: "arn:aws:s3:::home/bob/notes"}, false},
		{"a role has no aws:username: the resource matches nothing", "2012-10-17", `"Resource":"arn:aws:s3:::home/${aws:username}/*"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::home//notes"}, false},
		{"the default stands for a missing key", "2012-10-17", `"Resource":"arn:aws:s3:::home/${aws:username, 'shared'}/*"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::home/shared/notes"}, true},
		{"the default is not used when the key has a value", "2012-10-17", `"Resource":"arn:aws:s3:::home/${aws:username, 'shared'}/*"`,
			req{Principal: user, Resource: "arn:aws:s3:::home/shared/notes"}, false},
		{"a request context key", "2012-10-17", `"Resource":"arn:aws:sqs:eu-west-1:111111111111:${aws:SourceAccount}-q"`,
			req{Principal: sendRole, Resource: "arn:aws:sqs:eu-west-1:111111111111:999999999999-q", Context: map[string]string{"aws:SourceAccount": "999999999999"}}, true},
		{"${*} is a literal star", "2012-10-17", `"Resource":"arn:aws:s3:::b/${*}x"`, req{Principal: sendRole, Resource: "arn:aws:s3:::b/*x"}, true},
		{"${*} is not a wildcard", "2012-10-17", `"Resource":"arn:aws:s3:::b/${*}x"`, req{Principal: sendRole, Resource: "arn:aws:s3:::b/yx"}, false},
		{"${?} is a literal question mark", "2012-10-17", `"Resource":"arn:aws:s3:::b/${?}"`, req{Principal: sendRole, Resource: "arn:aws:s3:::b/y"}, false},
		{"${$} is a dollar sign", "2012-10-17", `"Resource":"arn:aws:s3:::b/${$}{x}"`, req{Principal: sendRole, Resource: "arn:aws:s3:::b/${x}"}, true},
		{"a value's star is literal", "2012-10-17", `"Resource":"arn:aws:s3:::b/${k}"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::b/abc", Context: map[string]string{"k": "a*"}}, false},
		{"a multivalued key is no variable", "2012-10-17", `"Resource":"arn:aws:s3:::b/${k}"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::b/x", Multi: map[string][]string{"k": {"x"}}}, false},
		{"a multivalued key takes the default", "2012-10-17", `"Resource":"arn:aws:s3:::b/${k, 'd'}"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::b/d", Multi: map[string][]string{"k": {"x"}}}, true},
		{"without Version 2012-10-17 a variable is literal text", "", `"Resource":"arn:aws:s3:::b/${aws:username}"`,
			req{Principal: user, Resource: "arn:aws:s3:::b/${aws:username}"}, true},
		{"without Version 2012-10-17 nothing is substituted", "2008-10-17", `"Resource":"arn:aws:s3:::b/${aws:username}"`,
			req{Principal: user, Resource: "arn:aws:s3:::b/alice"}, false},
		{"a NotResource entry with no value excludes nothing", "2012-10-17", `"NotResource":"arn:aws:s3:::b/${aws:username}/*"`,
			req{Principal: sendRole, Resource: "arn:aws:s3:::b/x/y"}, true},
		{"a NotResource entry with a value excludes its resource", "2012-10-17", `"NotResource":"arn:aws:s3:::b/${aws:username}/*"`,
			req{Principal: user, Resource: "arn:aws:s3:::b/alice/y"}, false},

		{"condition: StringEquals a variable", "2012-10-17", `"Resource":"*","Condition":{"StringEquals":{"aws:SourceAccount":"${aws:PrincipalAccount}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"aws:SourceAccount": acct}}, true},
		{"condition: StringEquals a variable, other value", "2012-10-17", `"Resource":"*","Condition":{"StringEquals":{"aws:SourceAccount":"${aws:PrincipalAccount}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"aws:SourceAccount": other}}, false},
		{"condition: StringLike around a variable", "2012-10-17", `"Resource":"*","Condition":{"StringLike":{"s3:prefix":"home/${aws:username}/*"}}`,
			req{Principal: user, Resource: queue, Context: map[string]string{"s3:prefix": "home/alice/x"}}, true},
		{"condition: a variable with no value matches nothing", "2012-10-17", `"Resource":"*","Condition":{"StringEquals":{"k":"${missing}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"k": ""}}, false},
		{"condition: a negated operator matches a variable with no value", "2012-10-17", `"Resource":"*","Condition":{"StringNotEquals":{"k":"${missing}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"k": "v"}}, true},
		{"condition: other values still count", "2012-10-17", `"Resource":"*","Condition":{"StringEquals":{"k":["${missing}","v"]}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"k": "v"}}, true},
		{"condition: a default", "2012-10-17", `"Resource":"*","Condition":{"StringEquals":{"k":"${missing, 'v'}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"k": "v"}}, true},
		{"condition: ArnLike with a variable", "2012-10-17", `"Resource":"*","Condition":{"ArnLike":{"aws:SourceArn":"arn:aws:sns:*:${aws:PrincipalAccount}:*"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"aws:SourceArn": "arn:aws:sns:eu-west-1:111111111111:t"}}, true},
		{"condition: ArnLike with a variable, other account", "2012-10-17", `"Resource":"*","Condition":{"ArnLike":{"aws:SourceArn":"arn:aws:sns:*:${aws:PrincipalAccount}:*"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"aws:SourceArn": "arn:aws:sns:eu-west-1:222222222222:t"}}, false},
		{"condition: ArnEquals with a whole ARN variable", "2012-10-17", `"Resource":"*","Condition":{"ArnEquals":{"aws:SourceArn":"${aws:PrincipalArn}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"aws:SourceArn": sendRole}}, true},
		{"condition: Numeric operators take no variables", "2012-10-17", `"Resource":"*","Condition":{"NumericEquals":{"n":"${n}"}}`,
			req{Principal: sendRole, Resource: queue, Context: map[string]string{"n": "1"}}, false},
		{"condition: a variable in a set operator", "2012-10-17", `"Resource":"*","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"USER#${aws:username}#*"}}`,
			req{Principal: user, Resource: queue, Multi: map[string][]string{"dynamodb:LeadingKeys": {"USER#alice#1", "USER#alice#2"}}}, true},
		{"condition: a variable in a set operator, another user's key", "2012-10-17", `"Resource":"*","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"USER#${aws:username}#*"}}`,
			req{Principal: user, Resource: queue, Multi: map[string][]string{"dynamodb:LeadingKeys": {"USER#alice#1", "USER#bob#1"}}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			version := ""
			if c.version != "" {
				version = `"Version":"` + c.version + `",`
			}
			p := iam.MustParsePolicy("P", `{`+version+`"Statement":[{"Effect":"Allow","Action":"s:A",`+c.stmt+`}]}`)
			c.req.Action = "s:A"
			if d := iam.Evaluate(c.req, []iam.Policy{p}, nil); d.Allowed != c.want {
				t.Fatalf("allowed=%v, want %v (%s)", d.Allowed, c.want, d.Reason)
			}
		})
	}
}

// TestKMSKeyPolicy: a KMS key's policy must allow every request on the key ("Key policies in
// AWS KMS"): by naming the principal, or by naming its account root, which lets the account's
// IAM policies decide. A service principal needs a statement naming it.
func TestKMSKeyPolicy(t *testing.T) {
	const (
		key        = "arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		topic      = "arn:aws:sns:eu-west-1:111111111111:herald-dev-alarms"
		otherTopic = "arn:aws:sns:eu-west-1:111111111111:herald-dev-other"
		auditor    = "arn:aws:iam::111111111111:role/auditor"
		topicKey   = "kms:EncryptionContext:aws:sns:topicArn"
	)
	services := `
		{"Sid":"EventBridgeForTheTopic","Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":["kms:Decrypt","kms:GenerateDataKey*"],"Resource":"*",
		 "Condition":{"StringEquals":{"` + topicKey + `":"` + topic + `","aws:SourceAccount":"111111111111"}}},
		{"Sid":"Auditor","Effect":"Allow","Principal":{"AWS":"` + auditor + `"},"Action":"kms:DescribeKey","Resource":"*"},
		{"Sid":"ViaSNSOnly","Effect":"Allow","Principal":{"AWS":"*"},"Action":"kms:Decrypt","Resource":"*",
		 "Condition":{"StringEquals":{"kms:ViaService":"sns.eu-west-1.amazonaws.com","kms:CallerAccount":"111111111111"},"ArnLike":{"aws:SourceArn":"` + topic + `"}}}`
	withRoot := iam.MustParsePolicy("KeyPolicy", `{"Version":"2012-10-17","Statement":[
		{"Sid":"EnableIAM","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111111111111:root"},"Action":"kms:*","Resource":"*"},`+services+`,
		{"Sid":"TLS","Effect":"Deny","Principal":"*","Action":"kms:*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`)
	withoutRoot := iam.MustParsePolicy("KeyPolicy", `{"Version":"2012-10-17","Statement":[`+services+`]}`)
	describeOnly := iam.MustParsePolicy("KeyPolicy", `{"Version":"2012-10-17","Statement":[
		{"Sid":"EnableIAMForDescribe","Effect":"Allow","Principal":{"AWS":"111111111111"},"Action":"kms:Describe*","Resource":"*"}]}`)
	crossAccount := iam.MustParsePolicy("KeyPolicy", `{"Version":"2012-10-17","Statement":[
		{"Sid":"Partner","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::222222222222:root"},"Action":"kms:Decrypt","Resource":"*"}]}`)
	identity := []iam.Policy{iam.MustParsePolicy("SendPolicy", `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["kms:Decrypt","kms:GenerateDataKey*"],"Resource":"`+key+`"}]}`)}
	cases := []struct {
		name     string
		req      iam.Request
		identity []iam.Policy
		keyPol   []iam.Policy
		allowed  bool
		reason   string
	}{
		{"an in-account identity allow without delegation is denied",
			iam.Request{Principal: sendRole, Action: "kms:Decrypt", Resource: key}, identity, []iam.Policy{withoutRoot}, false, "a KMS key's policy must allow the request too"},
		{"the root statement lets the identity policy allow",
			iam.Request{Principal: sendRole, Action: "kms:GenerateDataKey", Resource: key}, identity, []iam.Policy{withRoot}, true, "the key policy lets IAM policies decide (KeyPolicy statement 0 (EnableIAM))"},
		{"the root statement alone allows nothing",
			iam.Request{Principal: sendRole, Action: "kms:Decrypt", Resource: key}, nil, []iam.Policy{withRoot}, false, "names only the account"},
		{"delegation is per action",
			iam.Request{Principal: sendRole, Action: "kms:Decrypt", Resource: key}, identity, []iam.Policy{describeOnly}, false, "implicit deny"},
		{"a key policy naming the principal allows without an identity policy",
			iam.Request{Principal: auditor, Action: "kms:DescribeKey", Resource: key}, nil, []iam.Policy{withoutRoot}, true, "Auditor"},
		{"an assumed-role session is its role",
			iam.Request{Principal: "arn:aws:sts::111111111111:assumed-role/auditor/s", Action: "kms:DescribeKey", Resource: key}, nil, []iam.Policy{withoutRoot}, true, "Auditor"},
		{"the key policy's deny wins",
			iam.Request{Principal: sendRole, Action: "kms:Decrypt", Resource: key, Context: map[string]string{"aws:SecureTransport": "false"}}, identity, []iam.Policy{withRoot}, false, "explicit deny in KeyPolicy statement 4 (TLS)"},
		{"a key without a policy here allows nothing",
			iam.Request{Principal: sendRole, Action: "kms:Decrypt", Resource: key}, identity, nil, false, "this key has none here"},
		{"a service with the topic's encryption context",
			iam.Request{Principal: "events.amazonaws.com", Action: "kms:GenerateDataKey", Resource: key,
				Context: map[string]string{topicKey: topic, "aws:SourceAccount": acct}}, nil, []iam.Policy{withRoot}, true, "EventBridgeForTheTopic"},
		{"a service encrypting for another topic",
			iam.Request{Principal: "events.amazonaws.com", Action: "kms:GenerateDataKey", Resource: key,
				Context: map[string]string{topicKey: otherTopic, "aws:SourceAccount": acct}}, nil, []iam.Policy{withRoot}, false, "implicit deny"},
		{"a service without encryption context",
			iam.Request{Principal: "events.amazonaws.com", Action: "kms:GenerateDataKey", Resource: key,
				Context: map[string]string{"aws:SourceAccount": acct}}, nil, []iam.Policy{withRoot}, false, "implicit deny"},
		{"a service the key policy does not name, whatever the identity policies",
			iam.Request{Principal: "cloudwatch.amazonaws.com", Action: "kms:GenerateDataKey", Resource: key,
				Context: map[string]string{topicKey: topic, "aws:SourceAccount": acct}}, identity, []iam.Policy{withRoot}, false, "implicit deny"},
		{"kms:ViaService and the caller's account",
			iam.Request{Principal: apiRole, Action: "kms:Decrypt", Resource: key,
				Context: map[string]string{"kms:ViaService": "sns.eu-west-1.amazonaws.com", "kms:CallerAccount": acct, "aws:SourceArn": topic}}, nil, []iam.Policy{withoutRoot}, true, "ViaSNSOnly"},
		{"not via SNS",
			iam.Request{Principal: apiRole, Action: "kms:Decrypt", Resource: key,
				Context: map[string]string{"kms:ViaService": "s3.eu-west-1.amazonaws.com", "kms:CallerAccount": acct, "aws:SourceArn": topic}}, nil, []iam.Policy{withoutRoot}, false, ""},
		{"cross-account: the key policy names the account and the identity policy allows",
			iam.Request{Principal: "arn:aws:iam::222222222222:role/partner", Action: "kms:Decrypt", Resource: key},
			[]iam.Policy{iam.MustParsePolicy("PartnerPolicy", `{"Statement":[{"Effect":"Allow","Action":"kms:Decrypt","Resource":"*"}]}`)}, []iam.Policy{crossAccount}, true, "cross-account"},
		{"cross-account without the key policy",
			iam.Request{Principal: "arn:aws:iam::222222222222:role/partner", Action: "kms:Decrypt", Resource: key},
			[]iam.Policy{iam.MustParsePolicy("PartnerPolicy", `{"Statement":[{"Effect":"Allow","Action":"kms:Decrypt","Resource":"*"}]}`)}, []iam.Policy{withRoot}, false, "cross-account"},
		// Other resources keep the ordinary rule: an in-account identity Allow suffices.
		{"an SQS queue needs no resource policy",
			iam.Request{Principal: sendRole, Action: "sqs:SendMessage", Resource: queue},
			[]iam.Policy{iam.MustParsePolicy("P", `{"Statement":[{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}]}`)}, nil, true, "allowed by P"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := iam.Evaluate(c.req, c.identity, c.keyPol)
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("allowed=%v %q; want %v with %q", d.Allowed, d.Reason, c.allowed, c.reason)
			}
		})
	}
}

// TestDevTemplateKeys checks the KMS keys of the committed template's encrypted topics.
func TestDevTemplateKeys(t *testing.T) {
	s, r := devStack(t)
	alarms, feedback := r.Resources["AlarmTopicD01E77F9"].Ref, r.Resources["SesFeedbackTopicFBAAA249"].Ref
	alarmKey, ok := s.KeyOfTopic(alarms)
	if !ok || alarmKey != r.Resources["AlarmTopicKey57B0D3A7"].Attrs["Arn"] {
		t.Fatalf("KeyOfTopic(%s) = %q, %v", alarms, alarmKey, ok)
	}
	feedbackKey, ok := s.KeyOfTopic(feedback)
	if !ok || feedbackKey != r.Resources["SesFeedbackTopicKey73543160"].Attrs["Arn"] {
		t.Fatalf("KeyOfTopic(%s) = %q, %v", feedback, feedbackKey, ok)
	}
	if k, ok := s.KeyOfTopic("arn:aws:sns:eu-west-1:123456789012:not-a-topic"); ok {
		t.Fatalf("a topic outside the template has key %s", k)
	}
	cases := []struct {
		name    string
		req     iam.Request
		allowed bool
		reason  string
	}{
		// The keys name the topic they encrypt for by SNS's encryption context, the one condition
		// KMS sees from EventBridge: no aws:SourceAccount or aws:SourceArn reaches it.
		{"CloudWatch encrypts alarms", iam.Request{Principal: "cloudwatch.amazonaws.com", Action: "kms:GenerateDataKey", Resource: alarmKey,
			Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": alarms}}, true, "CloudwatchMayEncrypt"},
		{"EventBridge encrypts alarms", iam.Request{Principal: "events.amazonaws.com", Action: "kms:Decrypt", Resource: alarmKey,
			Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": alarms}}, true, "EventsMayEncrypt"},
		{"EventBridge may not encrypt for another topic", iam.Request{Principal: "events.amazonaws.com", Action: "kms:GenerateDataKey", Resource: alarmKey,
			Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": feedback}}, false, ""},
		{"EventBridge without the topic's context may not", iam.Request{Principal: "events.amazonaws.com", Action: "kms:GenerateDataKey", Resource: alarmKey,
			Context: map[string]string{"aws:SourceAccount": devAcct}}, false, ""},
		{"SES encrypts feedback", iam.Request{Principal: "ses.amazonaws.com", Action: "kms:GenerateDataKey", Resource: feedbackKey,
			Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": feedback}}, true, "SesMayEncrypt"},
		{"SES may not use the alarms key", iam.Request{Principal: "ses.amazonaws.com", Action: "kms:GenerateDataKey", Resource: alarmKey,
			Context: map[string]string{"kms:EncryptionContext:aws:sns:topicArn": alarms}}, false, ""},
		{"a role with no KMS grant may not, though the key policy enables IAM policies", iam.Request{Principal: role("fn-send"), Action: "kms:Decrypt", Resource: alarmKey},
			false, "names only the account"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := s.Evaluate(c.req)
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("allowed=%v %q; want %v with %q", d.Allowed, d.Reason, c.allowed, c.reason)
			}
		})
	}
}

// TestUnusedGrantsMultiValued: a grant conditioned on a multivalued key is used only by a call
// whose values satisfy it.
func TestUnusedGrantsMultiValued(t *testing.T) {
	identity := map[string][]iam.Policy{sendRole: {iam.MustParsePolicy("P", `{"Version":"2012-10-17","Statement":[
		{"Sid":"Exports","Effect":"Allow","Action":"dynamodb:PutItem","Resource":"`+table+`","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":"EXPORT#*"}}},
		{"Sid":"Own","Effect":"Allow","Action":"dynamodb:GetItem","Resource":"arn:aws:dynamodb:eu-west-1:111111111111:table/t-${aws:PrincipalAccount}"}]}`)}}
	put := func(keys ...string) iam.Request {
		return iam.Request{Principal: sendRole, Action: "dynamodb:PutItem", Resource: table, Multi: map[string][]string{"dynamodb:LeadingKeys": keys}}
	}
	get := iam.Request{Principal: sendRole, Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:eu-west-1:111111111111:table/t-111111111111"}
	count := func(calls ...iam.Request) int { return len(iam.UnusedGrants(identity, calls)) }
	if n := count(put("AUDIT#1"), get); n != 1 {
		t.Errorf("a put of AUDIT#1: %d unused, want 1 (Exports)", n)
	}
	if n := count(put("EXPORT#1")); n != 1 {
		t.Errorf("a put of EXPORT#1: %d unused, want 1 (Own)", n)
	}
}
