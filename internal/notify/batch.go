package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// SendBatch is one ingest message carrying several send requests: a producer puts up to
// MaxSendBatch notifications on its ingest queue for one SQS request (and one receive, delete
// and invocation share of them), and POST /v1/notifications/batch enqueues one for a whole
// batch. Each request is a notification of its own, deduped on its own idempotency key (or, for a
// producer's request without one, on the message id and its index). Attributes, when present, is
// parallel to Notifications: each request's message attributes as the API hands them to ingest
// (AttrNotificationID, AttrFingerprint, AttrTemplateName, AttrTemplateVersion).
type SendBatch struct {
	Notifications []json.RawMessage   `json:"notifications"`
	Attributes    []map[string]string `json:"attributes,omitempty"`
}

// SendBatchIn tells an ingest message's body that carries a SendBatch — a JSON object with a
// "notifications" key, which no SendRequest has — from any other (ok false), and decodes it,
// refusing unknown fields: err is the decoding's error when ok and the body is no SendBatch.
func SendBatchIn(body []byte) (b *SendBatch, ok bool, err error) {
	if !bytes.Contains(body, []byte(`"notifications"`)) {
		return nil, false, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top["notifications"] == nil {
		return nil, false, nil
	}
	b = new(SendBatch)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(b); err != nil {
		return nil, true, err
	}
	return b, true, nil
}

// MaxSendBatch is the most requests one SendBatch carries.
const MaxSendBatch = 50

// Validate checks the batch's shape; each request is checked on its own.
func (b *SendBatch) Validate() error {
	if len(b.Notifications) == 0 || len(b.Notifications) > MaxSendBatch {
		return FieldError("notifications", "want 1 to %d send requests, got %d", MaxSendBatch, len(b.Notifications))
	}
	if b.Attributes != nil && len(b.Attributes) != len(b.Notifications) {
		return FieldError("attributes", "want one per notification (%d), got %d", len(b.Notifications), len(b.Attributes))
	}
	return nil
}

// InBatch names err as the batch's request i: an error's field becomes
// "notifications[i].<field>" (or "notifications[i]"), so a dead-lettered batch or a 400 says
// which request is at fault.
func InBatch(i int, err error) error {
	if err == nil {
		return nil
	}
	at := fmt.Sprintf("notifications[%d]", i)
	var e *Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%s: %w", at, err)
	}
	c := *e
	if c.Field != "" {
		c.Field = at + "." + c.Field
	} else {
		c.Field = at
	}
	return &c
}
