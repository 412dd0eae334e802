package cfn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Env is the account and region a template is resolved for.
type Env struct {
	Partition string // default "aws"
	Region    string
	AccountID string
	StackName string
}

// NewResolver returns a resolver for the template in env, with every resource's Ref and
// attributes made up by FakeAttrs and each parameter at its default.
func NewResolver(t *Template, env Env) (*Resolver, error) {
	if env.Partition == "" {
		env.Partition = "aws"
	}
	r := &Resolver{
		Partition: env.Partition, Region: env.Region, AccountID: env.AccountID, StackName: env.StackName,
		StackID:    fmt.Sprintf("arn:%s:cloudformation:%s:%s:stack/%s/%s", env.Partition, env.Region, env.AccountID, env.StackName, fakeUUID(env.StackName)),
		URLSuffix:  "amazonaws.com",
		Resources:  map[string]Attrs{},
		Parameters: map[string]string{},
		Conditions: map[string]bool{},
	}
	for name, p := range t.Parameters {
		if p.Default != nil {
			s, err := scalar(p.Default)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: default: %w", name, err)
			}
			r.Parameters[name] = s
		}
	}
	if len(t.Conditions) > 0 {
		return nil, fmt.Errorf("template conditions are not supported (%s)", strings.Join(sortedKeys(t.Conditions), ", "))
	}
	if err := r.fakeAttrs(t); err != nil {
		return nil, err
	}
	return r, nil
}

// nameProps is, per resource type, the property holding the resource's physical name.
var nameProps = map[string]string{
	"AWS::Lambda::Function":                   "FunctionName",
	"AWS::SQS::Queue":                         "QueueName",
	"AWS::DynamoDB::Table":                    "TableName",
	"AWS::DynamoDB::GlobalTable":              "TableName",
	"AWS::IAM::Role":                          "RoleName",
	"AWS::IAM::Policy":                        "PolicyName",
	"AWS::IAM::ManagedPolicy":                 "ManagedPolicyName",
	"AWS::SNS::Topic":                         "TopicName",
	"AWS::S3::Bucket":                         "BucketName",
	"AWS::StepFunctions::StateMachine":        "StateMachineName",
	"AWS::Logs::LogGroup":                     "LogGroupName",
	"AWS::Events::EventBus":                   "Name",
	"AWS::Events::Rule":                       "Name",
	"AWS::Scheduler::ScheduleGroup":           "Name",
	"AWS::SES::ConfigurationSet":              "Name",
	"AWS::CloudWatch::Alarm":                  "AlarmName",
	"AWS::CloudWatch::Dashboard":              "DashboardName",
	"AWS::SecretsManager::Secret":             "Name",
	"AWS::SSM::Parameter":                     "Name",
	"AWS::Lambda::LayerVersion":               "LayerName",
	"AWS::ApiGatewayV2::Api":                  "Name",
	"AWS::Chatbot::SlackChannelConfiguration": "ConfigurationName",
	"AWS::KMS::Alias":                         "AliasName",
}

// fakeAttrs makes up each resource's Ref and attributes as AWS shapes them, from its physical
// name property when it has one (resolved, so a name built with Fn::Join works once what it
// refers to is known) or from the stack name and logical id.
func (r *Resolver) fakeAttrs(t *Template) error {
	pending := t.LogicalIDs("")
	for len(pending) > 0 {
		var next []string
		var lastErr error
		for _, id := range pending {
			res := t.Resources[id]
			name := ""
			if prop, ok := nameProps[res.Type]; ok {
				if v, ok := res.Properties[prop]; ok {
					s, err := r.ResolveString(v)
					if err != nil {
						next, lastErr = append(next, id), fmt.Errorf("resource %s: %s: %w", id, prop, err)
						continue
					}
					name = s
				}
			}
			if name == "" {
				name = r.generatedName(id)
			}
			a, err := r.attrsFor(id, res, name)
			if err != nil {
				next, lastErr = append(next, id), err
				continue
			}
			r.Resources[id] = a
		}
		if len(next) == len(pending) {
			return lastErr
		}
		pending = next
	}
	return nil
}

// generatedName is what CloudFormation names a resource without a physical name:
// <stack>-<logical id>-<suffix>, here with a suffix derived from the id so runs repeat.
func (r *Resolver) generatedName(id string) string {
	n := fmt.Sprintf("%s-%s", r.StackName, id)
	if len(n) > 50 {
		n = n[:50]
	}
	return n + "-" + strings.ToUpper(hash(id)[:12])
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func fakeUUID(s string) string {
	h := hash(s)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (r *Resolver) arn(service, region, account, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", r.partition(), service, region, account, resource)
}

func (r *Resolver) attrsFor(id string, res Resource, name string) (Attrs, error) {
	reg, acct := r.Region, r.AccountID
	a := Attrs{Ref: name, Attrs: map[string]string{}}
	set := func(kv ...string) {
		for i := 0; i+1 < len(kv); i += 2 {
			a.Attrs[kv[i]] = kv[i+1]
		}
	}
	switch res.Type {
	case "AWS::Lambda::Function":
		set("Arn", r.arn("lambda", reg, acct, "function:"+name))
	case "AWS::Lambda::Version":
		set("Version", "1")
		a.Ref = r.arn("lambda", reg, acct, "function:"+name+":1")
	case "AWS::Lambda::Alias":
		a.Ref = r.arn("lambda", reg, acct, "function:"+name)
	case "AWS::Lambda::LayerVersion":
		a.Ref = r.arn("lambda", reg, acct, "layer:"+name+":1")
		set("LayerVersionArn", a.Ref)
	case "AWS::Lambda::EventSourceMapping", "AWS::SNS::Subscription":
		a.Ref = fakeUUID(id)
		set("Id", a.Ref)
	case "AWS::SQS::Queue":
		a.Ref = fmt.Sprintf("https://sqs.%s.%s/%s/%s", reg, r.urlSuffix(), acct, name)
		set("Arn", r.arn("sqs", reg, acct, name), "QueueName", name, "QueueUrl", a.Ref)
	case "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable":
		arn := r.arn("dynamodb", reg, acct, "table/"+name)
		set("Arn", arn, "StreamArn", arn+"/stream/2026-01-01T00:00:00.000")
	case "AWS::IAM::Role":
		path := "/"
		if p, ok := res.Properties["Path"].(string); ok {
			path = p
		}
		set("Arn", fmt.Sprintf("arn:%s:iam::%s:role%s%s", r.partition(), acct, path, name), "RoleId", "AROA"+strings.ToUpper(hash(id)[:17]))
	case "AWS::IAM::ManagedPolicy":
		a.Ref = fmt.Sprintf("arn:%s:iam::%s:policy/%s", r.partition(), acct, name)
		set("PolicyArn", a.Ref)
	case "AWS::IAM::InstanceProfile":
		set("Arn", fmt.Sprintf("arn:%s:iam::%s:instance-profile/%s", r.partition(), acct, name))
	case "AWS::SNS::Topic":
		a.Ref = r.arn("sns", reg, acct, name)
		set("TopicArn", a.Ref, "TopicName", name)
	case "AWS::S3::Bucket":
		name = strings.ToLower(name)
		a.Ref = name
		set("Arn", fmt.Sprintf("arn:%s:s3:::%s", r.partition(), name), "DomainName", name+".s3."+r.urlSuffix(),
			"RegionalDomainName", name+".s3."+reg+"."+r.urlSuffix(), "WebsiteURL", "http://"+name+".s3-website-"+reg+"."+r.urlSuffix())
	case "AWS::StepFunctions::StateMachine":
		a.Ref = r.arn("states", reg, acct, "stateMachine:"+name)
		set("Arn", a.Ref, "Name", name)
	case "AWS::Logs::LogGroup":
		set("Arn", r.arn("logs", reg, acct, "log-group:"+name+":*"))
	case "AWS::KMS::Key":
		a.Ref = fakeUUID(id)
		set("Arn", r.arn("kms", reg, acct, "key/"+a.Ref), "KeyId", a.Ref)
	case "AWS::KMS::Alias":
		set("Arn", r.arn("kms", reg, acct, name))
	case "AWS::Events::EventBus":
		set("Arn", r.arn("events", reg, acct, "event-bus/"+name), "Name", name)
	case "AWS::Events::Rule":
		set("Arn", r.arn("events", reg, acct, "rule/"+name))
	case "AWS::Scheduler::ScheduleGroup":
		set("Arn", r.arn("scheduler", reg, acct, "schedule-group/"+name))
	case "AWS::CloudWatch::Alarm":
		set("Arn", r.arn("cloudwatch", reg, acct, "alarm:"+name))
	case "AWS::SecretsManager::Secret":
		a.Ref = r.arn("secretsmanager", reg, acct, "secret:"+name+"-"+hash(id)[:6])
		set("Id", a.Ref)
	case "AWS::ApiGatewayV2::Api":
		a.Ref = strings.ToLower(hash(id)[:10])
		set("ApiId", a.Ref, "ApiEndpoint", fmt.Sprintf("https://%s.execute-api.%s.%s", a.Ref, reg, r.urlSuffix()))
	case "AWS::ApiGatewayV2::Stage":
		if s, ok := res.Properties["StageName"].(string); ok {
			a.Ref = s
		}
	case "AWS::ApiGatewayV2::Route", "AWS::ApiGatewayV2::Integration", "AWS::ApiGatewayV2::Authorizer":
		a.Ref = strings.ToLower(hash(id)[:7])
	case "AWS::Chatbot::SlackChannelConfiguration":
		a.Ref = fmt.Sprintf("arn:%s:chatbot::%s:chat-configuration/slack-channel/%s", r.partition(), acct, name)
		set("Arn", a.Ref)
	case "AWS::SES::ConfigurationSet", "AWS::SSM::Parameter", "AWS::CloudWatch::Dashboard", "AWS::IAM::Policy":
	default:
		// Other types (permissions, policies, metadata) keep a generated Ref and no attributes:
		// a GetAtt on them fails, naming the resource, rather than inventing a value.
		a.Ref = id + "-" + strings.ToLower(hash(id)[:8])
	}
	return a, nil
}

func (r *Resolver) urlSuffix() string {
	if r.URLSuffix == "" {
		return "amazonaws.com"
	}
	return r.URLSuffix
}

// StateMachineDefinition returns the resolved definition of an AWS::StepFunctions::StateMachine:
// its DefinitionString (CDK writes an Fn::Join of literal JSON pieces and Refs/GetAtts of the
// resources the definition names) or Definition, with DefinitionSubstitutions applied.
func (t *Template) StateMachineDefinition(id string, r *Resolver) ([]byte, error) {
	res, ok := t.Resources[id]
	if !ok || res.Type != "AWS::StepFunctions::StateMachine" {
		return nil, fmt.Errorf("%s is not a state machine of the template", id)
	}
	var def string
	switch {
	case res.Properties["DefinitionString"] != nil:
		s, err := r.ResolveString(res.Properties["DefinitionString"])
		if err != nil {
			return nil, fmt.Errorf("state machine %s: DefinitionString: %w", id, err)
		}
		def = s
	case res.Properties["Definition"] != nil:
		b, err := r.ResolveJSON(res.Properties["Definition"])
		if err != nil {
			return nil, fmt.Errorf("state machine %s: Definition: %w", id, err)
		}
		def = string(b)
	default:
		return nil, fmt.Errorf("state machine %s has neither DefinitionString nor Definition (an S3 location is not supported)", id)
	}
	if subs, ok := res.Properties["DefinitionSubstitutions"].(map[string]any); ok {
		keys := make([]string, 0, len(subs))
		for k := range subs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := r.ResolveString(subs[k])
			if err != nil {
				return nil, fmt.Errorf("state machine %s: DefinitionSubstitutions %s: %w", id, k, err)
			}
			def = strings.ReplaceAll(def, "${"+k+"}", v)
		}
	}
	return []byte(def), nil
}
