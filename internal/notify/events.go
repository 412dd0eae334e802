package notify

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// LargeSend is how many recipients make a send large enough for operators to hear of it: a
// notification accepted with at least this many, or a campaign whose dispatched members first
// reach it, emits EventLargeSendStarted.
const LargeSend = 1000

// Operator event types: what alerts subscribe to.
const (
	EventLargeSendStarted = "large_send_started"
	EventCampaignFinished = "campaign_finished" // its audience is exhausted and every chunk dispatched
	EventCampaignFailed   = "campaign_failed"   // a step failed permanently; the campaign is FAILED
	// EventMessageDeadLettered: a stage failed permanently on a queue message and moved it to
	// the queue's DLQ (see DeadLetterEvent).
	EventMessageDeadLettered = "message_dead_lettered"
	// EventProviderAuthFailed: a provider refused Herald's credentials, its account or its
	// balance (EAUTH), and the deliveries it refused failed: nothing is sent through it until an
	// operator acts. Emitted at most once a minute per provider by each process; Detail holds
	// provider, code and error, and the count of refused deliveries is Recipients.
	EventProviderAuthFailed = "provider_auth_failed"
)

// EventSource names Herald as the emitter of its operator events (EventBridge's source).
const EventSource = "herald"

// EventTitle is an event type's name for people — "Campaign Failed" for campaign_failed —
// which EventBridge carries as the detail-type alert rules match on.
func EventTitle(eventType string) string {
	words := strings.Split(eventType, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

// Event is an operator event: something about a send as a whole, never about a recipient. It
// carries ids and counts only — never an address, token, key or message content; the one
// excerpt of a message it carries (message_dead_lettered's payload) is masked by MaskPayload.
type Event struct {
	Type           string    `json:"type"`
	Time           time.Time `json:"time"`
	Service        string    `json:"service"`
	CampaignID     string    `json:"campaign_id,omitempty"`     // campaign events
	NotificationID string    `json:"notification_id,omitempty"` // a single large notification
	// Recipients is how many the send reaches: a notification's recipients, a campaign's members
	// dispatched so far.
	Recipients int `json:"recipients"`
	// Detail holds what only some types have: category, channels (and a notification's chunks)
	// for large_send_started; chunks for campaign_finished; code and error (the message the
	// campaign's API shows) for campaign_failed; queue, message_id, code, reason and payload
	// for message_dead_lettered.
	Detail map[string]any `json:"detail,omitempty"`
}

// Events publishes operator events: EventBridge in AWS (internal/eventbus), a log line locally
// (LogEvents). Events are advisory and delivered at least once: a retried step may emit the same
// event again, so subscribers key on the type and id. Emitters log a failed Emit and carry on;
// a send never fails because its event could not be published.
type Events interface {
	// Emit publishes e; an error means it was not (or not wholly) published.
	Emit(ctx context.Context, e Event) error
}

// LogEvents writes each event as one structured log line ("event": its type, then its fields
// and detail), at ERROR for campaign_failed and INFO otherwise. It never fails.
type LogEvents struct {
	Logger *slog.Logger // nil: slog.Default()
}

var _ Events = LogEvents{}

func (l LogEvents) Emit(ctx context.Context, e Event) error {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	msg, level := strings.ReplaceAll(e.Type, "_", " "), slog.LevelInfo
	if e.Type == EventCampaignFailed || e.Type == EventProviderAuthFailed {
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("event", e.Type), slog.String("service", e.Service)}
	if e.CampaignID != "" {
		attrs = append(attrs, slog.String("campaign_id", e.CampaignID))
	}
	if e.NotificationID != "" {
		attrs = append(attrs, slog.String("notification_id", e.NotificationID))
	}
	attrs = append(attrs, slog.Int("recipients", e.Recipients))
	for _, k := range slices.Sorted(maps.Keys(e.Detail)) {
		attrs = append(attrs, slog.Any(k, e.Detail[k]))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
	return nil
}

// TeeEvents emits every event to each of es in turn (e.g. a log line and EventBridge), and
// returns their errors joined.
func TeeEvents(es ...Events) Events { return tee(es) }

type tee []Events

func (t tee) Emit(ctx context.Context, e Event) error {
	var errs []error
	for _, x := range t {
		if err := x.Emit(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Bounds of a message_dead_lettered event's excerpts: enough to recognise the message and the
// failure, small enough for a chat line and an EventBridge entry.
const (
	deadLetterReasonMax  = 500
	deadLetterPayloadMax = 300
)

// DeadLetterEvent is the message_dead_lettered event for message id of queue, moved to its DLQ
// because its stage failed permanently with code and reason. The reason and the payload
// excerpt are masked (MaskText, MaskPayload) and truncated; the notification id is taken from
// the body when it names one.
func DeadLetterEvent(at time.Time, queue, id, code, reason string, body []byte) Event {
	var ids struct {
		NotificationID string `json:"notification_id"`
		CampaignID     string `json:"campaign_id"`
	}
	_ = json.Unmarshal(body, &ids) // a malformed body (often why it is here) names none
	return Event{
		Type: EventMessageDeadLettered, Time: at, NotificationID: ids.NotificationID, CampaignID: ids.CampaignID,
		Detail: map[string]any{
			"queue": queue, "message_id": id, "code": code,
			"reason":  Truncate(MaskText(reason), deadLetterReasonMax),
			"payload": Truncate(string(MaskPayload(body)), deadLetterPayloadMax),
		},
	}
}
