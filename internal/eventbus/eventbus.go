// Package eventbus publishes Herald's operator events (notify.Events) to an Amazon EventBridge
// bus with PutEvents: source "herald", detail-type the event's title ("Campaign Failed"), detail
// the event as JSON. Alert rules on the bus match the source and detail-type (infra/ routes
// "Campaign Failed" and "Large Send Started" to the alarm topic).
//
// The events are advisory: Emit returns an error when an event was not published — after
// retrying an entry EventBridge failed with a transient code — and counts it in the EventsFailed
// metric, and the emitters (the campaign steps, ingest) log it and carry on. A campaign step
// never fails, and so never repeats its work, because its event could not be published.
package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"herald/internal/awserr"
	"herald/internal/notify"
)

// DefaultBus is the account's default event bus.
const DefaultBus = "default"

// MetricFailed counts events that were not published (dimension Type).
const MetricFailed = "EventsFailed"

// attempts is how often an entry EventBridge failed transiently is put; the SDK already retries
// a failed call, but not a failed entry of a call that succeeded.
const attempts = 3

// Bus implements notify.Events on an EventBridge bus.
type Bus struct {
	client  *eventbridge.Client
	name    string
	metrics notify.Metrics
	// Sleep waits between attempts at a failed entry (tests make it instant).
	Sleep func(ctx context.Context, d time.Duration)
}

var _ notify.Events = (*Bus)(nil)

// New returns a Bus putting events on the bus named name ("" means DefaultBus) through client;
// metrics (nil: none) counts the events that could not be published.
func New(client *eventbridge.Client, name string, metrics notify.Metrics) (*Bus, error) {
	if client == nil {
		return nil, errors.New("eventbus: nil client")
	}
	if name == "" {
		name = DefaultBus
	}
	return &Bus{client: client, name: name, metrics: metrics, Sleep: sleep}, nil
}

// Name is the bus events go to.
func (b *Bus) Name() string { return b.name }

// Emit puts e on the bus. An entry EventBridge fails with a transient code (throttling, an
// internal failure) is put again, up to 3 times in all. Errors carry notify codes: EAUTH (the
// role may not put on this bus), ETHROTTLED, EUNAVAILABLE, EINVALID (EventBridge refused the
// entry), ENOTFOUND (no such bus).
func (b *Bus) Emit(ctx context.Context, e notify.Event) error {
	err := b.put(ctx, e)
	if err != nil && b.metrics != nil {
		b.metrics.Add(ctx, MetricFailed, 1, map[string]string{"Type": e.Type})
	}
	return err
}

func (b *Bus) put(ctx context.Context, e notify.Event) error {
	entry, err := toEntry(b.name, e)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		out, err := b.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}})
		if err != nil {
			return awserr.Wrap(err, callCodes, "eventbus: put %s on %s", e.Type, b.name)
		}
		if out.FailedEntryCount == 0 {
			return nil
		}
		code, msg := "", ""
		if len(out.Entries) > 0 {
			code, msg = aws.ToString(out.Entries[0].ErrorCode), aws.ToString(out.Entries[0].ErrorMessage)
		}
		ncode := entryCode(code)
		if (ncode != notify.ETHROTTLED && ncode != notify.EUNAVAILABLE) || attempt == attempts {
			return notify.Errorf(ncode, "eventbus: put %s on %s: entry failed (%d attempts): %s: %s", e.Type, b.name, attempt, code, msg)
		}
		b.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond)
	}
}

// toEntry is the PutEvents entry for e on bus: source herald, detail-type its title, detail e
// as JSON.
func toEntry(bus string, e notify.Event) (types.PutEventsRequestEntry, error) {
	if e.Type == "" {
		return types.PutEventsRequestEntry{}, notify.FieldError("type", "eventbus: an event needs a type")
	}
	detail, err := json.Marshal(e)
	if err != nil {
		return types.PutEventsRequestEntry{}, notify.Wrap(notify.EINVALID, err, "eventbus: encode %s", e.Type)
	}
	entry := types.PutEventsRequestEntry{
		EventBusName: aws.String(bus),
		Source:       aws.String(notify.EventSource),
		DetailType:   aws.String(notify.EventTitle(e.Type)),
		Detail:       aws.String(string(detail)),
	}
	if !e.Time.IsZero() {
		entry.Time = aws.Time(e.Time)
	}
	return entry, nil
}

// entryCodes maps the error codes of a failed PutEvents entry; any other code is EINVALID (a
// malformed or refused entry, which putting again would not change).
var entryCodes = map[string]string{
	"ThrottlingException":             notify.ETHROTTLED,
	"InternalFailure":                 notify.EUNAVAILABLE,
	"InternalException":               notify.EUNAVAILABLE,
	"AccessDeniedException":           notify.EAUTH,
	"NotAuthorizedForSourceException": notify.EAUTH,
	"ResourceNotFoundException":       notify.ENOTFOUND,
}

func entryCode(code string) string {
	if c, ok := entryCodes[code]; ok {
		return c
	}
	return notify.EINVALID
}

// callCodes maps the error codes of a failed PutEvents call.
var callCodes = map[string]string{
	"ThrottlingException":         notify.ETHROTTLED,
	"InternalException":           notify.EUNAVAILABLE,
	"AccessDeniedException":       notify.EAUTH,
	"UnrecognizedClientException": notify.EAUTH,
	"InvalidSignatureException":   notify.EAUTH,
	"ExpiredTokenException":       notify.EAUTH,
	"ResourceNotFoundException":   notify.ENOTFOUND,
	"ValidationException":         notify.EINVALID,
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
