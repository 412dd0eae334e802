package iam

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"herald/internal/stackbox/cfn"
)

// Stack is the IAM of a CloudFormation template, resolved: each role's identity policies and
// each resource's policies.
type Stack struct {
	// Identity maps a role ARN to its policies: inline Policies, AWS::IAM::Policy and
	// AWS::IAM::ManagedPolicy resources attached to it, and AWS managed policies.
	Identity map[string][]Policy
	// Resource maps a resource ARN to its resource policies: AWS::SQS::QueuePolicy,
	// AWS::SNS::TopicPolicy, AWS::S3::BucketPolicy (under the bucket ARN), the KeyPolicy of
	// each AWS::KMS::Key (under the key ARN), and AWS::Lambda::Permission as one statement each.
	Resource map[string][]Policy
	// Trust maps a role ARN to its AssumeRolePolicyDocument.
	Trust map[string]Policy
	// Roles maps a role's logical id to its ARN.
	Roles map[string]string
	// TopicKeys maps the ARN of an AWS::SNS::Topic encrypted with a KMS key (KmsMasterKeyId)
	// to the key's ARN; see KeyOfTopic.
	TopicKeys map[string]string
}

// awsManaged are the AWS managed policies a CDK app attaches to Lambda roles, as AWS defines
// them. A template attaching another one fails FromTemplate, naming it.
var awsManaged = map[string]string{
	"service-role/AWSLambdaBasicExecutionRole": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
		"Action":["logs:CreateLogGroup","logs:CreateLogStream","logs:PutLogEvents"],"Resource":"*"}]}`,
	"service-role/AWSLambdaSQSQueueExecutionRole": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
		"Action":["sqs:ReceiveMessage","sqs:DeleteMessage","sqs:GetQueueAttributes","logs:CreateLogGroup","logs:CreateLogStream","logs:PutLogEvents"],"Resource":"*"}]}`,
	"service-role/AWSLambdaDynamoDBExecutionRole": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
		"Action":["dynamodb:DescribeStream","dynamodb:GetRecords","dynamodb:GetShardIterator","dynamodb:ListStreams","logs:CreateLogGroup","logs:CreateLogStream","logs:PutLogEvents"],"Resource":"*"}]}`,
	"AWSXRayDaemonWriteAccess": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
		"Action":["xray:PutTraceSegments","xray:PutTelemetryRecords","xray:GetSamplingRules","xray:GetSamplingTargets","xray:GetSamplingStatisticSummaries"],"Resource":["*"]}]}`,
}

// AWSManagedPolicy returns an AWS managed policy this package knows, by ARN.
func AWSManagedPolicy(arn string) (Policy, bool) {
	_, name, ok := strings.Cut(arn, ":iam::aws:policy/")
	if !ok {
		return Policy{}, false
	}
	doc, ok := awsManaged[name]
	if !ok {
		return Policy{}, false
	}
	return MustParsePolicy(arn, doc), true
}

// FromTemplate reads the IAM of a template, resolving intrinsics with r (cfn.NewResolver).
func FromTemplate(t *cfn.Template, r *cfn.Resolver) (*Stack, error) {
	s := &Stack{Identity: map[string][]Policy{}, Resource: map[string][]Policy{}, Trust: map[string]Policy{}, Roles: map[string]string{},
		TopicKeys: map[string]string{}}
	roleByName := map[string]string{}
	for _, id := range t.LogicalIDs("AWS::IAM::Role") {
		a := r.Resources[id]
		arn := a.Attrs["Arn"]
		s.Roles[id], roleByName[a.Ref] = arn, arn
		s.Identity[arn] = nil
	}
	doc := func(id, field string, v any) (Policy, error) {
		b, err := r.ResolveJSON(v)
		if err != nil {
			return Policy{}, fmt.Errorf("%s %s: %w", id, field, err)
		}
		return ParsePolicy(id, b)
	}
	resolveList := func(id, field string, v any) ([]string, error) {
		if v == nil {
			return nil, nil
		}
		rv, err := r.Resolve(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", id, field, err)
		}
		var out []string
		switch c := rv.(type) {
		case string:
			out = []string{c}
		case []any:
			for _, item := range c {
				str, ok := item.(string)
				if !ok {
					return nil, fmt.Errorf("%s %s: %v is not a string", id, field, item)
				}
				out = append(out, str)
			}
		default:
			return nil, fmt.Errorf("%s %s: %v is not a list", id, field, rv)
		}
		return out, nil
	}
	attach := func(id string, p Policy, roles []string) error {
		for _, name := range roles {
			arn, ok := roleByName[name]
			if !ok {
				return fmt.Errorf("%s: role %q is not a role of the template", id, name)
			}
			s.Identity[arn] = append(s.Identity[arn], p)
		}
		return nil
	}
	customer := map[string]Policy{} // customer managed policy ARN → policy
	for _, id := range t.LogicalIDs("AWS::IAM::ManagedPolicy") {
		res := t.Resources[id]
		p, err := doc(id, "PolicyDocument", res.Properties["PolicyDocument"])
		if err != nil {
			return nil, err
		}
		customer[r.Resources[id].Ref] = p
		roles, err := resolveList(id, "Roles", res.Properties["Roles"])
		if err != nil {
			return nil, err
		}
		if err := attach(id, p, roles); err != nil {
			return nil, err
		}
		if err := noUsersOrGroups(id, res); err != nil {
			return nil, err
		}
	}
	for _, id := range t.LogicalIDs("AWS::IAM::Role") {
		res := t.Resources[id]
		arn := s.Roles[id]
		if v := res.Properties["AssumeRolePolicyDocument"]; v != nil {
			p, err := doc(id, "AssumeRolePolicyDocument", v)
			if err != nil {
				return nil, err
			}
			s.Trust[arn] = p
		}
		if list, ok := res.Properties["Policies"].([]any); ok {
			for i, item := range list {
				m, _ := item.(map[string]any)
				name, _ := m["PolicyName"].(string)
				p, err := doc(fmt.Sprintf("%s/%s", id, name), fmt.Sprintf("Policies[%d]", i), m["PolicyDocument"])
				if err != nil {
					return nil, err
				}
				s.Identity[arn] = append(s.Identity[arn], p)
			}
		}
		managed, err := resolveList(id, "ManagedPolicyArns", res.Properties["ManagedPolicyArns"])
		if err != nil {
			return nil, err
		}
		for _, m := range managed {
			if p, ok := customer[m]; ok {
				s.Identity[arn] = append(s.Identity[arn], p)
				continue
			}
			p, ok := AWSManagedPolicy(m)
			if !ok {
				return nil, fmt.Errorf("%s: managed policy %s is not known here (add its document to awsManaged)", id, m)
			}
			s.Identity[arn] = append(s.Identity[arn], p)
		}
		if _, ok := res.Properties["PermissionsBoundary"]; ok {
			return nil, fmt.Errorf("%s: PermissionsBoundary is not supported", id)
		}
	}
	for _, id := range t.LogicalIDs("AWS::IAM::Policy") {
		res := t.Resources[id]
		p, err := doc(id, "PolicyDocument", res.Properties["PolicyDocument"])
		if err != nil {
			return nil, err
		}
		roles, err := resolveList(id, "Roles", res.Properties["Roles"])
		if err != nil {
			return nil, err
		}
		if err := attach(id, p, roles); err != nil {
			return nil, err
		}
		if err := noUsersOrGroups(id, res); err != nil {
			return nil, err
		}
	}
	if err := s.resourcePolicies(t, r, doc, resolveList); err != nil {
		return nil, err
	}
	if err := s.topicKeys(t, r); err != nil {
		return nil, err
	}
	return s, nil
}

// topicKeys finds the KMS key of each encrypted topic. KmsMasterKeyId names the key by ARN or
// id (Fn::GetAtt Arn or Ref of an AWS::KMS::Key), or by alias (its name or ARN, often the Ref
// of an AWS::KMS::Alias, whose TargetKeyId names the key). A key outside the template named by
// ARN is kept as named; an alias outside the template, such as the AWS managed alias/aws/sns,
// is left out: the template does not hold its policy.
func (s *Stack) topicKeys(t *cfn.Template, r *cfn.Resolver) error {
	keys := map[string]string{} // key ARN, key id, alias name, alias ARN → key ARN
	for _, id := range t.LogicalIDs("AWS::KMS::Key") {
		a := r.Resources[id]
		keys[a.Attrs["Arn"]], keys[a.Ref] = a.Attrs["Arn"], a.Attrs["Arn"]
	}
	for _, id := range t.LogicalIDs("AWS::KMS::Alias") {
		target, err := r.ResolveString(t.Resources[id].Properties["TargetKeyId"])
		if err != nil {
			return fmt.Errorf("%s TargetKeyId: %w", id, err)
		}
		if arn, ok := keys[target]; ok {
			a := r.Resources[id]
			keys[a.Ref], keys[a.Attrs["Arn"]] = arn, arn
		}
	}
	for _, id := range t.LogicalIDs("AWS::SNS::Topic") {
		v, ok := t.Resources[id].Properties["KmsMasterKeyId"]
		if !ok {
			continue
		}
		named, err := r.ResolveString(v)
		if err != nil {
			return fmt.Errorf("%s KmsMasterKeyId: %w", id, err)
		}
		topic := r.Resources[id].Ref
		switch arn, ok := keys[named]; {
		case ok:
			s.TopicKeys[topic] = arn
		case isKMS(named) && strings.Contains(named, ":key/"):
			s.TopicKeys[topic] = named
		}
	}
	return nil
}

// KeyOfTopic returns the ARN of the KMS key that encrypts an SNS topic of the template (its
// KmsMasterKeyId). ok is false for an unencrypted topic, a topic outside the template, or one
// encrypted with an alias the template does not define (the AWS managed alias/aws/sns).
func (s *Stack) KeyOfTopic(topicArn string) (keyArn string, ok bool) {
	keyArn, ok = s.TopicKeys[topicArn]
	return keyArn, ok
}

func noUsersOrGroups(id string, res cfn.Resource) error {
	for _, k := range []string{"Users", "Groups"} {
		if v, ok := res.Properties[k].([]any); ok && len(v) > 0 {
			return fmt.Errorf("%s: policies attached to %s are not supported", id, k)
		}
	}
	return nil
}

func (s *Stack) resourcePolicies(t *cfn.Template, r *cfn.Resolver,
	doc func(id, field string, v any) (Policy, error),
	resolveList func(id, field string, v any) ([]string, error)) error {
	queueArn := map[string]string{} // queue URL → ARN
	for _, id := range t.LogicalIDs("AWS::SQS::Queue") {
		queueArn[r.Resources[id].Ref] = r.Resources[id].Attrs["Arn"]
	}
	for _, id := range t.LogicalIDs("AWS::SQS::QueuePolicy") {
		res := t.Resources[id]
		p, err := doc(id, "PolicyDocument", res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		urls, err := resolveList(id, "Queues", res.Properties["Queues"])
		if err != nil {
			return err
		}
		for _, u := range urls {
			arn, ok := queueArn[u]
			if !ok {
				return fmt.Errorf("%s: queue %s is not a queue of the template", id, u)
			}
			s.Resource[arn] = append(s.Resource[arn], p)
		}
	}
	for _, id := range t.LogicalIDs("AWS::SNS::TopicPolicy") {
		res := t.Resources[id]
		p, err := doc(id, "PolicyDocument", res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		topics, err := resolveList(id, "Topics", res.Properties["Topics"])
		if err != nil {
			return err
		}
		for _, arn := range topics {
			s.Resource[arn] = append(s.Resource[arn], p)
		}
	}
	for _, id := range t.LogicalIDs("AWS::S3::BucketPolicy") {
		res := t.Resources[id]
		p, err := doc(id, "PolicyDocument", res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		bucket, err := r.ResolveString(res.Properties["Bucket"])
		if err != nil {
			return fmt.Errorf("%s Bucket: %w", id, err)
		}
		arn := "arn:" + r.Partition + ":s3:::" + bucket
		if r.Partition == "" {
			arn = "arn:aws:s3:::" + bucket
		}
		s.Resource[arn] = append(s.Resource[arn], p)
	}
	for _, id := range t.LogicalIDs("AWS::KMS::Key") {
		res := t.Resources[id]
		if res.Properties["KeyPolicy"] == nil {
			continue
		}
		p, err := doc(id, "KeyPolicy", res.Properties["KeyPolicy"])
		if err != nil {
			return err
		}
		arn := r.Resources[id].Attrs["Arn"]
		s.Resource[arn] = append(s.Resource[arn], p)
	}
	fnArn := map[string]string{} // function name or ARN → ARN
	for _, id := range t.LogicalIDs("AWS::Lambda::Function") {
		a := r.Resources[id]
		fnArn[a.Ref], fnArn[a.Attrs["Arn"]] = a.Attrs["Arn"], a.Attrs["Arn"]
	}
	for _, id := range t.LogicalIDs("AWS::Lambda::Permission") {
		p, arn, err := lambdaPermission(id, t.Resources[id], r, fnArn)
		if err != nil {
			return err
		}
		s.Resource[arn] = append(s.Resource[arn], p)
	}
	for _, typ := range []string{"AWS::Events::EventBusPolicy", "AWS::SecretsManager::ResourcePolicy", "AWS::Lambda::LayerVersionPermission"} {
		if ids := t.LogicalIDs(typ); len(ids) > 0 {
			return fmt.Errorf("%s (%s) is not supported", typ, strings.Join(ids, ", "))
		}
	}
	return nil
}

// lambdaPermission turns an AWS::Lambda::Permission into the statement Lambda adds to the
// function's resource policy.
func lambdaPermission(id string, res cfn.Resource, r *cfn.Resolver, fnArn map[string]string) (Policy, string, error) {
	str := func(k string) (string, error) {
		v, ok := res.Properties[k]
		if !ok {
			return "", nil
		}
		s, err := r.ResolveString(v)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", id, k, err)
		}
		return s, nil
	}
	fields := map[string]string{}
	for _, k := range []string{"FunctionName", "Action", "Principal", "SourceArn", "SourceAccount", "PrincipalOrgID", "FunctionUrlAuthType", "EventSourceToken"} {
		v, err := str(k)
		if err != nil {
			return Policy{}, "", err
		}
		fields[k] = v
	}
	for _, k := range []string{"PrincipalOrgID", "FunctionUrlAuthType", "EventSourceToken"} {
		if fields[k] != "" {
			return Policy{}, "", fmt.Errorf("%s: %s is not supported", id, k)
		}
	}
	fn := fields["FunctionName"]
	arn, ok := fnArn[fn]
	if !ok {
		// A qualified ARN (alias or version) or a function outside the template: as written.
		arn = fn
	}
	principal := map[string]any{}
	switch p := fields["Principal"]; {
	case p == "*":
		principal = nil
	case strings.HasSuffix(p, ".amazonaws.com"):
		principal["Service"] = p
	default:
		principal["AWS"] = p
	}
	st := map[string]any{"Sid": id, "Effect": "Allow", "Action": fields["Action"], "Resource": arn}
	if principal == nil {
		st["Principal"] = "*"
	} else {
		st["Principal"] = principal
	}
	cond := map[string]any{}
	if v := fields["SourceArn"]; v != "" {
		cond["ArnLike"] = map[string]any{"AWS:SourceArn": v}
	}
	if v := fields["SourceAccount"]; v != "" {
		cond["StringEquals"] = map[string]any{"AWS:SourceAccount": v}
	}
	if len(cond) > 0 {
		st["Condition"] = cond
	}
	b, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{st}})
	if err != nil {
		return Policy{}, "", err
	}
	p, err := ParsePolicy(id, b)
	return p, arn, err
}

// IdentityPolicies returns the principal's identity policies: a role ARN's, or an assumed-role
// session's role (matched by role name).
func (s *Stack) IdentityPolicies(principal string) []Policy {
	if p, ok := s.Identity[principal]; ok {
		return p
	}
	who := parsePrincipal(principal)
	if who.roleName == "" {
		return nil
	}
	for _, arn := range sortedKeys(s.Identity) {
		if parsePrincipal(arn).roleName == who.roleName && arnAccount(arn) == who.account {
			return s.Identity[arn]
		}
	}
	return nil
}

// ResourcePolicies returns the policies that apply to a resource ARN: its own, an S3 object's
// bucket's, a qualified Lambda function's function's.
func (s *Stack) ResourcePolicies(resource string) []Policy {
	var out []Policy
	seen := map[string]bool{}
	add := func(arn string) {
		if !seen[arn] {
			seen[arn] = true
			out = append(out, s.Resource[arn]...)
		}
	}
	add(resource)
	parts := strings.SplitN(resource, ":", 7)
	switch {
	case len(parts) >= 6 && parts[2] == "s3":
		if bucket, _, ok := strings.Cut(parts[5], "/"); ok {
			add(strings.Join(parts[:5], ":") + ":" + bucket)
		}
	case len(parts) == 7 && parts[2] == "lambda" && parts[5] == "function":
		add(strings.Join(parts[:6], ":"))
	}
	return out
}

// Evaluate decides a request with the stack's policies.
func (s *Stack) Evaluate(req Request) Decision {
	return Evaluate(req, s.IdentityPolicies(req.Principal), s.ResourcePolicies(req.Resource))
}

// UnusedGrants lists the identity grants of the stack's roles that no call used.
func (s *Stack) UnusedGrants(calls []Request) []Unused {
	identity := map[string][]Policy{}
	for arn, p := range s.Identity {
		identity[arn] = p
	}
	// Calls made by sessions count for their role.
	norm := make([]Request, len(calls))
	for i, c := range calls {
		norm[i] = c
		who := parsePrincipal(c.Principal)
		if _, ok := identity[c.Principal]; !ok && who.roleName != "" {
			for arn := range identity {
				if parsePrincipal(arn).roleName == who.roleName && arnAccount(arn) == who.account {
					norm[i].Principal = arn
				}
			}
		}
	}
	return UnusedGrants(identity, norm)
}

// RoleARNs returns the stack's role ARNs, sorted.
func (s *Stack) RoleARNs() []string {
	out := make([]string, 0, len(s.Roles))
	for _, arn := range s.Roles {
		out = append(out, arn)
	}
	sort.Strings(out)
	return out
}

// AssumeRole decides whether principal (a service such as "lambda.amazonaws.com", or a role)
// may assume the role, by the role's trust policy; ctx holds condition keys
// (aws:SourceAccount, aws:SourceArn).
func (s *Stack) AssumeRole(roleARN, principal string, ctx map[string]string) Decision {
	trust, ok := s.Trust[roleARN]
	req := Request{Principal: principal, Action: "sts:AssumeRole", Resource: roleARN, Context: ctx}
	if !ok {
		return Decision{Reason: fmt.Sprintf("%s has no trust policy in the template", roleARN)}
	}
	// A trust policy's statements name no Resource: they apply to the role itself.
	return Evaluate(req, nil, []Policy{trust})
}
