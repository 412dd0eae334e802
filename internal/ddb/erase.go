package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Erasures (notify.ErasureStore), in the notifications table:
//
//	pk E#<user hash>   sk E                 the erasure: status, the user id while it runs, its
//	                                        step and cursor, what was removed; ttl once finished
//	pk ERASED          sk <nanos, 20 digits>#<user hash>
//	                                        its tombstone, read by every stage through
//	                                        notify.Tombstones: one Query of this partition
//	                                        from ErasureWindow ago; ttl at its end
//
// and the registry of uploaded audience lists, in the users table (pk LISTS, sk <list id>), so
// an erasure finds the lists a user may be a member of without a scan.
const (
	skErasure       = "E"
	pkTombstones    = "ERASED"
	pkListRegistry  = "LISTS"
	eraseQueryLimit = 100
)

func erasurePK(hash string) string { return "E#" + hash }

func tombstoneSK(at time.Time, hash string) string {
	return fmt.Sprintf("%020d#%s", at.UnixNano(), hash)
}

type erasureItem struct {
	PK     string `dynamo:"pk"`
	SK     string `dynamo:"sk"`
	Status string `dynamo:"status"`
	UserID string `dynamo:"user_id,omitempty"`
	Step   int    `dynamo:"step"`
	Cursor string `dynamo:"cursor,omitempty"`
	Doc    string `dynamo:"doc"` // notify.Erasure as JSON
	TTL    int64  `dynamo:"ttl,omitempty"`
}

type tombstoneItem struct {
	PK  string `dynamo:"pk"`
	SK  string `dynamo:"sk"`
	TTL int64  `dynamo:"ttl"`
}

var _ notify.ErasureStore = (*Store)(nil)

func (s *Store) erasureItem(e notify.Erasure) (erasureItem, error) {
	e.RequestedAt = e.RequestedAt.UTC()
	doc, err := json.Marshal(e)
	if err != nil {
		return erasureItem{}, err
	}
	it := erasureItem{PK: erasurePK(e.UserHash), SK: skErasure, Status: e.Status, UserID: e.UserID, Step: e.Step, Cursor: e.Cursor, Doc: string(doc)}
	if e.Status == notify.ErasureFinished {
		it.UserID, it.Cursor = "", ""
		end := e.RequestedAt
		if e.FinishedAt != nil {
			end = *e.FinishedAt
		}
		it.TTL = ttlOf(end.Add(notify.ErasureRetention))
	}
	return it, nil
}

func (it erasureItem) erasure() (notify.Erasure, error) {
	var e notify.Erasure
	if err := json.Unmarshal([]byte(it.Doc), &e); err != nil {
		return e, fmt.Errorf("decode erasure: %w", err)
	}
	e.Status, e.UserID, e.Step, e.Cursor = it.Status, it.UserID, it.Step, it.Cursor
	return e, nil
}

// BeginErasure implements notify.ErasureStore: the erasure and its tombstone in one
// transaction, on the condition that no erasure of the user is running.
func (s *Store) BeginErasure(ctx context.Context, e notify.Erasure) (notify.Erasure, bool, error) {
	op := "begin erasure"
	if e.UserHash == "" || e.UserID == "" || e.RequestedAt.IsZero() {
		return e, false, wrapErr(op, notify.Errorf(notify.EINVALID, "erasure: user hash, user id and requested_at are required"))
	}
	e.Status, e.FinishedAt = notify.ErasureRunning, nil
	it, err := s.erasureItem(e)
	if err != nil {
		return e, false, wrapErr(op, err)
	}
	t := s.db.Table(s.tables.Notifications)
	tomb := tombstoneItem{PK: pkTombstones, SK: tombstoneSK(e.RequestedAt, e.UserHash), TTL: ttlOf(e.RequestedAt.Add(notify.ErasureWindow))}
	err = s.db.WriteTx().
		Put(t.Put(it).If("attribute_not_exists($) OR $ <> ?", attrPK, "status", notify.ErasureRunning)).
		Put(t.Put(tomb)).Run(ctx)
	if err == nil {
		return e, true, nil
	}
	if reasons, canceled := cancelReasons(err); canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
		had, gerr := s.GetErasure(ctx, e.UserHash)
		return had, false, gerr
	}
	return e, false, wrapErr(op, err)
}

// SaveErasure implements notify.ErasureStore.
func (s *Store) SaveErasure(ctx context.Context, e notify.Erasure) error {
	op := "save erasure"
	it, err := s.erasureItem(e)
	if err != nil {
		return wrapErr(op, err)
	}
	err = s.db.Table(s.tables.Notifications).Put(it).If("attribute_exists($) AND $ = ?", attrPK, "status", notify.ErasureRunning).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		if _, gerr := s.GetErasure(ctx, e.UserHash); gerr != nil {
			return gerr
		}
		return wrapErr(op, notify.Errorf(notify.ECONFLICT, "erasure %s has finished", e.UserHash))
	}
	return wrapErr(op, err)
}

// GetErasure implements notify.ErasureStore.
func (s *Store) GetErasure(ctx context.Context, hash string) (notify.Erasure, error) {
	op := "get erasure"
	var it erasureItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, erasurePK(hash)).Range(attrSK, dynamo.Equal, skErasure).
		Consistent(true).One(ctx, &it)
	if errors.Is(err, dynamo.ErrNotFound) {
		return notify.Erasure{}, wrapErr(op, notify.Errorf(notify.ENOTFOUND, "no erasure of %s", hash))
	}
	if err != nil {
		return notify.Erasure{}, wrapErr(op, err)
	}
	e, err := it.erasure()
	return e, wrapErr(op, err)
}

// ErasedSince implements notify.ErasureStore: one Query of the tombstones' partition, keys only.
func (s *Store) ErasedSince(ctx context.Context, since time.Time) (map[string]time.Time, error) {
	var items []tombstoneItem
	err := s.db.Table(s.tables.Notifications).Get(attrPK, pkTombstones).
		Range(attrSK, dynamo.GreaterOrEqual, fmt.Sprintf("%020d", max(since.UnixNano(), 0))).
		Project(attrPK, attrSK).All(ctx, &items)
	if err != nil {
		return nil, wrapErr("erased since", err)
	}
	out := make(map[string]time.Time, len(items))
	for _, it := range items {
		at, hash, ok := strings.Cut(it.SK, "#")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			continue
		}
		if t := time.Unix(0, n).UTC(); t.After(out[hash]) {
			out[hash] = t
		}
	}
	return out, nil
}

// EraseStep implements notify.ErasureStore. Each call reads and changes at most
// eraseQueryLimit items. The delivery records it rewrites are those of the notifications in
// the recipient index (EraseSent): a store that keeps no index has no way to find the others
// short of a scan, and leaves them to their retention (docs/design/security.md, "Erasure").
func (s *Store) EraseStep(ctx context.Context, userID, step, cursor string) (int, string, error) {
	op := "erase " + step
	if userID == "" {
		return 0, "", wrapErr(op, notify.Errorf(notify.EINVALID, "erase: user id is required"))
	}
	var (
		n    int
		next string
		err  error
	)
	switch step {
	case notify.EraseSuppressions:
		n, err = s.eraseSuppressions(ctx, userID)
	case notify.EraseContact:
		n, err = s.eraseContact(ctx, userID)
	case notify.EraseDevices:
		n, err = s.eraseDevices(ctx, userID)
	case notify.ErasePreferences:
		n, err = s.deleteUserItem(ctx, userID, skPreferences)
	case notify.EraseInbox:
		n, next, err = s.eraseInbox(ctx, userID)
	case notify.EraseLists:
		n, next, err = s.eraseListMembers(ctx, userID, cursor)
	case notify.EraseSent:
		n, next, err = s.eraseSent(ctx, userID)
	case notify.EraseDeliveries:
		// Done with EraseSent: see above.
	default:
		return 0, "", wrapErr(op, notify.Errorf(notify.EINVALID, "erase: unknown step %q", step))
	}
	if err != nil {
		return 0, "", wrapErr(op, err)
	}
	return n, next, nil
}

func (s *Store) eraseSuppressions(ctx context.Context, userID string) (int, error) {
	contacts, err := s.GetContacts(ctx, []string{userID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range notify.ContactKeys(contacts[userID]) {
		err := s.db.Table(s.tables.Suppressions).Update(attrSuppressionKey, k).Remove("masked").
			If("attribute_exists($) AND attribute_exists($)", attrSuppressionKey, "masked").Run(ctx)
		if dynamo.IsCondCheckFailed(err) {
			continue // not suppressed, or kept by its hash already
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// eraseContact removes the owners of the contact's addresses that are still the user's, then
// the contact, which names them: a crash in between finds them again.
func (s *Store) eraseContact(ctx context.Context, userID string) (int, error) {
	var c contactItem
	err := s.users().Get(attrPK, userPK(userID)).Range(attrSK, dynamo.Equal, skContact).Consistent(true).One(ctx, &c)
	if errors.Is(err, dynamo.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, k := range c.OwnerKeys {
		err := s.users().Delete(attrPK, contactOwnerPK(k)).Range(attrSK, skContactOwner).If("$ = ?", "user_id", userID).Run(ctx)
		if err != nil && !dynamo.IsCondCheckFailed(err) {
			return 0, err
		}
	}
	return s.deleteUserItem(ctx, userID, skContact)
}

func (s *Store) deleteUserItem(ctx context.Context, userID, sk string) (int, error) {
	err := s.users().Delete(attrPK, userPK(userID)).Range(attrSK, sk).If("attribute_exists($)", attrPK).Run(ctx)
	if dynamo.IsCondCheckFailed(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// eraseDevices removes each device as DeleteDevice does: with its token's owner and its entry in
// the app's audience index.
func (s *Store) eraseDevices(ctx context.Context, userID string) (int, error) {
	devs, err := s.ListDevices(ctx, []string{userID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range devs[userID] {
		err := s.DeleteDevice(ctx, userID, d.Token)
		if notify.IsCode(err, notify.ENOTFOUND) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// eraseInbox deletes up to a page of the user's inbox partition: own items and broadcast
// markers alike.
func (s *Store) eraseInbox(ctx context.Context, userID string) (int, string, error) {
	var keys []struct {
		User string `dynamo:"user_id"`
		SK   string `dynamo:"sk"`
	}
	err := s.inbox().Get(attrInboxUser, userID).Project(attrInboxUser, attrInboxOrder).Consistent(true).
		Limit(eraseQueryLimit).All(ctx, &keys)
	if err != nil || len(keys) == 0 {
		return 0, "", err
	}
	del := make([]dynamo.Keyed, len(keys))
	for i, k := range keys {
		del[i] = dynamo.Keys{k.User, k.SK}
	}
	if _, err := s.inbox().Batch(attrInboxUser, attrInboxOrder).Write().Delete(del...).Run(ctx); err != nil {
		return 0, "", err
	}
	next := ""
	if len(keys) == eraseQueryLimit {
		next = "more"
	}
	return len(keys), next, nil
}

// registerList files listID in the list registry (AppendAudienceList).
func (s *Store) registerList(ctx context.Context, listID string) error {
	return s.users().Put(struct {
		PK string `dynamo:"pk"`
		SK string `dynamo:"sk"`
	}{pkListRegistry, listID}).Run(ctx)
}

// eraseListMembers walks the registered lists from cursor (the index of the list in the
// registry's order, then the last member key read there) and deletes the user's memberships:
// each call reads one page of one list.
func (s *Store) eraseListMembers(ctx context.Context, userID, cursor string) (int, string, error) {
	var lists []struct {
		SK string `dynamo:"sk"`
	}
	if err := s.users().Get(attrPK, pkListRegistry).Project(attrSK).Consistent(true).All(ctx, &lists); err != nil {
		return 0, "", err
	}
	idx, after := 0, ""
	if cursor != "" {
		i, rest, _ := strings.Cut(cursor, "|")
		k, err := strconv.Atoi(i)
		if err != nil || k < 0 {
			return 0, "", notify.Errorf(notify.EINVALID, "erase list members: bad cursor %q", cursor)
		}
		idx, after = k, rest
	}
	if idx >= len(lists) {
		return 0, "", nil
	}
	list := lists[idx].SK
	q := s.users().Get(attrPK, listPK(list)).Filter("$ = ?", "user_id", userID).Consistent(true).
		SearchLimit(1000).RequestLimit(1)
	if after != "" {
		q = q.Range(attrSK, dynamo.Greater, after)
	}
	var members []listMemberItem
	iter := q.Iter()
	var m listMemberItem
	for iter.Next(ctx, &m) {
		members = append(members, m)
	}
	if err := iter.Err(); err != nil {
		return 0, "", err
	}
	last := ""
	if lek, err := iter.LastEvaluatedKey(ctx); err == nil && lek != nil {
		if v, ok := lek[attrSK].(*types.AttributeValueMemberS); ok {
			last = v.Value
		}
	}
	if len(members) > 0 {
		del := make([]dynamo.Keyed, len(members))
		for i, m := range members {
			del[i] = dynamo.Keys{m.PK, m.SK}
		}
		if _, err := s.users().Batch(attrPK, attrSK).Write().Delete(del...).Run(ctx); err != nil {
			return 0, "", err
		}
	}
	next := strconv.Itoa(idx+1) + "|"
	if last != "" {
		next = strconv.Itoa(idx) + "|" + last
	}
	if idx+1 >= len(lists) && last == "" {
		next = ""
	}
	return len(members), next, nil
}

// eraseSent rewrites up to a page of the notifications to the user alone, found through the
// recipient index, and their delivery records: the user's hash for their id, no content, no
// addresses. Each rewritten notification is filed under the hash, so the next call finds the
// next ones.
func (s *Store) eraseSent(ctx context.Context, userID string) (int, string, error) {
	if !s.recipientIndex {
		return 0, "", nil
	}
	var keys []struct {
		PK string `dynamo:"pk"`
	}
	err := s.db.Table(s.tables.Notifications).Get(attrRecipientUser, userID).Index(indexByUser).
		Project(attrPK).Limit(eraseQueryLimit).All(ctx, &keys)
	if err != nil {
		return 0, "", err
	}
	for _, k := range keys {
		if err := s.eraseNotification(ctx, strings.TrimPrefix(k.PK, "N#"), userID); err != nil {
			return 0, "", err
		}
	}
	next := ""
	if len(keys) == eraseQueryLimit {
		next = "more"
	}
	return len(keys), next, nil
}

func (s *Store) eraseNotification(ctx context.Context, id, userID string) error {
	// The deliveries first: the notification stays under the user until they are done.
	hash := notify.UserHash(userID)
	for cursor := ""; ; {
		ds, next, err := s.ListDeliveries(ctx, id, cursor, 1000)
		if err != nil {
			return fmt.Errorf("deliveries of %s: %w", id, err)
		}
		for _, d := range ds {
			if d.UserID != userID && d.AddressMasked == "" && d.Detail == "" {
				continue
			}
			notify.EraseDelivery(&d)
			u := s.db.Table(s.tables.Deliveries).Update(attrDeliveryID, d.ID).Set("user_id", hash).Remove("address_masked", "detail")
			if h := historyAttr(d.History); h != "" {
				u = u.Set("hist", h)
			}
			if err := u.If("attribute_exists($)", attrDeliveryID).Run(ctx); err != nil && !dynamo.IsCondCheckFailed(err) {
				return fmt.Errorf("delivery %s: %w", d.ID, err)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}

	t := s.db.Table(s.tables.Notifications)
	var main notificationItem
	err := t.Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.Equal, skNotification).Consistent(true).One(ctx, &main)
	if errors.Is(err, dynamo.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var n notify.Notification
	if err := json.Unmarshal([]byte(main.Doc), &n); err != nil {
		return fmt.Errorf("decode notification %s: %w", id, err)
	}
	if main.Express != "" {
		n.Express = &notify.Express{}
		if err := json.Unmarshal([]byte(main.Express), n.Express); err != nil {
			return fmt.Errorf("decode express deliveries of %s: %w", id, err)
		}
	}
	if main.Inline != "" {
		if n.Recipients, err = notify.DecodeRecipients([]byte(main.Inline), nil); err != nil {
			return fmt.Errorf("decode recipients of %s: %w", id, err)
		}
	}
	notify.EraseNotification(&n, userID)
	update := t.Update(attrPK, notificationPK(id)).Range(attrSK, skNotification).Set(attrRecipientUser, hash)
	if main.Inline != "" {
		update = update.Set("rcpt", string(notify.AppendRecipients(nil, n.Recipients)))
	}
	if n.Express != nil {
		x, err := json.Marshal(n.Express)
		if err != nil {
			return err
		}
		update = update.Set("x", string(x))
	}
	n.Recipients, n.Express = nil, nil
	doc, err := json.Marshal(&n)
	if err != nil {
		return err
	}
	// The recipient chunks (one, for a notification to one user) before the main item.
	if main.Inline == "" && len(main.RecipientStarts) > 0 {
		var rows []recipientsItem
		err := t.Get(attrPK, notificationPK(id)).Range(attrSK, dynamo.BeginsWith, skRecipients+main.RecipientsVersion+"#").
			Consistent(true).All(ctx, &rows)
		if err != nil {
			return err
		}
		for _, r := range rows {
			rs, err := gunzipRecipients(r.Data)
			if err != nil {
				return err
			}
			if notify.EraseRecipients(rs, userID) == 0 {
				continue
			}
			data, err := gzipJSON(rs)
			if err != nil {
				return err
			}
			if err := t.Update(attrPK, r.PK).Range(attrSK, r.SK).Set("data", data).Run(ctx); err != nil {
				return err
			}
		}
	}
	return update.Set("doc", string(doc)).Run(ctx)
}
