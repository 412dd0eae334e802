package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"herald/internal/notify"
)

// Keys of the users table.
const (
	skContact     = "C"
	skPreferences = "P"
	skDevicePfx   = "D#" // D#<token>
	skTokenOwner  = "T"
)

func userPK(userID string) string  { return "U#" + userID }
func tokenPK(token string) string  { return "T#" + token }
func deviceSK(token string) string { return skDevicePfx + token }

// deviceItem is one push registration: pk U#<user>, sk D#<token>.
type deviceItem struct {
	PK          string `dynamo:"pk"`
	SK          string `dynamo:"sk"`
	UserID      string `dynamo:"user_id"`
	Token       string `dynamo:"token"`
	Platform    string `dynamo:"platform"`
	App         string `dynamo:"app"`
	Environment string `dynamo:"environment"`
	Locale      string `dynamo:"locale,omitempty"`
	TimeZone    string `dynamo:"time_zone,omitempty"`
	UpdatedAt   int64  `dynamo:"updated_at"`
}

// tokenOwnerItem says which user a token is registered to: pk T#<token>, sk T. It is the
// strongly consistent lookup by token, and the item whose condition makes a token belong to one
// user at a time.
type tokenOwnerItem struct {
	PK        string `dynamo:"pk"`
	SK        string `dynamo:"sk"`
	UserID    string `dynamo:"user_id"`
	UpdatedAt int64  `dynamo:"updated_at"`
	// AudienceSeq and AudienceApp name the token's entry in the app's audience index (pk
	// A#<app>, sk seq; see campaign.go), so every write that moves or removes the token moves or
	// removes that entry in the same transaction. Zero for an owner written before the index.
	AudienceSeq int64  `dynamo:"aseq,omitempty"`
	AudienceApp string `dynamo:"aapp,omitempty"`
}

const attrAudienceSeq = "aseq"

// contactItem is a user's contact, sealed whole: pk U#<user>, sk C.
type contactItem struct {
	PK     string `dynamo:"pk"`
	SK     string `dynamo:"sk"`
	Sealed []byte `dynamo:"sealed"`
	// OwnerKeys are the AddressKeys of the contact's email and phone, whose owner items
	// (contactOwnerItem) name this user: what the next change of the contact takes back.
	OwnerKeys []string `dynamo:"okeys,set,omitempty"`
}

// contactOwnerItem names the user whose contact holds an address: pk CO#<address key>, sk CO
// (notify.AddressFinder). Contacts are sealed, so this hash is the only way from an address to
// its user.
type contactOwnerItem struct {
	PK     string `dynamo:"pk"`
	SK     string `dynamo:"sk"`
	UserID string `dynamo:"user_id"`
}

const skContactOwner = "CO"

func contactOwnerPK(addressKey string) string { return "CO#" + addressKey }

// preferencesItem is a user's preferences: pk U#<user>, sk P. Consent times are attributes of
// their own, so "who consented when" can be audited with a Scan or an export.
type preferencesItem struct {
	PK                 string                               `dynamo:"pk"`
	SK                 string                               `dynamo:"sk"`
	UserID             string                               `dynamo:"user_id"`
	OptOut             map[notify.Channel][]notify.Category `dynamo:"opt_out,omitempty"`
	MarketingConsentAt *int64                               `dynamo:"marketing_consent_at,omitempty"`
	NightConsentAt     *int64                               `dynamo:"night_consent_at,omitempty"`
	UpdatedAt          int64                                `dynamo:"updated_at"`
}

// suppressionItem is keyed by notify.AddressKey; the address itself is never stored.
type suppressionItem struct {
	AddressKey string `dynamo:"address_key"`
	Channel    string `dynamo:"channel"`
	Masked     string `dynamo:"masked"`
	Reason     string `dynamo:"reason"`
	CreatedAt  int64  `dynamo:"created_at"`
}

func (s *Store) users() dynamo.Table { return s.db.Table(s.tables.Users) }

// readTokenOwner returns the token's owner record, or ok=false if the token is not registered.
func (s *Store) readTokenOwner(ctx context.Context, token string) (tokenOwnerItem, bool, error) {
	var owner tokenOwnerItem
	err := s.users().Get(attrPK, tokenPK(token)).Range(attrSK, dynamo.Equal, skTokenOwner).Consistent(true).One(ctx, &owner)
	if errors.Is(err, dynamo.ErrNotFound) {
		return owner, false, nil
	}
	if err != nil {
		return owner, false, fmt.Errorf("read token owner: %w", err)
	}
	return owner, true, nil
}

// PutDevice implements notify.UserStore. It reads the token's owner item (consistently), then
// one transaction writes the device, the owner item — conditioned on being exactly as read, or
// absent — and the token's audience index entry; when another user owned the token, their
// device item goes too. A re-registration in the same app keeps its index entry (and so its
// place in every campaign's cursor order); a new token, or one moving to another app, gets a new
// sequence number from the app's counter and its old entry is deleted. A lost condition (a
// racing registration) reads again and retries.
func (s *Store) PutDevice(ctx context.Context, d notify.Device) error {
	if d.UserID == "" || d.Token == "" {
		return wrapErr("put device", notify.Errorf(notify.EINVALID, "user id and token are required"))
	}
	op := "put device of " + d.UserID
	updated := nanos(s.nowOr(d.UpdatedAt))
	device, err := dynamo.MarshalItem(deviceItem{
		PK: userPK(d.UserID), SK: deviceSK(d.Token), UserID: d.UserID, Token: d.Token, Platform: string(d.Platform),
		App: d.App, Environment: d.Environment, Locale: d.Locale, TimeZone: d.TimeZone, UpdatedAt: updated,
	})
	if err != nil {
		return wrapErr(op, err)
	}
	for retries := 0; ; {
		owner, found, err := s.readTokenOwner(ctx, d.Token)
		if err != nil {
			return wrapErr(op, err)
		}
		seq := owner.AudienceSeq
		if !found || seq == 0 || owner.AudienceApp != d.App {
			if seq, err = s.allocateSeqs(ctx, appSequencePK(d.App), 1); err != nil {
				return wrapErr(op, err)
			}
		}
		ownerItem, err := dynamo.MarshalItem(tokenOwnerItem{PK: tokenPK(d.Token), SK: skTokenOwner, UserID: d.UserID,
			UpdatedAt: updated, AudienceSeq: seq, AudienceApp: d.App})
		if err != nil {
			return wrapErr(op, err)
		}
		e := newExpr()
		var cond string
		if found {
			cond = ownerUnchanged(e, owner)
		} else {
			cond = "attribute_not_exists(" + e.n(attrPK) + ")"
		}
		index, err := s.indexPut(d, seq)
		if err != nil {
			return wrapErr(op, err)
		}
		tx := []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(s.tables.Users), Item: device}},
			{Put: &types.Put{TableName: aws.String(s.tables.Users), Item: ownerItem, ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: e.nameMap(), ExpressionAttributeValues: e.valueMap()}},
			index,
		}
		if found && owner.UserID != d.UserID {
			tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.tables.Users),
				Key: key2(userPK(owner.UserID), deviceSK(d.Token))}})
		}
		if del := s.indexDelete(owner); found && del != nil && owner.AudienceSeq != seq {
			tx = append(tx, *del)
		}
		err = s.transact(ctx, tx)
		if err == nil {
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 1) == "ConditionalCheckFailed" && retries+1 < txAttempts {
			retries++ // the owner changed since it was read: read again and decide anew
			continue
		}
		if !worthRetry(err, reasons, canceled) || retries+1 >= txAttempts {
			return wrapErr(op, err)
		}
		if err := s.pauseRetry(ctx, &retries); err != nil {
			return wrapErr(op, err)
		}
	}
}

// DeleteDevice implements notify.UserStore: the device item, the token's owner record and its
// audience index entry go in one transaction, conditioned on the owner being userID as read.
func (s *Store) DeleteDevice(ctx context.Context, userID, token string) error {
	op := "delete device of " + userID
	if userID == "" || token == "" {
		return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "device not registered to user"))
	}
	for retries := 0; ; {
		owner, found, err := s.readTokenOwner(ctx, token)
		if err != nil {
			return wrapErr(op, err)
		}
		if !found || owner.UserID != userID {
			owner = tokenOwnerItem{UserID: userID} // the transaction's conditions report the miss
		}
		e := newExpr()
		tx := []types.TransactWriteItem{
			{Delete: &types.Delete{TableName: aws.String(s.tables.Users), Key: key2(userPK(userID), deviceSK(token)),
				ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK}}},
			{Delete: &types.Delete{TableName: aws.String(s.tables.Users), Key: key2(tokenPK(token), skTokenOwner),
				ConditionExpression:      aws.String(ownerUnchanged(e, owner)),
				ExpressionAttributeNames: e.nameMap(), ExpressionAttributeValues: e.valueMap()}},
		}
		if del := s.indexDelete(owner); del != nil {
			tx = append(tx, *del)
		}
		err = s.transact(ctx, tx)
		if err == nil {
			return nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" {
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "device not registered to user"))
		}
		if canceled && reasonCode(reasons, 1) == "ConditionalCheckFailed" {
			if found && owner.UserID == userID && retries+1 < txAttempts {
				retries++ // re-registered since read: read again
				continue
			}
			return wrapErr(op, notify.Errorf(notify.ENOTFOUND, "device not registered to user"))
		}
		if !worthRetry(err, reasons, canceled) || retries+1 >= txAttempts {
			return wrapErr(op, err)
		}
		if err := s.pauseRetry(ctx, &retries); err != nil {
			return wrapErr(op, err)
		}
	}
}

// RemoveDeadDevice implements notify.UserStore. The owner record's updated_at <= seenBefore (and
// its index entry as read) is the condition of the transaction that deletes it, the device and
// the index entry, so a registration landing between the failed send and the cleanup always
// survives.
func (s *Store) RemoveDeadDevice(ctx context.Context, token string, seenBefore time.Time) (bool, error) {
	const op = "remove dead device"
	for retries := 0; ; {
		owner, found, err := s.readTokenOwner(ctx, token)
		if err != nil {
			return false, wrapErr(op, err)
		}
		if !found || owner.UpdatedAt > nanos(seenBefore) {
			return false, nil
		}
		e := newExpr()
		tx := []types.TransactWriteItem{
			{Delete: &types.Delete{TableName: aws.String(s.tables.Users), Key: key2(tokenPK(token), skTokenOwner),
				ConditionExpression: aws.String(ownerUnchanged(e, owner) + " AND " +
					e.n("updated_at") + " <= " + e.i(nanos(seenBefore))),
				ExpressionAttributeNames: e.nameMap(), ExpressionAttributeValues: e.valueMap()}},
			{Delete: &types.Delete{TableName: aws.String(s.tables.Users), Key: key2(userPK(owner.UserID), deviceSK(token))}},
		}
		if del := s.indexDelete(owner); del != nil {
			tx = append(tx, *del)
		}
		err = s.transact(ctx, tx)
		if err == nil {
			return true, nil
		}
		reasons, canceled := cancelReasons(err)
		if canceled && reasonCode(reasons, 0) == "ConditionalCheckFailed" && retries+1 < txAttempts {
			retries++
			continue // registered again (or moved) since it was read: read again and decide anew
		}
		if !worthRetry(err, reasons, canceled) || retries+1 >= txAttempts {
			return false, wrapErr(op, err)
		}
		if err := s.pauseRetry(ctx, &retries); err != nil {
			return false, wrapErr(op, err)
		}
	}
}

// ListDevices implements notify.UserStore: one consistent Query per user (pk U#<user>, sk
// begins_with D#), up to 16 at once.
func (s *Store) ListDevices(ctx context.Context, userIDs []string) (map[string][]notify.Device, error) {
	users := unique(userIDs)
	out := make(map[string][]notify.Device)
	var mu sync.Mutex
	err := forEach(ctx, len(users), func(ctx context.Context, i int) error {
		var items []deviceItem
		err := s.users().Get(attrPK, userPK(users[i])).Range(attrSK, dynamo.BeginsWith, skDevicePfx).
			Consistent(!notify.EventualReads(ctx)).All(ctx, &items)
		if err != nil {
			return fmt.Errorf("query devices: %w", err)
		}
		if len(items) == 0 {
			return nil
		}
		ds := make([]notify.Device, len(items))
		for j, it := range items {
			ds[j] = notify.Device{UserID: it.UserID, Platform: notify.Platform(it.Platform), App: it.App, Token: it.Token,
				Environment: it.Environment, Locale: it.Locale, TimeZone: it.TimeZone, UpdatedAt: timeOf(it.UpdatedAt)}
		}
		mu.Lock()
		out[users[i]] = ds
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, wrapErr("list devices", err)
	}
	return out, nil
}

// PutContact implements notify.UserStore. The whole contact, user id included, is sealed: the id
// inside lets GetContacts reject a sealed value copied onto another user's item.
func (s *Store) PutContact(ctx context.Context, c notify.Contact) error {
	if c.UserID == "" {
		return wrapErr("put contact", notify.Errorf(notify.EINVALID, "user id is required"))
	}
	op := "put contact of " + c.UserID
	c.UpdatedAt = s.nowOr(c.UpdatedAt)
	plain, err := json.Marshal(&c)
	if err != nil {
		return wrapErr(op, fmt.Errorf("encode: %w", err))
	}
	sealed, err := s.cipher.Seal(plain)
	if err != nil {
		return wrapErr(op, err)
	}
	// The contact, the owner items of its addresses, and the removal of those of its earlier
	// addresses still naming this user, in one transaction: a contact change is rare, and the
	// search by address must not find a user by an address they no longer have.
	var before contactItem
	err = s.users().Get(attrPK, userPK(c.UserID)).Range(attrSK, dynamo.Equal, skContact).Consistent(true).One(ctx, &before)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return wrapErr(op, err)
	}
	keys := notify.ContactKeys(c)
	item, err := dynamo.MarshalItem(contactItem{PK: userPK(c.UserID), SK: skContact, Sealed: sealed, OwnerKeys: keys})
	if err != nil {
		return wrapErr(op, err)
	}
	tx := []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(s.tables.Users), Item: item}}}
	for _, k := range keys {
		owner, err := dynamo.MarshalItem(contactOwnerItem{PK: contactOwnerPK(k), SK: skContactOwner, UserID: c.UserID})
		if err != nil {
			return wrapErr(op, err)
		}
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.tables.Users), Item: owner}})
	}
	puts := len(tx)
	for _, k := range before.OwnerKeys {
		if slices.Contains(keys, k) {
			continue
		}
		e := newExpr()
		tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.tables.Users),
			Key:                       key2(contactOwnerPK(k), skContactOwner),
			ConditionExpression:       aws.String(e.n("user_id") + " = " + e.s(c.UserID)),
			ExpressionAttributeNames:  e.nameMap(),
			ExpressionAttributeValues: e.valueMap()}})
	}
	for range txAttempts {
		err = s.transact(ctx, tx)
		reasons, canceled := cancelReasons(err)
		if !canceled {
			break
		}
		// An earlier address another user has taken since is theirs now: not this change's to remove.
		keep := tx[:puts:puts]
		for i := puts; i < len(tx); i++ {
			if reasonCode(reasons, i) != "ConditionalCheckFailed" {
				keep = append(keep, tx[i])
			}
		}
		if len(keep) == len(tx) {
			break
		}
		tx = keep
	}
	return wrapErr(op, err)
}

var _ notify.AddressFinder = (*Store)(nil)

// UserByAddress implements notify.AddressFinder: a push token's owner item, or an email's or
// phone's contact owner item (consistent GetItems).
func (s *Store) UserByAddress(ctx context.Context, c notify.Channel, address string) (string, error) {
	const op = "user by address"
	switch c {
	case notify.ChannelPush:
		owner, ok, err := s.readTokenOwner(ctx, strings.TrimSpace(address))
		if err != nil {
			return "", wrapErr(op, err)
		}
		if ok {
			return owner.UserID, nil
		}
	case notify.ChannelEmail, notify.ChannelSMS:
		var owner contactOwnerItem
		err := s.users().Get(attrPK, contactOwnerPK(notify.AddressKey(c, address))).Range(attrSK, dynamo.Equal, skContactOwner).
			Consistent(true).One(ctx, &owner)
		if err == nil {
			return owner.UserID, nil
		}
		if !errors.Is(err, dynamo.ErrNotFound) {
			return "", wrapErr(op, err)
		}
	default:
		return "", wrapErr(op, notify.FieldError("channel", "no %s address belongs to a user", c))
	}
	return "", wrapErr(op, notify.Errorf(notify.ENOTFOUND, "no user has this %s address", c))
}

// GetContacts implements notify.UserStore (consistent BatchGetItem, 100 keys a request).
func (s *Store) GetContacts(ctx context.Context, userIDs []string) (map[string]notify.Contact, error) {
	var items []contactItem
	if err := s.batchGetUsers(ctx, userIDs, skContact, &items); err != nil {
		return nil, wrapErr("get contacts", err)
	}
	out := make(map[string]notify.Contact, len(items))
	for _, it := range items {
		userID := it.PK[len("U#"):]
		plain, err := s.cipher.Open(it.Sealed)
		if err != nil {
			return nil, wrapErr("get contacts", fmt.Errorf("contact of %s: %w", userID, err))
		}
		var c notify.Contact
		if err := json.Unmarshal(plain, &c); err != nil {
			return nil, wrapErr("get contacts", fmt.Errorf("decode contact of %s: %w", userID, err))
		}
		if c.UserID != userID {
			return nil, wrapErr("get contacts", fmt.Errorf("contact item of %s holds another user's contact", userID))
		}
		out[userID] = c
	}
	return out, nil
}

// PutPreferences implements notify.UserStore; the item is replaced whole, so what the new value
// leaves out (a withdrawn consent) is gone.
func (s *Store) PutPreferences(ctx context.Context, p notify.Preferences) error {
	if p.UserID == "" {
		return wrapErr("put preferences", notify.Errorf(notify.EINVALID, "user id is required"))
	}
	it := preferencesItem{PK: userPK(p.UserID), SK: skPreferences, UserID: p.UserID, OptOut: p.OptOut,
		MarketingConsentAt: nanosPtr(p.MarketingConsent), NightConsentAt: nanosPtr(p.NightConsent),
		UpdatedAt: nanos(s.nowOr(p.UpdatedAt))}
	return wrapErr("put preferences of "+p.UserID, s.users().Put(it).Run(ctx))
}

// GetPreferences implements notify.UserStore (consistent BatchGetItem, 100 keys a request).
func (s *Store) GetPreferences(ctx context.Context, userIDs []string) (map[string]notify.Preferences, error) {
	var items []preferencesItem
	if err := s.batchGetUsers(ctx, userIDs, skPreferences, &items); err != nil {
		return nil, wrapErr("get preferences", err)
	}
	out := make(map[string]notify.Preferences, len(items))
	for _, it := range items {
		out[it.UserID] = notify.Preferences{UserID: it.UserID, OptOut: it.OptOut,
			MarketingConsent: timePtr(it.MarketingConsentAt), NightConsent: timePtr(it.NightConsentAt),
			UpdatedAt: timeOf(it.UpdatedAt)}
	}
	return out, nil
}

// batchGetUsers reads item sk of each user into out. guregu/dynamo splits the keys into
// BatchGetItem requests of 100 and retries unprocessed keys with exponential backoff.
func (s *Store) batchGetUsers(ctx context.Context, userIDs []string, sk string, out any) error {
	users := unique(userIDs)
	if len(users) == 0 {
		return nil
	}
	keys := make([]dynamo.Keyed, len(users))
	for i, u := range users {
		keys[i] = dynamo.Keys{userPK(u), sk}
	}
	err := s.users().Batch(attrPK, attrSK).Get(keys...).Consistent(!notify.EventualReads(ctx)).All(ctx, out)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return err
	}
	return nil
}

// Suppress implements notify.SuppressionStore; a second suppression of the same key replaces the
// stored reason and time.
func (s *Store) Suppress(ctx context.Context, sp notify.Suppression) error {
	if sp.AddressKey == "" {
		return wrapErr("suppress", notify.Errorf(notify.EINVALID, "address key is required"))
	}
	it := suppressionItem{AddressKey: sp.AddressKey, Channel: string(sp.Channel), Masked: sp.Masked, Reason: sp.Reason,
		CreatedAt: nanos(s.nowOr(sp.CreatedAt))}
	return wrapErr("suppress", s.db.Table(s.tables.Suppressions).Put(it).Run(ctx))
}

// Suppressed implements notify.SuppressionStore (consistent BatchGetItem, 100 keys a request).
func (s *Store) Suppressed(ctx context.Context, addressKeys []string) (map[string]notify.Suppression, error) {
	out := make(map[string]notify.Suppression)
	keys := unique(addressKeys)
	if len(keys) == 0 {
		return out, nil
	}
	ks := make([]dynamo.Keyed, len(keys))
	for i, k := range keys {
		ks[i] = dynamo.Keys{k}
	}
	var items []suppressionItem
	err := s.db.Table(s.tables.Suppressions).Batch(attrSuppressionKey).Get(ks...).Consistent(true).All(ctx, &items)
	if err != nil && !errors.Is(err, dynamo.ErrNotFound) {
		return nil, wrapErr("suppressed", err)
	}
	for _, it := range items {
		out[it.AddressKey] = notify.Suppression{AddressKey: it.AddressKey, Masked: it.Masked,
			Channel: notify.Channel(it.Channel), Reason: it.Reason, CreatedAt: timeOf(it.CreatedAt)}
	}
	return out, nil
}
