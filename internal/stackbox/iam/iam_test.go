package iam_test

import (
	"strings"
	"testing"

	"herald/internal/stackbox/iam"
)

const (
	acct     = "111111111111"
	other    = "222222222222"
	sendRole = "arn:aws:iam::111111111111:role/herald-dev-send"
	apiRole  = "arn:aws:iam::111111111111:role/herald-dev-api"
	queue    = "arn:aws:sqs:eu-west-1:111111111111:herald-dev-ingest-billing"
	table    = "arn:aws:dynamodb:eu-west-1:111111111111:table/herald-dev-deliveries"
)

func TestEvaluateIdentity(t *testing.T) {
	id := []iam.Policy{iam.MustParsePolicy("SendPolicy", `{"Version":"2012-10-17","Statement":[
		{"Sid":"Tables","Effect":"Allow","Action":["dynamodb:Get*","dynamodb:UpdateItem"],"Resource":["`+table+`","`+table+`/index/*"]},
		{"Effect":"Allow","Action":"sqs:*","Resource":"arn:aws:sqs:eu-west-1:111111111111:herald-dev-send-?"},
		{"Effect":"Allow","NotAction":["iam:*","sts:*"],"Resource":"arn:aws:s3:::bucket/*"},
		{"Effect":"Allow","Action":"events:PutEvents","NotResource":"arn:aws:events:eu-west-1:111111111111:event-bus/default"},
		{"Effect":"Deny","Action":"dynamodb:GetItem","Resource":"`+table+`","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`)}
	cases := []struct {
		action, resource string
		ctx              map[string]string
		allowed          bool
		reason           string
	}{
		{"dynamodb:UpdateItem", table, nil, true, "SendPolicy statement 0 (Tables)"},
		{"DynamoDB:getitem", table, nil, true, "Tables"}, // actions ignore case
		{"dynamodb:GetItem", table, map[string]string{"aws:SecureTransport": "false"}, false, "explicit deny"},
		{"dynamodb:Query", table + "/index/by-user", nil, false, "implicit deny"},
		{"dynamodb:GetItem", table + "/index/by-user", nil, true, ""},
		{"dynamodb:PutItem", table, nil, false, "implicit deny"},
		{"dynamodb:UpdateItem", strings.ToUpper(table), nil, false, ""}, // resources are case-sensitive
		{"sqs:SendMessage", "arn:aws:sqs:eu-west-1:111111111111:herald-dev-send-r", nil, true, ""},
		{"sqs:SendMessage", "arn:aws:sqs:eu-west-1:111111111111:herald-dev-send-rt", nil, false, ""}, // ? is one character
		{"s3:GetObject", "arn:aws:s3:::bucket/k", nil, true, ""},
		{"iam:PassRole", "arn:aws:s3:::bucket/k", nil, false, ""}, // NotAction
		{"events:PutEvents", "arn:aws:events:eu-west-1:111111111111:event-bus/herald", nil, true, ""},
		{"events:PutEvents", "arn:aws:events:eu-west-1:111111111111:event-bus/default", nil, false, ""}, // NotResource
	}
	for _, c := range cases {
		t.Run(c.action+" "+c.resource, func(t *testing.T) {
			d := iam.Evaluate(iam.Request{Principal: sendRole, Action: c.action, Resource: c.resource, Context: c.ctx}, id, nil)
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("allowed=%v %q; want %v with %q", d.Allowed, d.Reason, c.allowed, c.reason)
			}
		})
	}
}

func TestEvaluateResourcePolicies(t *testing.T) {
	queuePolicy := iam.MustParsePolicy("IngestQueuePolicy", `{"Version":"2012-10-17","Statement":[
		{"Sid":"Producer","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111111111111:role/billing-producer"},"Action":"sqs:SendMessage","Resource":"`+queue+`"},
		{"Sid":"Scheduler","Effect":"Allow","Principal":{"Service":"scheduler.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"`+queue+`",
		 "Condition":{"ArnLike":{"aws:SourceArn":"arn:aws:scheduler:eu-west-1:111111111111:schedule/herald-dev/*"},"StringEquals":{"aws:SourceAccount":"111111111111"}}},
		{"Sid":"Partner","Effect":"Allow","Principal":{"AWS":"222222222222"},"Action":"sqs:SendMessage","Resource":"`+queue+`"},
		{"Sid":"Account","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111111111111:root"},"Action":"sqs:GetQueueAttributes","Resource":"`+queue+`"},
		{"Sid":"OnlyListed","Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"`+queue+`",
		 "Condition":{"ArnNotLike":{"aws:PrincipalArn":["arn:aws:iam::111111111111:role/billing-producer","arn:aws:iam::222222222222:role/*"]},
		              "StringNotEquals":{"aws:PrincipalServiceName":"scheduler.amazonaws.com"}}},
		{"Sid":"TLS","Effect":"Deny","Principal":{"AWS":"*"},"Action":"sqs:*","Resource":"`+queue+`","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`)
	producerIdentity := []iam.Policy{iam.MustParsePolicy("ProducerPolicy", `{"Statement":[{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}]}`)}
	cases := []struct {
		name     string
		req      iam.Request
		identity []iam.Policy
		allowed  bool
		reason   string
	}{
		{"listed producer, no identity policy needed in the same account",
			iam.Request{Principal: "arn:aws:iam::111111111111:role/billing-producer", Action: "sqs:SendMessage", Resource: queue}, nil, true, "Producer"},
		{"listed producer as an assumed-role session",
			iam.Request{Principal: "arn:aws:sts::111111111111:assumed-role/billing-producer/i-123", Action: "sqs:SendMessage", Resource: queue}, nil, true, "Producer"},
		{"unlisted role with an identity allow is denied by the queue policy",
			iam.Request{Principal: sendRole, Action: "sqs:SendMessage", Resource: queue}, producerIdentity, false, "explicit deny in IngestQueuePolicy statement 4 (OnlyListed)"},
		{"scheduler with the right source",
			iam.Request{Principal: "scheduler.amazonaws.com", Action: "sqs:SendMessage", Resource: queue,
				Context: map[string]string{"aws:SourceArn": "arn:aws:scheduler:eu-west-1:111111111111:schedule/herald-dev/n-1", "aws:SourceAccount": acct}}, nil, true, "Scheduler"},
		{"scheduler from another schedule group",
			iam.Request{Principal: "scheduler.amazonaws.com", Action: "sqs:SendMessage", Resource: queue,
				Context: map[string]string{"aws:SourceArn": "arn:aws:scheduler:eu-west-1:111111111111:schedule/other/n-1", "aws:SourceAccount": acct}}, nil, false, "implicit deny"},
		{"scheduler without source keys",
			iam.Request{Principal: "scheduler.amazonaws.com", Action: "sqs:SendMessage", Resource: queue}, nil, false, "implicit deny"},
		{"a service's identity policies are ignored",
			iam.Request{Principal: "sns.amazonaws.com", Action: "sqs:SendMessage", Resource: queue}, producerIdentity, false, ""},
		{"cross-account needs the identity allow too",
			iam.Request{Principal: "arn:aws:iam::222222222222:role/partner", Action: "sqs:SendMessage", Resource: queue}, nil, false, "cross-account"},
		{"cross-account with both",
			iam.Request{Principal: "arn:aws:iam::222222222222:role/partner", Action: "sqs:SendMessage", Resource: queue}, producerIdentity, true, "cross-account"},
		{"account root delegates to identity policies: none",
			iam.Request{Principal: apiRole, Action: "sqs:GetQueueAttributes", Resource: queue}, nil, false, "names only the account"},
		{"account root delegates to identity policies: allowed",
			iam.Request{Principal: apiRole, Action: "sqs:GetQueueAttributes", Resource: queue},
			[]iam.Policy{iam.MustParsePolicy("ApiPolicy", `{"Statement":[{"Effect":"Allow","Action":"sqs:Get*","Resource":"`+queue+`"}]}`)}, true, "ApiPolicy"},
		{"TLS deny",
			iam.Request{Principal: "arn:aws:iam::111111111111:role/billing-producer", Action: "sqs:SendMessage", Resource: queue,
				Context: map[string]string{"aws:securetransport": "false"}}, nil, false, "TLS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := iam.Evaluate(c.req, c.identity, []iam.Policy{queuePolicy})
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("allowed=%v %q; want %v with %q", d.Allowed, d.Reason, c.allowed, c.reason)
			}
		})
	}
}

func TestConditionOperators(t *testing.T) {
	ctx := map[string]string{"k": "Value-1", "arn": "arn:aws:sns:eu-west-1:111111111111:topic", "n": "5", "b": "true"}
	cases := []struct {
		cond string
		want bool
	}{
		{`{"StringEquals":{"k":"Value-1"}}`, true},
		{`{"StringEquals":{"k":["x","Value-1"]}}`, true},
		{`{"StringEquals":{"k":"value-1"}}`, false},
		{`{"StringEqualsIgnoreCase":{"k":"value-1"}}`, true},
		{`{"StringNotEquals":{"k":"Value-1"}}`, false},
		{`{"StringNotEquals":{"k":["a","b"]}}`, true},
		{`{"StringNotEqualsIgnoreCase":{"k":"VALUE-1"}}`, false},
		{`{"StringLike":{"k":"Val*-?"}}`, true},
		{`{"StringNotLike":{"k":"x*"}}`, true},
		{`{"ArnEquals":{"arn":"arn:aws:sns:eu-west-1:111111111111:topic"}}`, true},
		{`{"ArnLike":{"arn":"arn:aws:sns:*:111111111111:*"}}`, true},
		{`{"ArnLike":{"arn":"arn:aws:sqs:*:111111111111:*"}}`, false},
		{`{"ArnNotEquals":{"arn":"arn:aws:sns:eu-west-1:111111111111:other"}}`, true},
		{`{"ArnNotLike":{"arn":"arn:aws:sns:*"}}`, false},
		{`{"NumericLessThan":{"n":"6"}}`, true},
		{`{"NumericGreaterThanEquals":{"n":5}}`, true},
		{`{"NumericEquals":{"n":"4"}}`, false},
		{`{"Bool":{"b":"true"}}`, true},
		{`{"Bool":{"b":true}}`, true},
		{`{"Bool":{"b":"false"}}`, false},
		{`{"Null":{"missing":"true"}}`, true},
		{`{"Null":{"k":"true"}}`, false},
		{`{"Null":{"k":"false"}}`, true},
		{`{"StringEquals":{"missing":"x"}}`, false},
		{`{"StringNotEquals":{"missing":"x"}}`, true}, // a negated operator holds when the key is absent
		{`{"StringEqualsIfExists":{"missing":"x"}}`, true},
		{`{"StringEqualsIfExists":{"k":"x"}}`, false},
		{`{"ArnLikeIfExists":{"arn":"arn:aws:sns:*:*:topic"}}`, true},
		{`{"ForAnyValue:StringLike":{"k":["nope","Val*"]}}`, true},
		{`{"ForAnyValue:StringEquals":{"missing":"x"}}`, false},
		{`{"ForAllValues:StringEquals":{"missing":"x"}}`, true},
		{`{"ForAllValues:StringEquals":{"k":["Value-1","x"]}}`, true},
		{`{"StringEquals":{"K":"Value-1"}}`, true},                       // keys ignore case
		{`{"StringEquals":{"k":"Value-1"},"Bool":{"b":"false"}}`, false}, // every condition must hold
	}
	for _, c := range cases {
		t.Run(c.cond, func(t *testing.T) {
			p := iam.MustParsePolicy("P", `{"Statement":[{"Effect":"Allow","Action":"s:A","Resource":"*","Condition":`+c.cond+`}]}`)
			d := iam.Evaluate(iam.Request{Principal: sendRole, Action: "s:A", Resource: "arn:aws:s:eu-west-1:111111111111:r", Context: ctx}, []iam.Policy{p}, nil)
			if d.Allowed != c.want {
				t.Fatalf("allowed=%v, want %v (%s)", d.Allowed, c.want, d.Reason)
			}
		})
	}
}

func TestPrincipalContextDefaults(t *testing.T) {
	p := iam.MustParsePolicy("P", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage","Resource":"*",
		"Condition":{"StringEquals":{"aws:PrincipalAccount":"111111111111"},"ArnLike":{"aws:PrincipalArn":"arn:aws:iam::111111111111:role/herald-*"}}}]}`)
	for principal, want := range map[string]bool{
		sendRole: true,
		"arn:aws:sts::111111111111:assumed-role/herald-dev-send/fn": true, // the session is matched as its role
		"arn:aws:iam::111111111111:role/other":                      false,
		"arn:aws:iam::222222222222:role/herald-dev-send":            false,
	} {
		d := iam.Evaluate(iam.Request{Principal: principal, Action: "sqs:SendMessage", Resource: queue}, nil, []iam.Policy{p})
		if d.Allowed != want {
			t.Errorf("%s: allowed=%v, want %v (%s)", principal, d.Allowed, want, d.Reason)
		}
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for doc, want := range map[string]string{
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"1.2.3.4/32"}}}]}`:           `"IpAddress" is not supported`,
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{"NullIfExists":{"k":"true"}}}]}`:                         `"NullIfExists"`,
		`{"Statement":[{"Effect":"Maybe","Action":"a:b","Resource":"*"}]}`:                                                                   `"Maybe" is not Allow or Deny`,
		`{"Statement":[{"Effect":"Allow","Resource":"*"}]}`:                                                                                  `Action and NotAction`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"a:b","Resource":"arn:aws:sqs:${aws:RequestedRegion}:1:q"}]}`:       `policy variables may stand only in the resource part`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"a:b","Resource":"arn:aws:s3:::b/${aws:username"}]}`:                `no closing brace`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{"StringLike":{"k":"${k, x}"}}}]}`: `single quotes`,
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"arn:aws:*:eu-west-1:1:q"}]}`:                                             `wildcard in the service segment`,
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Principal":{"CanonicalUser":"x"}}]}`:                                 `"CanonicalUser"`,
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Extra":1}]}`:                                                         `element "Extra"`,
	} {
		if _, err := iam.ParsePolicy("P", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %s", doc, err, want)
		}
	}
	// A single statement object (not a list) is valid policy syntax.
	p, err := iam.ParsePolicy("P", []byte(`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"a:b","Resource":"*"}}`))
	if err != nil || len(p.Statements) != 1 {
		t.Fatalf("single statement: %v %+v", err, p)
	}
}

func TestUnusedGrants(t *testing.T) {
	identity := map[string][]iam.Policy{
		sendRole: {iam.MustParsePolicy("SendPolicy", `{"Statement":[
			{"Sid":"Tables","Effect":"Allow","Action":["dynamodb:GetItem","dynamodb:UpdateItem","dynamodb:Query"],"Resource":"`+table+`"},
			{"Sid":"Queues","Effect":"Allow","Action":"sqs:SendMessage","Resource":"arn:aws:sqs:eu-west-1:111111111111:herald-dev-record-*"},
			{"Effect":"Deny","Action":"*","Resource":"arn:aws:s3:::secret/*"}]}`)},
		apiRole: {iam.MustParsePolicy("ApiPolicy", `{"Statement":[{"Effect":"Allow","NotAction":"iam:*","Resource":"*"}]}`)},
	}
	calls := []iam.Request{
		{Principal: sendRole, Action: "dynamodb:UpdateItem", Resource: table},
		{Principal: sendRole, Action: "dynamodb:GetItem", Resource: table},
		{Principal: sendRole, Action: "sqs:SendMessage", Resource: queue}, // not matched by Queues: wrong queue
		{Principal: "arn:aws:iam::111111111111:role/unknown", Action: "dynamodb:Query", Resource: table},
	}
	var got []string
	for _, u := range iam.UnusedGrants(identity, calls) {
		got = append(got, u.String())
	}
	want := []string{
		"arn:aws:iam::111111111111:role/herald-dev-api: any action on * is never used (ApiPolicy statement 0)",
		"arn:aws:iam::111111111111:role/herald-dev-send: dynamodb:Query on " + table + " is never used (SendPolicy statement 0 (Tables))",
		"arn:aws:iam::111111111111:role/herald-dev-send: sqs:SendMessage on arn:aws:sqs:eu-west-1:111111111111:herald-dev-record-* is never used (SendPolicy statement 1 (Queues))",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("unused:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
