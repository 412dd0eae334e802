package ddb

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Audience items of the users table (see campaign.go for the design):
//
//	pk A#<app>     sk <seq, 20 digits>   a device in the app's audience index: seq, user_id,
//	                                     token, platform, locale
//	pk L#<list>    sk <seq, 20 digits>   a member of an uploaded list: seq, user_id
//	pk Q#A#<app>   sk Q                  the app's sequence: n, only ever ADDed to
//	pk Q#L#<list>  sk Q                  the list's sequence
const skSequence = "Q"

func appIndexPK(app string) string      { return "A#" + app }
func listPK(listID string) string       { return "L#" + listID }
func appSequencePK(app string) string   { return "Q#A#" + app }
func listSequencePK(list string) string { return "Q#L#" + list }
func seqSK(seq int64) string            { return fmt.Sprintf("%020d", seq) }

// audienceDeviceItem is one device in its app's audience index.
type audienceDeviceItem struct {
	PK       string `dynamo:"pk"`
	SK       string `dynamo:"sk"`
	Seq      int64  `dynamo:"seq"`
	UserID   string `dynamo:"user_id"`
	Token    string `dynamo:"token,omitempty"`
	Platform string `dynamo:"platform"`
	Locale   string `dynamo:"locale,omitempty"`
}

// listMemberItem is one member of an uploaded audience list.
type listMemberItem struct {
	PK     string `dynamo:"pk"`
	SK     string `dynamo:"sk"`
	Seq    int64  `dynamo:"seq"`
	UserID string `dynamo:"user_id"`
}

// allocateSeqs reserves n consecutive sequence numbers on the counter item pk and returns the
// last. An ADD is atomic, so two writers never get the same number; numbers reserved by a write
// that then fails are simply never used (gaps are harmless to keyset paging).
func (s *Store) allocateSeqs(ctx context.Context, pk string, n int) (int64, error) {
	e := newExpr()
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.Users),
		Key:                       key2(pk, skSequence),
		UpdateExpression:          aws.String(updateExpr(nil, []string{e.n("n") + " " + e.i(int64(n))}, nil)),
		ExpressionAttributeNames:  e.nameMap(),
		ExpressionAttributeValues: e.valueMap(),
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("allocate sequence: %w", err)
	}
	v, ok := out.Attributes["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("allocate sequence: no value returned")
	}
	last, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("allocate sequence: %w", err)
	}
	return last, nil
}

// indexPut is the transactional put of d's audience index entry at seq.
func (s *Store) indexPut(d notify.Device, seq int64) (types.TransactWriteItem, error) {
	item, err := dynamo.MarshalItem(audienceDeviceItem{PK: appIndexPK(d.App), SK: seqSK(seq), Seq: seq, UserID: d.UserID,
		Token: d.Token, Platform: string(d.Platform), Locale: d.Locale})
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Users), Item: item}}, nil
}

// indexDelete is the transactional delete of the index entry a token owner item points at, or
// nil if it points at none (an owner written before the index existed).
func (s *Store) indexDelete(owner tokenOwnerItem) *types.TransactWriteItem {
	if owner.AudienceSeq == 0 {
		return nil
	}
	return &types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.tables.Users),
		Key: key2(appIndexPK(owner.AudienceApp), seqSK(owner.AudienceSeq))}}
}

// ownerUnchanged is a condition that the token owner item is exactly as read: the same user and
// the same index entry.
func ownerUnchanged(e *expr, owner tokenOwnerItem) string {
	cond := e.n("user_id") + " = " + e.s(owner.UserID)
	if owner.AudienceSeq == 0 {
		return cond + " AND attribute_not_exists(" + e.n(attrAudienceSeq) + ")"
	}
	return cond + " AND " + e.n(attrAudienceSeq) + " = " + e.i(owner.AudienceSeq)
}

// Page implements notify.AudienceSource. A source is read with consistent Queries of its
// partition from sk > afterSeq in sk order; filters (platform, locale, marketing consent) are
// applied to each result page, and reading continues until limit members passed them or the
// partition ends, so a short page always means the source is exhausted.
func (s *Store) Page(ctx context.Context, a notify.Audience, source int, afterSeq int64, limit int) ([]notify.Member, error) {
	if source < 0 || source >= len(a.Sources) {
		return nil, wrapErr("audience page", notify.Errorf(notify.EINVALID, "audience source %d out of range (%d sources)", source, len(a.Sources)))
	}
	if limit <= 0 {
		return nil, wrapErr("audience page", notify.Errorf(notify.EINVALID, "page limit must be positive"))
	}
	seg := a.Sources[source]
	var pk string
	switch seg.Kind {
	case notify.AudienceAppDevices:
		pk = appIndexPK(seg.App)
	case notify.AudienceUserList:
		pk = listPK(seg.ListID)
	default:
		return nil, wrapErr("audience page", notify.Errorf(notify.EINVALID, "unknown audience source kind %q", seg.Kind))
	}
	op := "audience page of " + pk
	out := make([]notify.Member, 0, min(limit, 1000))
	after := afterSeq
	for len(out) < limit {
		want := limit - len(out)
		var items []audienceDeviceItem // list members decode into the same shape
		q := s.users().Get(attrPK, pk).Range(attrSK, dynamo.Greater, seqSK(after)).Consistent(true).Limit(want)
		if err := q.All(ctx, &items); err != nil {
			return nil, wrapErr(op, err)
		}
		if len(items) == 0 {
			break
		}
		after = items[len(items)-1].Seq
		kept, err := s.filterMembers(ctx, seg, items)
		if err != nil {
			return nil, wrapErr(op, err)
		}
		out = append(out, kept...)
		if len(items) < want {
			break
		}
	}
	return out, nil
}

// filterMembers keeps the items that pass seg's filters.
func (s *Store) filterMembers(ctx context.Context, seg notify.Segment, items []audienceDeviceItem) ([]notify.Member, error) {
	var consent map[string]notify.Preferences
	if seg.Kind == notify.AudienceAppDevices && seg.MarketingConsent {
		users := make([]string, len(items))
		for i, it := range items {
			users[i] = it.UserID
		}
		var err error
		if consent, err = s.GetPreferences(ctx, users); err != nil {
			return nil, err
		}
	}
	out := make([]notify.Member, 0, len(items))
	for _, it := range items {
		if seg.Kind == notify.AudienceAppDevices {
			if seg.Platform != "" && it.Platform != string(seg.Platform) {
				continue
			}
			if !notify.LocaleMatches(seg.Locale, it.Locale) {
				continue
			}
			if seg.MarketingConsent && consent[it.UserID].MarketingConsent == nil {
				continue
			}
		}
		m := notify.Member{Seq: it.Seq, UserID: it.UserID}
		if seg.Kind == notify.AudienceAppDevices {
			m.Token, m.Platform = it.Token, notify.Platform(it.Platform)
		}
		out = append(out, m)
	}
	return out, nil
}

// Remaining implements notify.AudienceSource from the source's sequence item: one read. It is
// exact for a list (its seqs are dense) and an upper bound for an app's devices, whose removed
// and filtered-out entries still hold their numbers.
func (s *Store) Remaining(ctx context.Context, a notify.Audience, source int, afterSeq int64) (int, error) {
	if source < 0 || source >= len(a.Sources) {
		return 0, wrapErr("audience remaining", notify.Errorf(notify.EINVALID, "audience source %d out of range (%d sources)", source, len(a.Sources)))
	}
	seg := a.Sources[source]
	var pk string
	switch seg.Kind {
	case notify.AudienceAppDevices:
		pk = appSequencePK(seg.App)
	case notify.AudienceUserList:
		pk = listSequencePK(seg.ListID)
	default:
		return 0, wrapErr("audience remaining", notify.Errorf(notify.EINVALID, "unknown audience source kind %q", seg.Kind))
	}
	var cur struct {
		N int64 `dynamo:"n"`
	}
	err := s.users().Get(attrPK, pk).Range(attrSK, dynamo.Equal, skSequence).One(ctx, &cur)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return 0, wrapErr("audience remaining of "+pk, err)
	}
	return int(max(cur.N-afterSeq, 0)), nil
}

// AppendAudienceList implements notify.CampaignStore: one ADD reserves len(userIDs) sequence
// numbers, then BatchWriteItem writes the members in order. Lists are uploaded before the
// campaigns that page them start; a crash midway leaves a prefix of the upload (appending again
// adds the rest after it).
func (s *Store) AppendAudienceList(ctx context.Context, listID string, userIDs []string) (int64, error) {
	op := "append audience list " + listID
	if listID == "" {
		return 0, wrapErr("append audience list", notify.Errorf(notify.EINVALID, "list id is required"))
	}
	if len(userIDs) == 0 {
		var cur struct {
			N int64 `dynamo:"n"`
		}
		err := s.users().Get(attrPK, listSequencePK(listID)).Range(attrSK, dynamo.Equal, skSequence).Consistent(true).One(ctx, &cur)
		if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
			return 0, wrapErr(op, err)
		}
		return cur.N, nil
	}
	// Filed in the registry first, so an erasure finds every list that may hold a user.
	if err := s.registerList(ctx, listID); err != nil {
		return 0, wrapErr(op, err)
	}
	last, err := s.allocateSeqs(ctx, listSequencePK(listID), len(userIDs))
	if err != nil {
		return 0, wrapErr(op, err)
	}
	first := last - int64(len(userIDs)) + 1
	for i, part := range batchesOf(userIDs, 25) {
		items := make([]any, len(part))
		for j, u := range part {
			seq := first + int64(i*25+j)
			items[j] = listMemberItem{PK: listPK(listID), SK: seqSK(seq), Seq: seq, UserID: u}
		}
		if _, err := s.users().Batch(attrPK, attrSK).Write().Put(items...).Run(ctx); err != nil {
			return 0, wrapErr(op, err)
		}
	}
	return last, nil
}
