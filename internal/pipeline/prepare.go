package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"herald/internal/notify"
)

// sendMsg asks send to deliver one batch of one provider app.
type sendMsg struct {
	NotificationID string          `json:"notification_id"`
	Provider       notify.Provider `json:"provider"`
	App            string          `json:"app,omitempty"`
	Retry          int             `json:"retry,omitempty"` // how many times this batch was re-enqueued for retry
	// BatchID is set on the bulk lane, where the batch (not each delivery) is the unit the
	// store claims and records; see batchID.
	BatchID string `json:"batch,omitempty"`
	// HoldUntil keeps a marketing batch for recipients in quiet hours until their night ends.
	HoldUntil *time.Time `json:"hold_until,omitempty"`
	Items     []sendItem `json:"items"`
}

type sendItem struct {
	DeliveryID  string `json:"id"`
	Address     string `json:"address"`
	Locale      string `json:"locale,omitempty"`
	Environment string `json:"env,omitempty"`
	UserID      string `json:"user,omitempty"`
	// FallbackOf is set on an SMS/LMS fallback: the AlimTalk delivery it stands in for, whose
	// text it sends; Kind is SMS or LMS.
	FallbackOf string `json:"fallback_of,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// History is a retry's earlier attempts of the delivery (notify.Delivery.History): what the
	// record of its outcome keeps. Only a retry batch carries it, written by encoding/json.
	History []notify.Attempt `json:"history,omitempty"`

	prov notify.Provider // grouping keys, not sent
	app  string
	tz   string             // the recipient's time zone, for quiet hours
	pref notify.Preferences // for night-time consent
}

// recordMsg asks record to look at a notification's aggregates.
type recordMsg struct {
	NotificationID string `json:"notification_id"`
}

// Prepare returns the handler of the prepare queues: resolve one chunk of recipients to
// deliveries (preferences, consent, suppressions, devices, contacts), write inbox items, and
// enqueue send batches for what is still pending.
func (p *Pipeline) Prepare() Handler {
	return func(ctx context.Context, msgs []notify.Message) []ItemFailure {
		return each(ctx, msgs, p.prepareOne)
	}
}

func (p *Pipeline) prepareOne(ctx context.Context, m notify.Message) error {
	var pm prepareMsg
	if err := decode(m.Body, &pm); err != nil {
		return err
	}
	if pm.Count < 0 || pm.Count > maxChunksPerMessage {
		return notify.Errorf(notify.EINVALID, "prepare %s: count %d outside 0–%d", pm.NotificationID, pm.Count, maxChunksPerMessage)
	}
	if pm.Count <= 1 {
		return p.prepareChunk(ctx, pm)
	}
	if pm.Chunk < 0 || pm.Chunk > math.MaxInt/p.cfg.ChunkSize-pm.Count {
		return notify.Errorf(notify.EINVALID, "prepare %s: chunk %d out of range", pm.NotificationID, pm.Chunk)
	}
	// The chunks side by side: each waits on the store. Each is idempotent on its own, so a
	// message retried for one chunk's failure changes nothing in the others.
	return decisive(notify.Concurrently(pm.Count, 0, func(k int) error {
		return p.prepareChunk(ctx, prepareMsg{NotificationID: pm.NotificationID, Chunk: pm.Chunk + k, Accepted: pm.Accepted})
	}))
}

// prepareChunk prepares chunk pm.Chunk.
func (p *Pipeline) prepareChunk(ctx context.Context, pm prepareMsg) error {
	n, err := p.notification(ctx, pm.NotificationID)
	if notify.IsCode(err, notify.ENOTFOUND) {
		return notify.Wrap(notify.EINVALID, err, "prepare: unknown notification %s", pm.NotificationID)
	}
	if err != nil {
		return fmt.Errorf("prepare %s/%d: %w", pm.NotificationID, pm.Chunk, err)
	}
	// The store, not the cached notification, says what a chunk holds: a campaign's notification
	// grows while the campaign runs.
	// A chunk whose first index overflows is out of range, not the chunk it wraps around to.
	if pm.Chunk < 0 || pm.Chunk > math.MaxInt/p.cfg.ChunkSize {
		return notify.Errorf(notify.EINVALID, "prepare %s: chunk %d out of range", n.ID, pm.Chunk)
	}
	lo := pm.Chunk * p.cfg.ChunkSize
	rs, err := p.store.GetRecipients(ctx, n.ID, lo, p.cfg.ChunkSize)
	if err != nil {
		return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
	}
	if len(rs) == 0 {
		return notify.Errorf(notify.EINVALID, "prepare %s: chunk %d out of range", n.ID, pm.Chunk)
	}
	hi := lo + len(rs)
	now := p.clock.Now()

	bulk := lane(n) == notify.LaneBulk
	// Batches claimed whole: the bulk lane's, and a realtime notification's with BatchClaims.
	// Either way the chunk marker is written last, with the chunk's counts (AddChunk).
	whole := bulk || n.BatchClaims
	if bulk {
		ctx = notify.WithEventualReads(ctx)
	}
	if whole {
		// The chunk marker is written last: one that exists means every send batch of the chunk
		// was enqueued already.
		done, err := p.store.ChunkPrepared(ctx, n.ID, pm.Chunk)
		if err != nil {
			return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
		}
		if done {
			return p.recordLater(ctx, n)
		}
	}

	var accepted time.Time
	if pm.Accepted > 0 {
		accepted = time.Unix(0, pm.Accepted)
	}
	ds, inbox, items, dups, err := p.resolve(ctx, n, rs, now, accepted)
	if err != nil {
		return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
	}
	if len(inbox) > 0 {
		if err := p.store.PutInboxItems(ctx, inbox); err != nil {
			return fmt.Errorf("prepare %s/%d: inbox: %w", n.ID, pm.Chunk, err)
		}
		// After the write, so a client told of an item finds it; a retried chunk publishes
		// again with the same event ids, which clients ignore.
		for _, it := range inbox {
			p.inboxEv.Publish(ctx, it.UserID, notify.ItemEvent(it))
		}
	}
	var pending []string
	if whole {
		for _, d := range ds {
			if d.Status == notify.DeliveryPending {
				pending = append(pending, d.ID)
			}
		}
	} else if pending, err = p.store.CreateDeliveries(ctx, n.ID, pm.Chunk, ds); err != nil {
		return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
	}
	if whole && !bulk {
		if err := p.recordDecided(ctx, n, pm.Chunk, ds, now); err != nil {
			return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
		}
	}
	batches := p.batches(n, pending, items, p.quietHolds(n, items, now))
	bodies := make([]any, len(batches))
	for i := range batches {
		if whole {
			batches[i].BatchID = batchID(batches[i])
		}
		bodies[i] = batches[i]
	}
	if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, 0, bodies...); err != nil {
		return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
	}
	if whole {
		// Counted once, with the marker, after the batches are safely enqueued. A crash before
		// this re-runs the chunk; its batches carry the same ids and are claimed once.
		var delta map[notify.Channel]notify.ChannelStats
		if bulk {
			delta = tally(ds)
			// A recipient repeated within the chunk (a user uploaded twice, or reached through
			// two sources) is reached once; it is counted as skipped, so every member is counted.
			for ch, k := range dups {
				for range k {
					notify.CountDelivery(delta, ch, notify.DeliverySkipped, notify.ReasonDuplicate, true)
				}
			}
			notify.CountMembers(delta, len(rs))
		} else {
			// Only the totals: the outcomes decided here were counted as they were stored
			// (recordDecided), those to send are counted as their batches are recorded.
			delta = map[notify.Channel]notify.ChannelStats{}
			for _, d := range ds {
				notify.CountDelivery(delta, d.Channel, notify.DeliveryPending, "", true)
			}
		}
		if _, err := p.store.AddChunk(ctx, n.ID, pm.Chunk, delta); err != nil {
			return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
		}
	}
	if err := p.recordLater(ctx, n); err != nil {
		return fmt.Errorf("prepare %s/%d: %w", n.ID, pm.Chunk, err)
	}
	p.log.InfoContext(ctx, "chunk prepared", "notification_id", n.ID, "chunk", pm.Chunk, "lane", lane(n),
		"recipients", hi-lo, "deliveries", len(ds), "pending", len(pending), "batches", len(batches))
	return nil
}

// recordDecided stores the deliveries of a BatchClaims chunk decided here — skipped, and the
// inbox — with their outcomes, as one batch of their own (named after the chunk) that is claimed
// and recorded once, so a re-run chunk neither stores nor counts them twice.
func (p *Pipeline) recordDecided(ctx context.Context, n *notify.Notification, chunk int, ds []notify.Delivery, now time.Time) error {
	var decided []notify.Delivery
	for _, d := range ds {
		if d.Status != notify.DeliveryPending {
			decided = append(decided, d)
		}
	}
	if len(decided) == 0 {
		return nil
	}
	id := "c" + strconv.Itoa(chunk)
	c, err := p.store.ClaimBatch(ctx, n.ID, id, now, now.Add(p.cfg.SendLease))
	if err != nil {
		return fmt.Errorf("claim decided deliveries: %w", err)
	}
	switch c.State {
	case notify.BatchDone:
		return nil
	case notify.BatchBusy: // an attempt of this chunk that died holds it: after its lease
		return &notify.Error{Code: notify.EUNAVAILABLE, RetryAfter: c.BusyFor(now, p.cfg.SendLease),
			Message: "the chunk's decided deliveries are being stored by another attempt"}
	}
	if _, err := p.store.RecordBatch(ctx, n.ID, id, decided, now); err != nil {
		return fmt.Errorf("record decided deliveries: %w", err)
	}
	return nil
}

// tally counts deliveries by channel: every one into Total, and those decided at prepare
// (skipped, the inbox) into their outcome.
func tally(ds []notify.Delivery) map[notify.Channel]notify.ChannelStats {
	out := map[notify.Channel]notify.ChannelStats{}
	for _, d := range ds {
		notify.CountDelivery(out, d.Channel, d.Status, d.Reason, true)
	}
	return out
}

// batchID names a bulk send batch by what it holds — its provider app, its quiet-hours hold and
// its deliveries (whose ids already derive from the notification and the address) — so a
// re-prepared chunk produces the same ids and the store sends each batch once. Were a re-run to
// resolve differently (a device registered in between), its batches get new ids: addresses may
// then be sent twice, with the same collapse id, but none is lost.
func batchID(sm sendMsg) string {
	// The hashed text, written into one buffer: the same bytes as ever (a retried batch must
	// keep its id across versions).
	n := len(sm.NotificationID) + len(sm.Provider) + len(sm.App) + 24 // + the separators and a hold's seconds
	for _, it := range sm.Items {
		n += 1 + len(it.DeliveryID)
	}
	b := make([]byte, 0, n)
	b = append(b, sm.NotificationID...)
	b = append(b, 0)
	b = append(b, sm.Provider...)
	b = append(b, 0)
	b = append(b, sm.App...)
	b = append(b, 0)
	if sm.HoldUntil != nil {
		b = strconv.AppendInt(b, sm.HoldUntil.Unix(), 10)
	}
	for _, it := range sm.Items {
		b = append(b, 0)
		b = append(b, it.DeliveryID...)
	}
	h := sha256.Sum256(b)
	return "b_" + hex.EncodeToString(h[:12])
}

// retryBatchID names retry number `retry` of a bulk batch: deterministic, so a re-run of the
// failing batch enqueues a retry that is claimed once.
func retryBatchID(parent string, retry int) string {
	return parent + ".r" + strconv.Itoa(retry)
}

// resolve turns recipients into deliveries. It returns the deliveries, the inbox items to write,
// the send items of every delivery keyed by delivery id (addresses travel in send messages;
// the store keeps only masked forms), and per channel how many would-be deliveries repeated one
// already resolved (the same address or user twice).
//
// accepted, when known, is when the request was accepted: a user erased since gets nothing.
func (p *Pipeline) resolve(ctx context.Context, n *notify.Notification, rs []notify.Recipient, now, accepted time.Time) ([]notify.Delivery, []notify.InboxItem, map[string]sendItem, map[notify.Channel]int, error) {
	var users []string
	for _, r := range rs {
		if r.UserID != "" {
			users = append(users, r.UserID)
		}
	}
	var (
		devices  map[string][]notify.Device
		contacts map[string]notify.Contact
		prefs    map[string]notify.Preferences
		err      error
	)
	if len(users) > 0 {
		if n.HasChannel(notify.ChannelPush) {
			if devices, err = p.store.ListDevices(ctx, users); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		if n.HasChannel(notify.ChannelEmail) || n.HasChannel(notify.ChannelSMS) || n.HasChannel(notify.ChannelAlimTalk) {
			if contacts, err = p.store.GetContacts(ctx, users); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		if prefs, err = p.store.GetPreferences(ctx, users); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	var erased map[string]time.Time
	since := n.CreatedAt
	if !accepted.IsZero() && accepted.Before(since) {
		since = accepted
	}
	if len(users) > 0 {
		if erased, err = p.tombstones(ctx); err != nil {
			return nil, nil, nil, nil, err
		}
	}

	// Most recipients are one delivery: sized for that, the chunk's deliveries and their maps
	// are allocated once instead of grown (and copied) a doubling at a time.
	b := &builder{n: n, now: now, ds: make([]notify.Delivery, 0, len(rs)), items: make(map[string]sendItem, len(rs)),
		seen: make(map[string]bool, len(rs)), dups: map[notify.Channel]int{}}
	for _, r := range rs {
		switch {
		case r.UserID != "":
			pref := prefs[r.UserID]
			c := contacts[r.UserID]
			// A recipient that names one of the user's devices (an app-devices audience) is
			// reached on that device only; the user's other devices are members of their own,
			// email and SMS belong to user audiences, and the inbox of an app-devices audience is
			// the campaign's one broadcast (campaign.Steps.SaveCursor), merged into the inbox
			// reads of the users it targets: no item, and no delivery, per member.
			//
			// Such a member that is skipped is skipped as its device, not as its user: a user
			// with two phones and no marketing consent is two members, and two skipped
			// deliveries, so a campaign's totals add up to its members.
			device := r.FCMToken + r.APNsToken
			skip := b.skipUser
			if device != "" {
				skip = func(user string, ch notify.Channel, reason string) { b.skipDevice(user, ch, device, reason) }
			}
			// A user erased since the notification was created gets nothing from it, not even
			// an inbox item, which needs no address.
			gone := notify.ErasedBefore(erased, r.UserID, since)
			for _, ch := range n.Channels {
				if device != "" && (ch == notify.ChannelEmail || ch == notify.ChannelSMS || ch == notify.ChannelInbox || ch == notify.ChannelAlimTalk) {
					continue
				}
				if gone {
					skip(r.UserID, ch, notify.ReasonErased)
					continue
				}
				if ok, reason := pref.Allows(ch, n.Category); !ok {
					skip(r.UserID, ch, reason)
					continue
				}
				switch ch {
				case notify.ChannelPush:
					devs := devices[r.UserID]
					if device != "" {
						devs = onlyToken(devs, device)
					}
					if len(devs) == 0 {
						skip(r.UserID, ch, notify.ReasonNoAddress)
					}
					for _, d := range devs {
						b.add(r.UserID, ch, providerOf(d.Platform), d.App, d.Token, d.Locale, d.Environment).
							quiet(d.TimeZone, pref)
					}
				case notify.ChannelEmail:
					if c.Email == "" {
						b.skipUser(r.UserID, ch, notify.ReasonNoAddress)
						continue
					}
					b.add(r.UserID, ch, notify.ProviderSES, "", c.Email, c.Locale, "")
				case notify.ChannelSMS:
					if c.Phone == "" {
						b.skipUser(r.UserID, ch, notify.ReasonNoAddress)
						continue
					}
					b.add(r.UserID, ch, notify.ProviderTwilio, "", c.Phone, c.Locale, "").quiet(c.TimeZone, pref)
				case notify.ChannelAlimTalk:
					if c.Phone == "" {
						b.skipUser(r.UserID, ch, notify.ReasonNoAddress)
						continue
					}
					b.alimTalk(r.UserID, c.Phone, c.Locale)
				case notify.ChannelInbox:
					b.inboxFor(r.UserID)
				}
			}
		case r.Email != "":
			b.add("", notify.ChannelEmail, notify.ProviderSES, "", r.Email, "", "")
		case r.Phone != "":
			if n.HasChannel(notify.ChannelSMS) {
				b.add("", notify.ChannelSMS, notify.ProviderTwilio, "", r.Phone, "", "")
			}
			if n.HasChannel(notify.ChannelAlimTalk) {
				b.alimTalk("", r.Phone, "")
			}
		case r.FCMToken != "":
			b.add("", notify.ChannelPush, notify.ProviderFCM, appOr(r.App), r.FCMToken, "", "")
		case r.APNsToken != "":
			b.add("", notify.ChannelPush, notify.ProviderAPNs, appOr(r.App), r.APNsToken, "", "production")
		}
	}

	// Suppressed addresses are skipped, never sent.
	if err := p.skipSuppressed(ctx, b.ds, func(id string) string { return b.items[id].Address }); err != nil {
		return nil, nil, nil, nil, err
	}
	ttl := p.cfg.InboxTTL
	if n.TTL > 0 {
		ttl = n.TTL
	}
	for i := range b.inbox {
		exp := n.CreatedAt.Add(ttl)
		b.inbox[i].ExpiresAt = &exp
	}
	return b.ds, b.inbox, b.items, b.dups, nil
}

type builder struct {
	n     *notify.Notification
	now   time.Time
	ds    []notify.Delivery
	inbox []notify.InboxItem
	items map[string]sendItem
	seen  map[string]bool
	dups  map[notify.Channel]int
}

// first reports whether delivery id of channel ch is new to this chunk, counting a repeat.
func (b *builder) first(id string, ch notify.Channel) bool {
	if b.seen[id] {
		b.dups[ch]++
		return false
	}
	b.seen[id] = true
	return true
}

// added lets a caller attach a recipient's quiet-hours facts to the delivery it just added.
type added struct {
	b  *builder
	id string
}

func (a added) quiet(tz string, pref notify.Preferences) {
	if a.b == nil {
		return
	}
	if it, ok := a.b.items[a.id]; ok {
		it.tz, it.pref = tz, pref
		a.b.items[a.id] = it
	}
}

func (b *builder) add(user string, ch notify.Channel, prov notify.Provider, app, address, locale, env string) added {
	id := notify.DeliveryID(b.n.ID, ch, address)
	if !b.first(id, ch) { // the same address twice in one request is one delivery
		return added{}
	}
	b.ds = append(b.ds, notify.Delivery{
		ID: id, NotificationID: b.n.ID, UserID: user, Channel: ch, Provider: prov, App: app,
		Address: address, AddressMasked: notify.MaskAddress(ch, address),
		Status: notify.DeliveryPending, UpdatedAt: b.now,
	})
	b.items[id] = sendItem{DeliveryID: id, Address: address, Locale: locale, Environment: env, UserID: user, prov: prov, app: app}
	return added{b: b, id: id}
}

// AlimTalkApp is the provider app of AlimTalk deliveries: the KakaoTalk channel configured as
// providers.alimtalk.apps.default.
const AlimTalkApp = "default"

// alimTalk adds the AlimTalk delivery to phone, in its national form (so "+82 10-…" and
// "010-…" are one delivery); a number that is not a Korean mobile number is skipped as
// unsupported_address, never sent.
func (b *builder) alimTalk(user, phone, locale string) {
	national, err := notify.NormalizeKoreanMobile(phone)
	if err != nil {
		id := notify.DeliveryID(b.n.ID, notify.ChannelAlimTalk, phone)
		if !b.first(id, notify.ChannelAlimTalk) {
			return
		}
		b.ds = append(b.ds, notify.Delivery{
			ID: id, NotificationID: b.n.ID, UserID: user, Channel: notify.ChannelAlimTalk,
			AddressMasked: notify.MaskPhone(phone), Status: notify.DeliverySkipped,
			Reason: notify.ReasonUnsupportedAddress, Detail: "AlimTalk reaches Korean mobile numbers only", UpdatedAt: b.now,
		})
		return
	}
	b.add(user, notify.ChannelAlimTalk, notify.ProviderAlimTalk, AlimTalkApp, national, locale, "")
}

// suppressible reports whether deliveries of ch are checked against suppressed addresses.
// skipSuppressed marks SKIPPED "suppressed" the pending deliveries of ds whose address
// (address of the delivery id: addresses travel apart from deliveries) is suppressed, with the
// suppression's reason added to their detail.
func (p *Pipeline) skipSuppressed(ctx context.Context, ds []notify.Delivery, address func(id string) string) error {
	var keys []string
	for _, d := range ds {
		if d.Status == notify.DeliveryPending && suppressible(d.Channel) {
			keys = append(keys, notify.AddressKey(d.Channel, address(d.ID)))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sup, err := p.store.Suppressed(ctx, keys)
	if err != nil {
		return err
	}
	for i := range ds {
		d := &ds[i]
		if d.Status != notify.DeliveryPending || !suppressible(d.Channel) {
			continue
		}
		if s, ok := sup[notify.AddressKey(d.Channel, address(d.ID))]; ok {
			d.Status, d.Reason = notify.DeliverySkipped, notify.ReasonSuppressed
			d.Detail = strings.TrimPrefix(d.Detail+"; "+s.Reason, "; ")
		}
	}
	return nil
}

func suppressible(ch notify.Channel) bool {
	return ch == notify.ChannelEmail || ch == notify.ChannelSMS || ch == notify.ChannelAlimTalk
}

func (b *builder) skipUser(user string, ch notify.Channel, reason string) {
	id := notify.DeliveryID(b.n.ID, ch, "user:"+user)
	if !b.first(id, ch) {
		return
	}
	b.ds = append(b.ds, notify.Delivery{
		ID: id, NotificationID: b.n.ID, UserID: user, Channel: ch, AddressMasked: "user:" + user,
		Status: notify.DeliverySkipped, Reason: reason, UpdatedAt: b.now,
	})
}

// skipDevice is skipUser for a member that is one device of user: the skipped delivery has the
// id the device's delivery would have had, so each device member is one delivery whether it is
// sent or skipped.
func (b *builder) skipDevice(user string, ch notify.Channel, token, reason string) {
	id := notify.DeliveryID(b.n.ID, ch, token)
	if !b.first(id, ch) {
		return
	}
	b.ds = append(b.ds, notify.Delivery{
		ID: id, NotificationID: b.n.ID, UserID: user, Channel: ch, AddressMasked: notify.MaskAddress(ch, token),
		Status: notify.DeliverySkipped, Reason: reason, UpdatedAt: b.now,
	})
}

func (b *builder) inboxFor(user string) {
	id := notify.DeliveryID(b.n.ID, notify.ChannelInbox, user)
	if !b.first(id, notify.ChannelInbox) {
		return
	}
	c := b.n.ContentFor(notify.ChannelInbox, "")
	b.inbox = append(b.inbox, notify.InboxItem{
		UserID: user, ID: b.n.ID, Service: b.n.Service, Category: b.n.Category,
		Title: c.Title, Body: c.Body, Data: c.Data, Link: c.Link, ImageURL: c.ImageURL,
		CreatedAt: b.n.CreatedAt,
	})
	b.ds = append(b.ds, notify.Delivery{
		ID: id, NotificationID: b.n.ID, UserID: user, Channel: notify.ChannelInbox, Provider: notify.ProviderInbox,
		AddressMasked: user, Status: notify.DeliverySent, UpdatedAt: b.now,
	})
}

// batches groups pending deliveries by provider and app into send messages of at most the
// sender's MaxBatch.
// quietHolds says, for a marketing notification, until when each recipient's push or SMS must
// wait: during quiet hours in the recipient's own time zone, unless they gave night-time consent
// (email and the inbox are exempt). Transactional notifications are never held.
func (p *Pipeline) quietHolds(n *notify.Notification, items map[string]sendItem, now time.Time) map[string]time.Time {
	if n.Category != notify.CategoryMarketing {
		return nil
	}
	policy := p.cfg.QuietHours
	if n.QuietHours != nil {
		policy = *n.QuietHours
	}
	if !policy.Enabled {
		return nil
	}
	holds := map[string]time.Time{}
	for id, it := range items {
		if ok, _ := policy.MayDeliverNow(now, channelOf(it.prov), n.Category, it.tz, it.pref); !ok {
			holds[id] = policy.NextOpen(now, it.tz).Truncate(time.Minute)
		}
	}
	return holds
}

func (p *Pipeline) batches(n *notify.Notification, pending []string, items map[string]sendItem, holds map[string]time.Time) []sendMsg {
	type key struct {
		prov notify.Provider
		app  string
		hold time.Time
	}
	groups := map[key][]sendItem{}
	var order []key
	for _, id := range pending {
		it, ok := items[id]
		if !ok {
			continue // pending from an earlier attempt of a delivery no longer resolved: left to its own send message
		}
		k := key{prov: it.prov, app: it.app, hold: holds[id]}
		if _, ok := groups[k]; !ok {
			if len(order) == 0 { // usually the only group
				groups[k] = make([]sendItem, 0, len(pending))
			}
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	var out []sendMsg
	for _, k := range order {
		size := p.batchSize(k.prov)
		g := groups[k]
		for len(g) > 0 {
			m := min(size, len(g))
			sm := sendMsg{NotificationID: n.ID, Provider: k.prov, App: k.app, Items: g[:m]}
			if !k.hold.IsZero() {
				h := k.hold
				sm.HoldUntil = &h
			}
			out = append(out, sm)
			g = g[m:]
		}
	}
	return out
}

func (p *Pipeline) batchSize(prov notify.Provider) int {
	if s, ok := p.cfg.MaxSendBatchSize[prov]; ok && s > 0 {
		return s
	}
	if s, ok := p.senders[prov]; ok && s.MaxBatch() > 0 {
		return s.MaxBatch()
	}
	return 100
}

// onlyToken is the device with token among ds (none when it was removed since).
func onlyToken(ds []notify.Device, token string) []notify.Device {
	for _, d := range ds {
		if d.Token == token {
			return []notify.Device{d}
		}
	}
	return nil
}

func providerOf(pl notify.Platform) notify.Provider {
	switch pl {
	case notify.PlatformAPNs:
		return notify.ProviderAPNs
	case notify.PlatformWebPush:
		return notify.ProviderWebPush
	}
	return notify.ProviderFCM
}

func appOr(app string) string {
	if app == "" {
		return "default"
	}
	return app
}
