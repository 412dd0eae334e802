package sqs

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"herald/internal/notify"
)

var _ notify.DeadLetters = (*Queue)(nil)

// findScan bounds how many receives looking for one dead letter may take: SQS cannot fetch a
// message by ID, so the adapter receives (hiding what it sees for peekHold) until the message
// turns up or nothing new comes back. A DLQ is small — it pages — so a few receives suffice.
const findScan = 50

// find receives from url until message id turns up, holding it (its receipt is current) and
// releasing every other message it saw. ENOTFOUND when it is not there or not visible.
func (q *Queue) find(ctx context.Context, op, queue, url, id string) (notify.Message, error) {
	receipts := map[string]string{} // others seen → latest receipt, to release
	defer func() { q.release(context.WithoutCancel(ctx), url, receipts) }()
	for range findScan {
		res, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: maxBatch, VisibilityTimeout: peekHold,
			MessageSystemAttributeNames: systemAttributes, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return notify.Message{}, q.fail(ctx, err, "%s %s: dead letter %s", op, queue, id)
		}
		var found *notify.Message
		fresh := 0
		for _, m := range res.Messages {
			mid := aws.ToString(m.MessageId)
			if mid == id && found == nil {
				msg := fromSQS(m)
				found = &msg
				continue
			}
			if _, seen := receipts[mid]; !seen {
				fresh++
			}
			receipts[mid] = aws.ToString(m.ReceiptHandle)
		}
		if found != nil {
			return *found, nil
		}
		if fresh == 0 {
			break
		}
	}
	return notify.Message{}, notify.Errorf(notify.ENOTFOUND, "%s %s: no dead letter %s", op, queue, id)
}

// RedriveDeadLetter implements notify.DeadLetters: the message is sent again to the DLQ's one
// source queue (SQS names it: ListDeadLetterSourceQueues), with its body, group and attributes
// — a new message, so a new ID and a receive count of 0 — then deleted from the DLQ. A failure
// between the two leaves it in both, which at-least-once delivery already allows.
func (q *Queue) RedriveDeadLetter(ctx context.Context, dlq, id string) error {
	url, err := q.url("redrive", dlq)
	if err != nil {
		return err
	}
	srcs, err := q.client.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(url)})
	if err != nil {
		return q.fail(ctx, err, "redrive %s: list its source queues", dlq)
	}
	source := ""
	if len(srcs.QueueUrls) == 1 {
		for name, u := range q.urls {
			if u == srcs.QueueUrls[0] {
				source = name
			}
		}
	}
	if source == "" {
		return notify.Errorf(notify.ECONFLICT, "redrive %s: dead letter %s has no single known source queue to go back to", dlq, id)
	}
	m, err := q.find(ctx, "redrive", dlq, url, id)
	if err != nil {
		return err
	}
	if err := q.Send(ctx, source, notify.OutMessage{Body: m.Body, GroupID: m.GroupID, Attributes: m.Attributes}); err != nil {
		return err
	}
	return q.Delete(ctx, dlq, m.ReceiptHandle)
}

// DeleteDeadLetter implements notify.DeadLetters.
func (q *Queue) DeleteDeadLetter(ctx context.Context, dlq, id string) error {
	url, err := q.url("delete", dlq)
	if err != nil {
		return err
	}
	m, err := q.find(ctx, "delete", dlq, url, id)
	if err != nil {
		return err
	}
	return q.Delete(ctx, dlq, m.ReceiptHandle)
}

// PurgeDeadLetters implements notify.DeadLetters with PurgeQueue, after counting what the queue
// holds (approximately, as SQS counts). A purge already under way (SQS allows one a minute) is
// ECONFLICT.
func (q *Queue) PurgeDeadLetters(ctx context.Context, dlq string) (int, error) {
	url, err := q.url("purge", dlq)
	if err != nil {
		return 0, err
	}
	st, err := q.Stats(ctx, dlq)
	if err != nil {
		return 0, err
	}
	if _, err := q.client.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && strings.Contains(ae.ErrorCode(), "PurgeQueueInProgress") {
			return 0, notify.Wrap(notify.ECONFLICT, err, "purge %s: a purge of this queue is under way; SQS allows one a minute", dlq)
		}
		return 0, q.fail(ctx, err, "purge %s", dlq)
	}
	return st.Visible + st.InFlight + st.Delayed, nil
}
