package sqsfake_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"herald/internal/sqs/sqsfake"
)

func setup(t *testing.T) (*sqs.Client, string) {
	t.Helper()
	fake := sqsfake.New()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(fake.Close)
	client := sqs.New(sqs.Options{Region: sqsfake.Region, BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret", "")})
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	return client, aws.ToString(out.QueueUrl)
}

// TestMD5OfAttributes checks the attribute checksum against values published by other SQS
// implementations and by AWS's own sample event.
func TestMD5OfAttributes(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for want, attrs := range map[string]map[string]sqsfake.AttributeValue{
		"235c5c510d26fb653d073faed50ae77c": {"timestamp": {DataType: "Number", StringValue: s("1493147359900")}},
		"cd28f3b68aeee4b2eac9c66f2f694b58": {"SellerName": {DataType: "String", StringValue: s("Example Store")}},
		"d21ae90c49061e927f57df5f5d72be1f": {"ordinal": {DataType: "Number", StringValue: s("1")}, "category": {DataType: "String", StringValue: s("test")}},
	} {
		if got := sqsfake.MD5OfAttributes(attrs); got != want {
			t.Errorf("MD5OfAttributes(%v) = %s, want %s", attrs, got, want)
		}
	}
	if got := sqsfake.MD5OfAttributes(nil); got != "" {
		t.Errorf("MD5OfAttributes(nil) = %q, want empty", got)
	}
}

// TestChecksumsReachTheSDK: the SDK verifies MD5OfMessageBody on send and MD5OfBody on
// receive; the attribute checksum is what the message attributes hash to.
func TestChecksumsReachTheSDK(t *testing.T) {
	t.Parallel()
	client, url := setup(t)
	ctx := t.Context()
	body := "Test message."
	attrs := map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("push")}}
	sent, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: attrs})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if aws.ToString(sent.MD5OfMessageBody) != "e4e68fb7bd0e697a0ae8f1bb342846b3" { // the sample SQS event in the Lambda docs
		t.Errorf("MD5OfMessageBody = %s", aws.ToString(sent.MD5OfMessageBody))
	}
	got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("ReceiveMessage = %v, %v", got, err)
	}
	m := got.Messages[0]
	if aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) || m.MD5OfMessageAttributes == nil {
		t.Errorf("MD5OfMessageAttributes: received %v, sent %v", aws.ToString(m.MD5OfMessageAttributes), aws.ToString(sent.MD5OfMessageAttributes))
	}
	if len(m.Attributes) != 1 || m.Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("system attributes %v, want only the receive count asked for", m.Attributes)
	}
	sum := md5.Sum([]byte(body))
	if aws.ToString(m.MD5OfBody) != hex.EncodeToString(sum[:]) {
		t.Errorf("MD5OfBody = %s", aws.ToString(m.MD5OfBody))
	}
}

func TestErrorsAreAWSShaped(t *testing.T) {
	t.Parallel()
	client, url := setup(t)
	ctx := t.Context()

	_, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var noQueue *types.QueueDoesNotExist
	if !errors.As(err, &noQueue) || noQueue.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("GetQueueUrl(missing) = %v, want QueueDoesNotExist with the query-compatible code", err)
	}
	_, err = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
	var badReceipt *types.ReceiptHandleIsInvalid
	if !errors.As(err, &badReceipt) {
		t.Errorf("DeleteMessage(garbage) = %v, want ReceiptHandleIsInvalid", err)
	}
	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", sqsfake.MaxMessageSize+1))})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidParameterValue" || !strings.Contains(api.ErrorMessage(), "shorter than") {
		t.Errorf("SendMessage over 1 MiB = %v, want InvalidParameterValue", err)
	}
	entries := make([]types.SendMessageBatchRequestEntry, 11)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), MessageBody: aws.String("x")}
	}
	_, err = client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	var tooMany *types.TooManyEntriesInBatchRequest
	if !errors.As(err, &tooMany) {
		t.Errorf("SendMessageBatch of 11 = %v, want TooManyEntriesInBatchRequest", err)
	}
	_, err = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidParameterValue" {
		t.Errorf("ReceiveMessage(max 11) = %v, want InvalidParameterValue", err)
	}

	resp, err := http.Post(strings.TrimSuffix(url, "/"+sqsfake.Account+"/q")+"/", "application/x-amz-json-1.0", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Query-Error") == "" {
		t.Errorf("request without X-Amz-Target: %d, query error %q", resp.StatusCode, resp.Header.Get("X-Amzn-Query-Error"))
	}
}

// TestBatchEntriesFailSeparately: an invalid entry fails alone, as a sender fault.
func TestBatchEntriesFailSeparately(t *testing.T) {
	t.Parallel()
	client, url := setup(t)
	out, err := client.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("fine")},
		{Id: aws.String("bad"), MessageBody: aws.String("nul \x00 inside")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 1 || len(out.Failed) != 1 || aws.ToString(out.Failed[0].Id) != "bad" ||
		!out.Failed[0].SenderFault || aws.ToString(out.Failed[0].Code) != "InvalidMessageContents" {
		t.Errorf("Successful %d, Failed %+v", len(out.Successful), out.Failed)
	}
}
