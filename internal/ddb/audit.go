package ddb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

var _ notify.AuditLog = (*Store)(nil)

// AuditKeyPrefix starts the partition key of every audit log item in the notifications table,
// so a role that only appends to the log (the admin function's) can be granted PutItem on keys
// with this prefix alone (dynamodb:LeadingKeys).
const AuditKeyPrefix = "AUDIT#"

// The audit log lives in the notifications table (see the package doc): one partition per
// month of entries, sorted newest last by "<at as 20 digits>#<id>", and one id claim per entry
// that makes AppendAudit idempotent on the id whatever time a retry stamps.
const (
	auditPrefix   = AuditKeyPrefix
	auditIDPrefix = "AUDIT#ID#" // id claims; a month is AUDIT#<yyyy-mm>
	auditClaimSK  = "A"
	auditMonth    = "2006-01"
)

func auditMonthPK(t time.Time) string { return auditPrefix + t.UTC().Format(auditMonth) }

// auditItem is one entry in its month's partition; sk is notify.AuditCursor(at, id).
type auditItem struct {
	PK         string            `dynamo:"pk"`
	SK         string            `dynamo:"sk"`
	ID         string            `dynamo:"id"`
	At         int64             `dynamo:"at"` // unix nanos
	Actor      string            `dynamo:"actor"`
	ActorKind  string            `dynamo:"actor_kind"`
	Action     string            `dynamo:"action"`
	TargetType string            `dynamo:"target_type"`
	TargetID   string            `dynamo:"target_id"`
	Params     map[string]string `dynamo:"params"`
	Result     string            `dynamo:"result"`
	RequestID  string            `dynamo:"request_id"`
	TTL        int64             `dynamo:"ttl"` // epoch seconds: at + notify.AuditRetention
}

// auditClaim is an entry id's claim: where the entry is, and the same TTL.
type auditClaim struct {
	PK    string `dynamo:"pk"`
	SK    string `dynamo:"sk"`
	Entry string `dynamo:"entry"` // "<month pk> <sk>"
	TTL   int64  `dynamo:"ttl"`
}

// AppendAudit implements notify.AuditLog: one TransactWriteItems of the id claim and the entry,
// both conditioned on attribute_not_exists. A lost condition means the id was appended before
// (a retry), which is success: the stored entry stays as it was.
func (s *Store) AppendAudit(ctx context.Context, e notify.AuditEntry) error {
	if err := e.Validate(); err != nil {
		return wrapErr("append audit", err)
	}
	ttl := e.At.Add(notify.AuditRetention).Unix()
	item := auditItem{PK: auditMonthPK(e.At), SK: notify.AuditCursor(e.At, e.ID), ID: e.ID, At: e.At.UnixNano(),
		Actor: e.Actor, ActorKind: string(e.ActorKind), Action: string(e.Action), TargetType: e.TargetType,
		TargetID: e.TargetID, Params: notify.SanitizeAuditParams(e.Params), Result: e.Result, RequestID: e.RequestID, TTL: ttl}
	entry, err := dynamo.MarshalItem(item)
	if err != nil {
		return wrapErr("append audit", err)
	}
	claim, err := dynamo.MarshalItem(auditClaim{PK: auditIDPrefix + e.ID, SK: auditClaimSK, Entry: item.PK + " " + item.SK, TTL: ttl})
	if err != nil {
		return wrapErr("append audit", err)
	}
	put := func(it map[string]types.AttributeValue) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.tables.Notifications), Item: it,
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK},
		}}
	}
	items := []types.TransactWriteItem{put(claim), put(entry)}
	for attempt := 0; ; attempt++ {
		err = s.transact(ctx, items)
		if err == nil {
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && (reasonCode(reasons, 0) == "ConditionalCheckFailed" || reasonCode(reasons, 1) == "ConditionalCheckFailed") {
			return nil // appended before
		}
		if !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			return wrapErr("append audit "+e.ID, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return wrapErr("append audit "+e.ID, err)
		}
	}
}

// ListAudit implements notify.AuditLog: a consistent Query per month partition, newest month
// first, descending on sk between the retention horizon (or From) and To (or the cursor), with
// the field filters as a filter expression; it stops once the page is full.
func (s *Store) ListAudit(ctx context.Context, f notify.AuditFilter, cursor string, limit int) ([]notify.AuditEntry, string, error) {
	limit = notify.ClampAuditLimit(limit)
	now := s.now()
	lower := now.Add(-notify.AuditRetention)
	if f.From.After(lower) {
		lower = f.From
	}
	start, hi := now.Add(24*time.Hour), "~" // "~" sorts after every "<digits>#<id>"
	if !f.To.IsZero() {
		start, hi = f.To, fmt.Sprintf("%020d", f.To.UnixNano())
	}
	if cursor != "" {
		at, _, err := notify.ParseAuditCursor(cursor)
		if err != nil {
			return nil, "", wrapErr("list audit", err)
		}
		start, hi = at, cursor
	}
	var out []notify.AuditEntry
	last := monthStart(lower)
	for m := monthStart(start); !m.Before(last) && len(out) <= limit; m = m.AddDate(0, -1, 0) {
		lo := "0"
		if m.Equal(last) {
			lo = fmt.Sprintf("%020d", lower.UnixNano())
		}
		if lo > hi {
			break
		}
		want := limit + 1 - len(out)
		if hi == cursor {
			want++ // Between includes the cursor's own entry, dropped below
		}
		q := s.db.Table(s.tables.Notifications).Get(attrPK, auditMonthPK(m)).Range(attrSK, dynamo.Between, lo, hi).
			Order(dynamo.Descending).Consistent(true).Limit(want)
		for _, c := range []struct{ attr, v string }{
			{"actor", f.Actor}, {"action", string(f.Action)}, {"target_type", f.TargetType}, {"target_id", f.TargetID},
		} {
			if c.v != "" {
				q = q.Filter("$ = ?", c.attr, c.v)
			}
		}
		var items []auditItem
		if err := q.All(ctx, &items); err != nil {
			return nil, "", wrapErr("list audit", err)
		}
		for _, it := range items {
			if it.SK == cursor {
				continue
			}
			out = append(out, it.entry())
		}
		hi = "~"
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = notify.AuditCursor(out[limit-1].At, out[limit-1].ID)
	}
	return out, next, nil
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func (it auditItem) entry() notify.AuditEntry {
	p := it.Params
	if p == nil {
		p = map[string]string{}
	}
	return notify.AuditEntry{ID: it.ID, At: time.Unix(0, it.At).UTC(), Actor: it.Actor, ActorKind: notify.ActorKind(it.ActorKind),
		Action: notify.AuditAction(it.Action), TargetType: it.TargetType, TargetID: it.TargetID, Params: p,
		Result: it.Result, RequestID: it.RequestID}
}
