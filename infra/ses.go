package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"

	"herald/internal/notify"
)

// newTopic is an SNS topic encrypted with a key that the AWS service publishing to it (SES,
// CloudWatch) may use: bounce notifications carry email addresses, so they are not left in
// plain text, and the AWS-managed SNS key cannot be granted to those services. With sourceArn,
// the publisher may publish only on behalf of that resource (for SES: the configuration set, so
// no other configuration set or identity in the account can forge bounces into Herald).
func (h *herald) newTopic(id, logical, publisher string, sourceArn *string) awssns.Topic {
	key := awskms.NewKey(h.stack, jsii.String(id+"Key"), &awskms.KeyProps{
		Alias:             jsii.String("alias/" + h.name(logical)),
		Description:       jsii.String("Encrypts Herald's " + logical + " topic; usable by " + publisher),
		EnableKeyRotation: jsii.Bool(true),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
		RemovalPolicy:     h.removal(),
	})
	sourceAccount := &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": h.stack.Account()}}
	h.topicKeyGrant(key, logical, publisher)
	topic := awssns.NewTopic(h.stack, jsii.String(id), &awssns.TopicProps{
		TopicName:  jsii.String(h.name(logical)),
		MasterKey:  key,
		EnforceSSL: jsii.Bool(true),
	})
	// The topic policy replaces SNS's default one, so the publisher is allowed explicitly.
	publish := sourceAccount
	if sourceArn != nil {
		publish = &map[string]interface{}{"StringEquals": map[string]interface{}{
			"AWS:SourceAccount": h.stack.Account(), "AWS:SourceArn": sourceArn,
		}}
	}
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("PublisherMayPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String(publisher), nil)},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: publish,
	}))
	return topic
}

// topicKeyGrant lets the AWS service publisher use key for the topic herald-<env>-<logical>
// only. The condition is the encryption context SNS itself sends KMS for a topic
// (kms:EncryptionContext:aws:sns:topicArn), which holds whichever service publishes: the key
// policy cannot rely on aws:SourceAccount or aws:SourceArn, which AWS documents as unsupported
// there for EventBridge (a KMS statement with them silently drops every event). Where the
// publisher comes from is checked by the topic policy instead. The ARN is built from the
// topic's name, since the topic itself refers to the key.
func (h *herald) topicKeyGrant(key awskms.IKey, logical, publisher string) {
	topicArn := fmt.Sprintf("arn:%s:sns:%s:%s:%s", *h.stack.Partition(), *h.stack.Region(), *h.stack.Account(), h.name(logical))
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(pascal(strings.TrimSuffix(publisher, ".amazonaws.com")) + "MayEncrypt"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String(publisher), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"), // in a key policy "*" is the key itself
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:EncryptionContext:aws:sns:topicArn": topicArn}},
	}), nil)
}

// addSES creates the configuration set every email is sent with, and routes its bounce and
// complaint events SES → SNS → the bounce queue (→ the bounce function → suppressions).
func (h *herald) addSES() {
	h.feedbackTopic = h.newTopic("SesFeedbackTopic", "ses-feedback", "ses.amazonaws.com", h.configurationSetArn())
	set := awsses.NewConfigurationSet(h.stack, jsii.String("SesConfigurationSet"), &awsses.ConfigurationSetProps{
		ConfigurationSetName: jsii.String(h.cfg.Providers.SES.ConfigurationSet),
		ReputationMetrics:    jsii.Bool(true),
		SendingEnabled:       jsii.Bool(true),
	})
	awsses.NewConfigurationSetEventDestination(h.stack, jsii.String("SesFeedback"), &awsses.ConfigurationSetEventDestinationProps{
		ConfigurationSet:                     set,
		ConfigurationSetEventDestinationName: jsii.String("bounces-and-complaints"),
		Destination:                          awsses.EventDestination_SnsTopic(h.feedbackTopic),
		Events:                               &[]awsses.EmailSendingEvent{awsses.EmailSendingEvent_BOUNCE, awsses.EmailSendingEvent_COMPLAINT},
	})
	if h.settings.Region == "" {
		// An environment-agnostic stack learns its region at deploy time: stop there, before any
		// change, if SES sends from another region than the one the configuration set lands in.
		region := h.cfg.Providers.SES.Region
		awscdk.NewCfnRule(h.stack, jsii.String("SesRegion"), &awscdk.CfnRuleProps{
			Assertions: &[]*awscdk.CfnRuleAssertion{{
				Assert: awscdk.Fn_ConditionEquals(awscdk.Aws_REGION(), jsii.String(region)),
				AssertDescription: jsii.String("herald.yaml providers.ses.region is " + region +
					": deploy to that region, or set providers.ses.region to the region you deploy to"),
			}},
		})
	}
	// Raw delivery off: the bounce function reads the SNS envelope, as the local sandbox sends it.
	h.feedbackTopic.AddSubscription(awssnssubscriptions.NewSqsSubscription(h.queueByName[notify.StageBounce].queue,
		&awssnssubscriptions.SqsSubscriptionProps{RawMessageDelivery: jsii.Bool(false)}))
}

// configurationSetArn is the ARN of providers.ses.configuration_set in the SES region (the
// stack's: Load and the SesRegion rule check they are the same).
func (h *herald) configurationSetArn() *string {
	return h.stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("ses"), Region: jsii.String(h.cfg.Providers.SES.Region),
		Resource: jsii.String("configuration-set"), ResourceName: jsii.String(h.cfg.Providers.SES.ConfigurationSet),
	})
}
