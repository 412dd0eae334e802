package notify

import (
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The audit log answers "who did that?" for operator actions: who cancelled a campaign, who
// redrove a queue. Every such action appends one AuditEntry after it ran, with its result, and
// nothing ever changes or deletes an entry; entries expire after AuditRetention.

// AuditRetention is how long an audit entry is kept: a store returns no entry older than this and
// may drop it (DynamoDB's TTL, SQLite's pruning).
const AuditRetention = 365 * 24 * time.Hour

// AuditAction names what an operator did. The list below is the only list of actions.
type AuditAction string

// Audit actions. Actions of later operator features (template.put, export.*) are added here and
// to AuditActions.
const (
	AuditQueueRedrive           AuditAction = "queue.redrive"
	AuditQueuePause             AuditAction = "queue.pause"         // its consumers stop receiving
	AuditQueueResume            AuditAction = "queue.resume"        // and start again
	AuditDeadLetterRedrive      AuditAction = "dead_letter.redrive" // one dead letter, by id
	AuditDeadLetterDelete       AuditAction = "dead_letter.delete"
	AuditDeadLetterPurge        AuditAction = "dead_letter.purge" // every dead letter of a queue; params: purged
	AuditNotificationCancel     AuditAction = "notification.cancel"
	AuditNotificationReschedule AuditAction = "notification.reschedule"
	AuditCampaignCancel         AuditAction = "campaign.cancel"
	AuditCampaignPause          AuditAction = "campaign.pause"
	AuditCampaignResume         AuditAction = "campaign.resume"
	AuditCampaignReschedule     AuditAction = "campaign.reschedule"
	AuditAudienceListUpload     AuditAction = "audience_list.upload"
	AuditSchedulesRearm         AuditAction = "schedules.rearm"
	AuditExportCreate           AuditAction = "export.create"   // params: kind, format, filter fields, unmasked
	AuditExportDownload         AuditAction = "export.download" // a signed link was used
	AuditExportCancel           AuditAction = "export.cancel"
	// A service's change to a user's data, which every service of the deployment shares
	// (docs/design.md, "Authorization between services"). Device registrations are not among
	// them: an app registers its token again on every start.
	AuditUserDeviceDelete   AuditAction = "user.device.delete"
	AuditUserWebPushDelete  AuditAction = "user.web_push.delete"
	AuditUserContactsPut    AuditAction = "user.contacts.put"
	AuditUserPreferencesPut AuditAction = "user.preferences.put"
	AuditUserInboxDelete    AuditAction = "user.inbox.delete"
	// AuditUserUnsubscribe is a recipient's one-click unsubscribe (RFC 8058), by the link a
	// marketing email carried: the actor is the user the link names.
	AuditUserUnsubscribe AuditAction = "user.unsubscribe"
	// AuditUserErase is a user's erasure (DELETE /v1/users/{user}), written once it has
	// finished: the target is the user's hash (notify.UserHash), the params what each step
	// removed.
	AuditUserErase AuditAction = "user.erase"
)

// Bounds of an entry's fields.
const (
	auditActionMaxBytes     = 64
	auditFieldMaxBytes      = 256
	auditParamsMax          = 32
	auditParamKeyMaxBytes   = 64
	auditParamValueMaxBytes = 512
)

// AuditActions is every action, in the order above: what GET /v1/admin/audit?action= accepts.
var AuditActions = []AuditAction{
	AuditQueueRedrive, AuditQueuePause, AuditQueueResume, AuditDeadLetterRedrive, AuditDeadLetterDelete, AuditDeadLetterPurge, AuditNotificationCancel, AuditNotificationReschedule,
	AuditCampaignCancel, AuditCampaignPause, AuditCampaignResume, AuditCampaignReschedule,
	AuditAudienceListUpload, AuditSchedulesRearm, AuditExportCreate, AuditExportDownload, AuditExportCancel,
	AuditUserDeviceDelete, AuditUserWebPushDelete, AuditUserContactsPut, AuditUserPreferencesPut, AuditUserInboxDelete,
	AuditUserUnsubscribe, AuditUserErase,
}

// Known reports whether a is one of AuditActions.
func (a AuditAction) Known() bool { return slices.Contains(AuditActions, a) }

// Audit target types: what an action acted on.
const (
	AuditTargetQueue        = "queue"
	AuditTargetNotification = "notification"
	AuditTargetCampaign     = "campaign"
	AuditTargetAudienceList = "audience_list"
	AuditTargetSchedules    = "schedules"
	AuditTargetExport       = "export"
	AuditTargetUser         = "user"
)

// ActorKind says who an audit entry's Actor is.
type ActorKind string

const (
	ActorService ActorKind = "service" // a calling service (its API key, or its IAM role in AWS)
	ActorUser    ActorKind = "user"    // an end user: the subject of their JWT in AWS
)

// AuditResultOK is the Result of an action that succeeded; a failed one's is its error code.
const AuditResultOK = "ok"

// AuditEntry is one operator action.
type AuditEntry struct {
	ID         string            `json:"id"`
	At         time.Time         `json:"at"`
	Actor      string            `json:"actor"`
	ActorKind  ActorKind         `json:"actor_kind"`
	Action     AuditAction       `json:"action"`
	TargetType string            `json:"target_type"`
	TargetID   string            `json:"target_id"`
	Params     map[string]string `json:"params"` // sanitized: SanitizeAuditParams
	Result     string            `json:"result"` // AuditResultOK or an error code
	RequestID  string            `json:"request_id,omitempty"`
}

// Validate checks what every store relies on: an id, a time, an actor and an action.
func (e *AuditEntry) Validate() error {
	switch {
	case e.ID == "" || len(e.ID) > auditFieldMaxBytes:
		return FieldError("id", "is required, at most %d bytes", auditFieldMaxBytes)
	case e.At.IsZero():
		return FieldError("at", "is required")
	case e.Actor == "" || len(e.Actor) > auditFieldMaxBytes:
		return FieldError("actor", "is required, at most %d bytes", auditFieldMaxBytes)
	case e.ActorKind != ActorService && e.ActorKind != ActorUser:
		return FieldError("actor_kind", "must be %s or %s", ActorService, ActorUser)
	case e.Action == "" || len(e.Action) > auditActionMaxBytes:
		return FieldError("action", "is required, at most %d bytes", auditActionMaxBytes)
	case len(e.TargetType) > auditFieldMaxBytes || len(e.TargetID) > auditFieldMaxBytes ||
		len(e.Result) > auditFieldMaxBytes || len(e.RequestID) > auditFieldMaxBytes:
		return FieldError("target_id", "target, result and request id are at most %d bytes each", auditFieldMaxBytes)
	}
	return nil
}

// AuditIDFor returns the id of the entry for action on target made while serving the request
// requestID: derived from them, so a request that is served twice (a retried invocation) appends
// one entry. Without a request id the id is random and time-ordered.
func AuditIDFor(requestID, actor string, action AuditAction, targetType, targetID string, now time.Time) string {
	if requestID == "" {
		return NewID("a_", now)
	}
	h := sha256.Sum256([]byte(strings.Join([]string{requestID, actor, string(action), targetType, targetID}, "\x00")))
	return "a_" + idEncoding.EncodeToString(h[:16])
}

// auditPersonalKeys are parts of parameter names whose values are personal data or secrets:
// such parameters are dropped whole, whatever their value looks like.
var auditPersonalKeys = []string{"address", "token", "email", "phone", "contact", "secret", "password",
	"authorization", "api_key", "apikey", "credential", "content", "body", "title"}

// SanitizeAuditParams returns the parameters an audit entry may keep: a parameter whose name
// suggests personal data, a secret or message content (address, token, email, phone, …) is
// dropped; any email address or phone number left inside another value is masked; names and
// values are cut to a bounded size, and at most 32 parameters are kept (by name order). Stores
// apply it to every entry they append, so no caller can store personal data by mistake.
func SanitizeAuditParams(p map[string]string) map[string]string {
	out := map[string]string{}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(out) == auditParamsMax {
			break
		}
		lk := strings.ToLower(k)
		if k == "" || slices.ContainsFunc(auditPersonalKeys, func(s string) bool { return strings.Contains(lk, s) }) {
			continue
		}
		out[Truncate(MaskText(k), auditParamKeyMaxBytes)] = Truncate(MaskText(p[k]), auditParamValueMaxBytes)
	}
	return out
}

var (
	emailText = regexp.MustCompile(`[^\s"'<>@,;:]+@[^\s"'<>@,;:]+\.[^\s"'<>@,;:]+`)
	phoneText = regexp.MustCompile(`\+[1-9][0-9 ().-]{5,18}[0-9]`)
)

// MaskText masks every email address and international phone number in free text.
func MaskText(s string) string {
	s = emailText.ReplaceAllStringFunc(s, MaskEmail)
	return phoneText.ReplaceAllStringFunc(s, MaskPhone)
}

// AuditFilter selects audit entries; empty fields select all. From is inclusive, To exclusive.
type AuditFilter struct {
	Actor      string
	Action     AuditAction
	TargetType string
	TargetID   string
	From, To   time.Time
}

// MaxAuditPage is the most entries one ListAudit call returns.
const MaxAuditPage = 500

// AuditLog is the append-only log of operator actions. It has no way to change or delete an
// entry: entries only expire, after AuditRetention. Adapters pass internal/notify/audittest.
//
// An export of the log reads it through ListAudit, page by page under the export's filter, and
// needs no method of its own; creating or downloading an export is itself an operator action,
// recorded like the others once its actions are added to AuditActions.
type AuditLog interface {
	// AppendAudit stores e (its Params sanitized with SanitizeAuditParams). Appending an id
	// already stored changes nothing and is no error, so a retried request does not write
	// twice. EINVALID if e fails Validate.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit pages the entries f selects, newest first (by At, then ID, descending), leaving
	// out those older than AuditRetention; cursor "" starts, next "" means the end. limit is
	// clamped to 1..MaxAuditPage. A cursor this log did not return is EINVALID naming "cursor".
	ListAudit(ctx context.Context, f AuditFilter, cursor string, limit int) (entries []AuditEntry, next string, err error)
}

// AuditCursor is the position after entry e in the newest-first order: both stores page with
// it, "<at as 20 digits of unix nanoseconds>#<id>".
func AuditCursor(at time.Time, id string) string { return fmt.Sprintf("%020d#%s", at.UnixNano(), id) }

// ParseAuditCursor reverses AuditCursor.
func ParseAuditCursor(c string) (time.Time, string, error) {
	ns, id, ok := strings.Cut(c, "#")
	if ok && len(ns) == 20 && id != "" && strings.Trim(ns, "0123456789") == "" {
		if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
			return time.Unix(0, n).UTC(), id, nil
		}
	}
	return time.Time{}, "", FieldError("cursor", "not an audit log cursor")
}

// ClampAuditLimit is limit within 1..MaxAuditPage (0 or less: 50).
func ClampAuditLimit(limit int) int {
	switch {
	case limit <= 0:
		return 50
	case limit > MaxAuditPage:
		return MaxAuditPage
	}
	return limit
}
