package notify

import (
	"strings"
	"time"
)

// Stage names. Each stage has its own queue (per lane where it has lanes) and DLQ.
const (
	StageIngest  = "ingest"
	StagePrepare = "prepare"
	StageSend    = "send"
	StageRecord  = "record"
	StageCleanup = "cleanup"
	StageBounce  = "bounce"
)

// Lanes lists the lanes in a stable order.
var Lanes = []Lane{LaneRealtime, LaneBulk}

// IngestQueue is the ingest queue of one service: every service has its own, with its own
// maximum concurrency, so one service's burst never starves another.
func IngestQueue(service string) string { return "ingest-" + service }

// IsIngestQueue reports whether queue is a service's ingest queue (IngestQueue).
func IsIngestQueue(queue string) bool { return strings.HasPrefix(queue, IngestQueue("")) }

// LaneQueue is a stage's queue in one lane (prepare, send, record).
func LaneQueue(stage string, lane Lane) string { return stage + "-" + string(lane) }

// DLQName is the dead-letter queue of queue.
func DLQName(queue string) string { return queue + "-dlq" }

// Laned reports whether stage has one queue per lane.
func Laned(stage string) bool {
	return stage == StagePrepare || stage == StageSend || stage == StageRecord
}

// Ingest queue bodies are either a SendRequest, or a fire message {"fire": "<id>", "at":
// "<send_at>"} sent by a schedule when a reserved send is due.

// AttrNotificationID is the message attribute with which the HTTP API hands ingest the id it
// already returned to the caller (for requests without an idempotency key).
const AttrNotificationID = "herald-notification-id"

// AttrFingerprint is the message attribute with which the HTTP API hands ingest the request's
// RequestFingerprint, the one it compared with any stored notification; a message without it
// (a producer sending straight to the queue) has it computed by ingest.
const AttrFingerprint = "herald-request-fingerprint"

// AttrLane is the message attribute with which the HTTP API says which lane the notification a
// message on an ingest queue carries takes ("bulk" for a batch only when all of its requests
// do). Ingest does not read it — the request decides — but the local runtime's ingest workers
// do: taking in a marketing send is bulk work, which gives way to real-time work instead of
// holding the bulk lane back as real-time work would (internal/local's Gate).
const AttrLane = "herald-lane"

// FireMessage is the body a schedule puts on an ingest queue: the id, and the send_at the
// schedule was armed for (in whole seconds, ReservedTime). The stored notification or campaign
// is the truth: a fire armed for a send_at it no longer has (it was rescheduled through the API,
// which armed a new fire) is stale and ignored, while a schedule whose time was edited in the
// console still carries the stored send_at and is honoured, the stored send_at following the
// fire (JudgeFire). Ingest refuses — dead-letters — a fire without At, or naming a send of
// another service than the queue's, or none.
type FireMessage struct {
	Fire string     `json:"fire"`
	At   *time.Time `json:"at,omitempty"`
}

// AttrTemplateName and AttrTemplateVersion are the message attributes with which the HTTP API
// tells ingest which stored template (and version) it rendered the request's content from.
const (
	AttrTemplateName    = "herald-template-name"
	AttrTemplateVersion = "herald-template-version"
)
