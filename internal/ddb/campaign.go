package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Campaigns and audiences on DynamoDB: notify.CampaignStore and notify.AudienceSource. No new
// table; the items live beside the ones they go with.
//
// notifications table:
//
//	pk N#<id>        sk CAMPAIGN            the campaign: state, cursor (JSON of the
//	                                        notify.CampaignCursor, compared and replaced whole),
//	                                        paused_until, error, created_at, updated_at,
//	                                        started_at, finished_at, doc (the rest as JSON)
//	pk CAMPAIGNS     sk <created_at 20d>#<id>  listing entry: id, state — ListCampaigns' index,
//	                                        written in the same transaction as every state change
//
// The campaign shares its notification's partition (pk N#<id>), so SaveCursor's transaction
// touches one item collection. The listing is one partition: campaigns are few and change state
// rarely (pages do not touch it).
//
// users table (audience.go): pk A#<app> sk <seq> is the app's device index, pk L#<list> sk <seq>
// an uploaded list, pk Q#A#<app> / Q#L#<list> their sequences. Seqs come from an atomic ADD on
// the sequence item, so they only grow and are never reused; the token owner item (pk T#<token>)
// carries its index entry's seq and app (aseq, aapp), so PutDevice, DeleteDevice and
// RemoveDeadDevice write the index entry in the same transaction as the device and owner items,
// conditioned on the owner item being as read: the index can never disagree with the devices. A
// re-registration in the same app keeps its seq (a campaign past it does not reach it again); a
// removed and re-added token, or one moving app, gets a new one, after every cursor that saw it.
// Paging is a consistent Query `sk > seq(after)` with Limit: keyset, never an offset. One index
// partition per app serves ~3,000 RCU — ~1.5 M index entries a second at ~100 bytes each —
// ample for a campaign page of 5,000 every few seconds; registrations (one ADD on the app's
// sequence item each) are well under its 1,000 WCU.
//
// SaveCursor is one TransactWriteItems (≤ 100 items): the campaign update conditioned on the
// cursor being exactly the expected one and the state not final; the notification's main item
// update conditioned on rcpt_count = expected.Members (rcpt_count += k, rcpt_starts extended);
// and one put per new recipient chunk (≤ 500 recipients, gzipped), named with the notification's
// recipient version after the chunks already there. GetRecipients reads them like any
// notification's. A page of 5,000 is 12 items; more than 98 chunks in one save is ETOOLARGE.

var (
	_ notify.CampaignStore  = (*Store)(nil)
	_ notify.AudienceSource = (*Store)(nil)
)

const (
	skCampaign        = "CAMPAIGN"
	campaignListingPK = "CAMPAIGNS"
)

// campaignItem is a campaign: pk N#<id>, sk CAMPAIGN.
type campaignItem struct {
	PK          string `dynamo:"pk"`
	SK          string `dynamo:"sk"`
	ID          string `dynamo:"id"`
	State       string `dynamo:"state"`
	Cursor      string `dynamo:"cursor"`
	PausedUntil *int64 `dynamo:"paused_until,omitempty"`
	Error       string `dynamo:"error,omitempty"`
	CreatedAt   int64  `dynamo:"created_at"`
	UpdatedAt   int64  `dynamo:"updated_at"`
	StartedAt   *int64 `dynamo:"started_at,omitempty"`
	FinishedAt  *int64 `dynamo:"finished_at,omitempty"`
	Doc         string `dynamo:"doc"`
}

// campaignListingItem is a campaign's entry in the listing partition.
type campaignListingItem struct {
	PK    string `dynamo:"pk"`
	SK    string `dynamo:"sk"`
	ID    string `dynamo:"id"`
	State string `dynamo:"state"`
}

func listingSK(createdAt int64, id string) string { return fmt.Sprintf("%020d#%s", createdAt, id) }

func encodeCursor(c notify.CampaignCursor) (string, error) {
	if c.Sources == nil {
		c.Sources = []notify.SourceCursor{}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return string(b), nil
}

func (it *campaignItem) campaign() (*notify.Campaign, error) {
	var c notify.Campaign
	if err := json.Unmarshal([]byte(it.Doc), &c); err != nil {
		return nil, fmt.Errorf("decode campaign: %w", err)
	}
	if err := json.Unmarshal([]byte(it.Cursor), &c.Cursor); err != nil {
		return nil, fmt.Errorf("decode campaign cursor: %w", err)
	}
	c.ID, c.State, c.Error = it.ID, notify.CampaignState(it.State), it.Error
	c.PausedUntil, c.StartedAt, c.FinishedAt = timePtr(it.PausedUntil), timePtr(it.StartedAt), timePtr(it.FinishedAt)
	c.CreatedAt, c.UpdatedAt = timeOf(it.CreatedAt), timeOf(it.UpdatedAt)
	c.Progress = notify.CampaignProgress{}
	return &c, nil
}

// CreateCampaign implements notify.CampaignStore: the campaign (attribute_not_exists), its
// notification's main item (attribute_not_exists) and the listing entry are one transaction.
func (s *Store) CreateCampaign(ctx context.Context, c *notify.Campaign) (*notify.Campaign, bool, error) {
	if c == nil || c.ID == "" {
		return nil, false, wrapErr("create campaign", notify.Errorf(notify.EINVALID, "campaign id is required"))
	}
	op := "create campaign " + c.ID
	cp := *c
	cp.CreatedAt, cp.UpdatedAt = s.nowOr(cp.CreatedAt), s.nowOr(cp.UpdatedAt)
	cp.StartedAt = cp.StartedOnCreate()
	if cp.SendAt != nil {
		t := cp.SendAt.UTC()
		cp.SendAt = &t
	}
	cp.Cursor = notify.CampaignCursor{Sources: make([]notify.SourceCursor, len(cp.Audience.Sources))}
	cp.Progress = notify.CampaignProgress{}

	n := cp.Notification
	n.ID, n.Service, n.IdempotencyKey = cp.ID, cp.Service, ""
	n.Recipients, n.RecipientCount = nil, 0
	n.Lane, n.Status = notify.LaneBulk, notify.StatusDispatching
	n.SendAt, n.Stats = cp.SendAt, notify.Stats{}
	n.CreatedAt, n.UpdatedAt = cp.CreatedAt, cp.UpdatedAt
	cp.Notification = n

	ndoc := n
	ndoc.Status = ""
	nbody, err := json.Marshal(&ndoc)
	if err != nil {
		return nil, false, wrapErr(op, fmt.Errorf("encode notification: %w", err))
	}
	doc := cp
	doc.Cursor, doc.Progress = notify.CampaignCursor{}, notify.CampaignProgress{}
	body, err := json.Marshal(&doc)
	if err != nil {
		return nil, false, wrapErr(op, fmt.Errorf("encode campaign: %w", err))
	}
	cursor, err := encodeCursor(cp.Cursor)
	if err != nil {
		return nil, false, wrapErr(op, err)
	}
	item := campaignItem{PK: notificationPK(cp.ID), SK: skCampaign, ID: cp.ID, State: string(cp.State), Cursor: cursor,
		PausedUntil: nanosPtr(cp.PausedUntil), Error: cp.Error, CreatedAt: nanos(cp.CreatedAt), UpdatedAt: nanos(cp.UpdatedAt),
		StartedAt: nanosPtr(cp.StartedAt), FinishedAt: nanosPtr(cp.FinishedAt), Doc: string(body)}
	main := notificationItem{PK: notificationPK(n.ID), SK: skNotification, ID: n.ID, Service: n.Service,
		Status: string(n.Status), CreatedAt: nanos(n.CreatedAt), UpdatedAt: nanos(n.UpdatedAt), Doc: string(nbody),
		RecipientsVersion: randomToken()[:12]}
	var tx []types.TransactWriteItem
	for _, it := range []any{item, main} {
		put, err := s.putIfAbsent(s.tables.Notifications, it)
		if err != nil {
			return nil, false, wrapErr(op, err)
		}
		tx = append(tx, put)
	}
	listing, err := dynamo.MarshalItem(campaignListingItem{PK: campaignListingPK, SK: listingSK(item.CreatedAt, cp.ID),
		ID: cp.ID, State: item.State})
	if err != nil {
		return nil, false, wrapErr(op, err)
	}
	tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Notifications), Item: listing}})
	for attempt := 0; ; attempt++ {
		err = s.transact(ctx, tx)
		if err == nil {
			return &cp, true, nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			stored, err := s.readCampaign(ctx, cp.ID)
			if err != nil {
				return nil, false, wrapErr(op, err)
			}
			return stored, false, nil
		}
		if canceled && reasonCode(reasons, 1) == "ConditionalCheckFailed" {
			return nil, false, wrapErr(op, notify.Errorf(notify.ECONFLICT, "a notification with id %s exists and is not a campaign", cp.ID))
		}
		if !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			return nil, false, wrapErr(op, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return nil, false, wrapErr(op, err)
		}
	}
}

// readCampaignItem reads the campaign item consistently; ENOTFOUND if there is none.
func (s *Store) readCampaignItem(ctx context.Context, id string) (*campaignItem, error) {
	var it campaignItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skCampaign).
		Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil, notify.Errorf(notify.ENOTFOUND, "campaign not found")
	}
	if err != nil {
		return nil, fmt.Errorf("read campaign: %w", err)
	}
	return &it, nil
}

func (s *Store) readCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	it, err := s.readCampaignItem(ctx, id)
	if err != nil {
		return nil, err
	}
	return it.campaign()
}

// GetCampaign implements notify.CampaignStore: the campaign item, then its notification (main
// item and counter shards) for Progress.
func (s *Store) GetCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	op := "get campaign " + id
	c, err := s.readCampaign(ctx, id)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	n, err := s.readNotification(ctx, id)
	if err != nil {
		return nil, wrapErr(op, fmt.Errorf("notification: %w", err))
	}
	unpaged, err := notify.Unpaged(ctx, s, c.Audience, c.Cursor)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	c.Progress = notify.ProgressOf(c.Cursor, n.Stats, unpaged)
	return c, nil
}

// LoadCampaign implements notify.CampaignStore: the campaign item alone, one consistent read.
func (s *Store) LoadCampaign(ctx context.Context, id string) (*notify.Campaign, error) {
	c, err := s.readCampaign(ctx, id)
	if err != nil {
		return nil, wrapErr("load campaign "+id, err)
	}
	return c, nil
}

// ListCampaigns implements notify.CampaignStore: a consistent Query of the listing partition
// (oldest first), then a consistent BatchGetItem of the campaigns, whose state is the truth.
func (s *Store) ListCampaigns(ctx context.Context, states ...notify.CampaignState) ([]*notify.Campaign, error) {
	const op = "list campaigns"
	want := func(st string) bool {
		if len(states) == 0 {
			return true
		}
		for _, k := range states {
			if string(k) == st {
				return true
			}
		}
		return false
	}
	var entries []campaignListingItem
	if err := s.db.Table(s.tables.Notifications).Get(attrPK, campaignListingPK).Consistent(true).All(ctx, &entries); err != nil {
		return nil, wrapErr(op, err)
	}
	var keys []dynamo.Keyed
	order := map[string]int{}
	for _, e := range entries {
		if want(e.State) {
			order[e.ID] = len(keys)
			keys = append(keys, dynamo.Keys{notificationPK(e.ID), skCampaign})
		}
	}
	out := []*notify.Campaign{}
	if len(keys) == 0 {
		return out, nil
	}
	var items []campaignItem
	err := s.db.Table(s.tables.Notifications).Batch(attrPK, attrSK).Get(keys...).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, wrapErr(op, err)
	}
	sort.Slice(items, func(i, j int) bool { return order[items[i].ID] < order[items[j].ID] })
	for i := range items {
		if !want(items[i].State) {
			continue
		}
		c, err := items[i].campaign()
		if err != nil {
			return nil, wrapErr(op, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// SaveCursor implements notify.CampaignStore in one TransactWriteItems (see the comment at the
// top of this file).
func (s *Store) SaveCursor(ctx context.Context, id string, expected, next notify.CampaignCursor, recipients []notify.Recipient) error {
	op := "save cursor of " + id
	if next.Members != expected.Members+len(recipients) {
		return wrapErr(op, notify.Errorf(notify.EINVALID, "next.members %d != expected.members %d + %d recipients",
			next.Members, expected.Members, len(recipients)))
	}
	if len(next.Sources) != len(expected.Sources) {
		return wrapErr(op, notify.Errorf(notify.EINVALID, "next has %d sources, expected %d", len(next.Sources), len(expected.Sources)))
	}
	from, err := encodeCursor(expected)
	if err != nil {
		return wrapErr(op, err)
	}
	to, err := encodeCursor(next)
	if err != nil {
		return wrapErr(op, err)
	}
	chunks, err := encodeRecipients(recipients)
	if err != nil {
		return wrapErr(op, err)
	}
	if len(chunks) > txMaxItems-2 {
		return wrapErr(op, notify.Errorf(notify.ETOOLARGE, "%d recipients are %d chunks, more than one save holds", len(recipients), len(chunks)))
	}
	now := nanos(s.now())

	e := newExpr()
	finals := []string{e.s(string(notify.CampaignCompleted)), e.s(string(notify.CampaignCanceled)), e.s(string(notify.CampaignFailed))}
	tx := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(s.tables.Notifications),
		Key:       key2(notificationPK(id), skCampaign),
		UpdateExpression: aws.String(updateExpr([]string{e.n("cursor") + " = " + e.s(to),
			e.n("updated_at") + " = " + e.i(now)}, nil, nil)),
		ConditionExpression: aws.String("attribute_exists(" + e.n(attrPK) + ") AND " + e.n("cursor") + " = " + e.s(from) +
			" AND NOT " + e.n("state") + " IN (" + strings.Join(finals, ", ") + ")"),
		ExpressionAttributeNames:            e.nameMap(),
		ExpressionAttributeValues:           e.valueMap(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	if len(chunks) > 0 {
		var main notificationItem
		err := s.db.Table(s.tables.Notifications).Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).
			Project("rcpt_count", "rcpt_ver", "rcpt_starts").Consistent(true).One(ctx, &main)
		if errors.Is(err, dynamo.ErrNotFound) {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "campaign not found"))
		}
		if err != nil {
			return wrapErr(op, err)
		}
		if main.RecipientCount != expected.Members {
			return wrapErr(op, notify.Errorf(notify.ECONFLICT, "notification has %d recipients, cursor expects %d",
				main.RecipientCount, expected.Members))
		}
		version := main.RecipientsVersion
		if version == "" {
			return wrapErr(op, notify.Errorf(notify.ECONFLICT, "notification %s is not a campaign's", id))
		}
		starts := make([]types.AttributeValue, len(chunks))
		start := expected.Members
		for k, ch := range chunks {
			starts[k] = &types.AttributeValueMemberN{Value: strconv.Itoa(start)}
			item, err := dynamo.MarshalItem(recipientsItem{PK: notificationPK(id), SK: recipientsSK(version, len(main.RecipientStarts)+k),
				Count: ch.count, Data: ch.data})
			if err != nil {
				return wrapErr(op, err)
			}
			tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Notifications), Item: item,
				ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK}}})
			start += ch.count
		}
		ne := newExpr()
		tx = append(tx, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.tables.Notifications),
			Key:       key2(notificationPK(id), skNotification),
			UpdateExpression: aws.String(updateExpr([]string{
				ne.n("rcpt_count") + " = " + ne.i(int64(next.Members)),
				ne.n("rcpt_starts") + " = list_append(if_not_exists(" + ne.n("rcpt_starts") + ", " +
					ne.v(&types.AttributeValueMemberL{Value: []types.AttributeValue{}}) + "), " +
					ne.v(&types.AttributeValueMemberL{Value: starts}) + ")",
				ne.n("updated_at") + " = " + ne.i(now),
			}, nil, nil)),
			ConditionExpression:       aws.String(ne.n("rcpt_count") + " = " + ne.i(int64(expected.Members))),
			ExpressionAttributeNames:  ne.nameMap(),
			ExpressionAttributeValues: ne.valueMap(),
		}})
	}
	for attempt := 0; ; attempt++ {
		err = s.transact(ctx, tx)
		if err == nil {
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			if len(reasons) > 0 && reasons[0].Item == nil {
				return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "campaign not found"))
			}
			return wrapErr(op, notify.Errorf(notify.ECONFLICT, "cursor moved or campaign %s", stringAttr(reasons[0].Item, "state")))
		}
		if canceled {
			for i := 1; i < len(reasons); i++ {
				if reasonCode(reasons, i) == "ConditionalCheckFailed" {
					return wrapErr(op, notify.Errorf(notify.ECONFLICT, "recipients moved concurrently"))
				}
			}
		}
		if !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			return wrapErr(op, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return wrapErr(op, err)
		}
	}
}

// SetCampaignState implements notify.CampaignStore: it reads the campaign, then updates it and
// its listing entry in one transaction conditioned on the state as read (which must be in
// from); a state changed in between is read again.
// docWithSendAt is a campaign doc with its send_at replaced.
func docWithSendAt(doc string, at time.Time) (string, error) {
	var d map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return "", fmt.Errorf("decode campaign: %w", err)
	}
	raw, err := json.Marshal(at.UTC())
	if err != nil {
		return "", err
	}
	d["send_at"] = raw
	b, err := json.Marshal(d)
	return string(b), err
}

func (s *Store) SetCampaignState(ctx context.Context, id string, t notify.CampaignTransition, from ...notify.CampaignState) error {
	op := fmt.Sprintf("set campaign %s state %s", id, t.To)
	at := nanos(s.nowOr(t.At))
	for attempt := 0; ; attempt++ {
		it, err := s.readCampaignItem(ctx, id)
		if err != nil {
			return wrapErr(op, err)
		}
		if len(from) > 0 && !campaignStateIn(notify.CampaignState(it.State), from) {
			return wrapErr(op, notify.Errorf(notify.ECONFLICT, "campaign is %s, not %v", it.State, from))
		}
		e := newExpr()
		set := []string{e.n("state") + " = " + e.s(string(t.To)), e.n("updated_at") + " = " + e.i(at)}
		var remove []string
		if t.To == notify.CampaignPausedQuietHours && t.PausedUntil != nil {
			set = append(set, e.n("paused_until")+" = "+e.i(t.PausedUntil.UnixNano()))
		} else {
			remove = append(remove, e.n("paused_until"))
		}
		if t.To == notify.CampaignFailed && t.Error != "" {
			set = append(set, e.n("error")+" = "+e.s(t.Error))
		} else {
			remove = append(remove, e.n("error"))
		}
		if t.To == notify.CampaignRunning {
			set = append(set, e.n("started_at")+" = if_not_exists("+e.n("started_at")+", "+e.i(at)+")")
		}
		if t.To.Final() {
			set = append(set, e.n("finished_at")+" = "+e.i(at))
		}
		if t.SendAt != nil {
			doc, err := docWithSendAt(it.Doc, *t.SendAt)
			if err != nil {
				return wrapErr(op, err)
			}
			set = append(set, e.n("doc")+" = "+e.s(doc))
		}
		le := newExpr()
		tx := []types.TransactWriteItem{
			{Update: &types.Update{
				TableName:                 aws.String(s.tables.Notifications),
				Key:                       key2(notificationPK(id), skCampaign),
				UpdateExpression:          aws.String(updateExpr(set, nil, remove)),
				ConditionExpression:       aws.String(e.n("state") + " = " + e.s(it.State)),
				ExpressionAttributeNames:  e.nameMap(),
				ExpressionAttributeValues: e.valueMap(),
			}},
			{Update: &types.Update{
				TableName:                 aws.String(s.tables.Notifications),
				Key:                       key2(campaignListingPK, listingSK(it.CreatedAt, id)),
				UpdateExpression:          aws.String(updateExpr([]string{le.n("state") + " = " + le.s(string(t.To)), le.n("id") + " = " + le.s(id)}, nil, nil)),
				ExpressionAttributeNames:  le.nameMap(),
				ExpressionAttributeValues: le.valueMap(),
			}},
		}
		err = s.transact(ctx, tx)
		if err == nil {
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" && attempt+1 < txAttempts {
			continue // changed since read: decide again
		}
		if !worthRetry(err, reasons, canceled) || attempt+1 >= txAttempts {
			return wrapErr(op, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return wrapErr(op, err)
		}
	}
}

func campaignStateIn(s notify.CampaignState, set []notify.CampaignState) bool {
	for _, k := range set {
		if s == k {
			return true
		}
	}
	return false
}
