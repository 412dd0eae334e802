package pipeline

import (
	"context"
	"fmt"

	"herald/internal/notify"
)

// The SMS/LMS fallback of AlimTalk. A recipient KakaoTalk cannot reach (not a KakaoTalk user,
// AlimTalk blocked or unused: EUNREACHABLE) gets the AlimTalk's text — the approved template
// with its variables filled in — as a text message through Herald's SMS sender, when the
// configuration (providers.alimtalk.fallback) or the send (channel_content.alimtalk.data.
// alimtalk_fallback) asks for it. Solapi's own substitution stays off (disableSms): Herald's
// fallback goes through the one SMS provider, under Herald's retries, idempotency, preferences
// and suppressions, and shows as a delivery of its own.
//
// Both attempts are deliveries. The AlimTalk one ends SKIPPED with reason "unreachable" and a
// detail naming the SMS delivery; the SMS delivery's id derives from the AlimTalk one's and its
// detail names it back. So the recipient counts once, by the SMS delivery's outcome: sent when
// the fallback was sent, failed when it failed. Without a fallback (not asked for, no SMS
// sender, a text longer than an LMS) the AlimTalk delivery ends FAILED "unreachable".

// fallBack turns o's unreachable AlimTalk verdicts into SMS/LMS fallbacks: it creates the SMS
// deliveries (the realtime lane; on the bulk lane they are returned, to be counted with the
// batch's completion), enqueues their send batch, and rewrites the AlimTalk verdicts. It runs
// before o's verdicts are stored, so the notification is never complete without its fallbacks.
func (p *Pipeline) fallBack(ctx context.Context, n *notify.Notification, sm sendMsg, o *outcome, items []sendItem) ([]notify.Delivery, error) {
	if sm.Provider != notify.ProviderAlimTalk {
		return nil, nil
	}
	byID := make(map[string]sendItem, len(items))
	for _, it := range items {
		byID[it.DeliveryID] = it
	}
	_, hasSMS := p.senders[notify.ProviderTwilio]
	type fallback struct {
		update int // index in o.updates
		item   sendItem
		d      notify.Delivery
	}
	var fbs []fallback
	now := p.clock.Now()
	for i := range o.updates {
		u := &o.updates[i]
		if u.Status != notify.DeliveryFailed || u.Reason != notify.ReasonUnreachable {
			continue
		}
		it := byID[u.ID]
		if !p.wantsFallback(n, it.Locale) {
			continue
		}
		if !hasSMS {
			u.Detail += "; no fallback: no SMS sender is configured"
			continue
		}
		text := fallbackContent(n, it.Locale).Body
		if n.Category == notify.CategoryMarketing && p.cfg.OptOutSMS != "" {
			text += "\n" + p.cfg.OptOutSMS // the refusal line the SMS ends with counts toward its kind
		}
		kind := notify.TextKind(text)
		if kind == "" {
			u.Detail += fmt.Sprintf("; no fallback: the text is over %d EUC-KR bytes, more than an LMS takes", notify.LMSMaxBytes)
			continue
		}
		phone := notify.KoreanE164(it.Address)
		fit := sendItem{
			DeliveryID: notify.DeliveryID(n.ID, notify.ChannelSMS, "alimtalk-fallback:"+it.DeliveryID),
			Address:    phone, Locale: it.Locale, UserID: it.UserID, FallbackOf: it.DeliveryID, Kind: kind,
			prov: notify.ProviderTwilio,
		}
		fbs = append(fbs, fallback{update: i, item: fit, d: notify.Delivery{
			ID: fit.DeliveryID, NotificationID: n.ID, UserID: it.UserID, Channel: notify.ChannelSMS,
			Provider: notify.ProviderTwilio, Address: phone, AddressMasked: notify.MaskPhone(phone),
			Status: notify.DeliveryPending, Detail: fallbackDetail(fit), UpdatedAt: now,
		}})
	}
	if len(fbs) == 0 {
		return nil, nil
	}

	// The text message keeps Herald's rules for SMS: the user's preference, suppressed numbers.
	var users []string
	for _, f := range fbs {
		if f.item.UserID != "" {
			users = append(users, f.item.UserID)
		}
	}
	var prefs map[string]notify.Preferences
	if len(users) > 0 {
		var err error
		if prefs, err = p.store.GetPreferences(ctx, users); err != nil {
			return nil, fmt.Errorf("fallback preferences: %w", err)
		}
	}
	ds := make([]notify.Delivery, len(fbs))
	addresses := make(map[string]string, len(fbs))
	for i, f := range fbs {
		if f.item.UserID != "" {
			if ok, reason := prefs[f.item.UserID].Allows(notify.ChannelSMS, n.Category); !ok {
				f.d.Status, f.d.Reason = notify.DeliverySkipped, reason
			}
		}
		ds[i] = f.d
		addresses[f.d.ID] = f.item.Address
	}
	if err := p.skipSuppressed(ctx, ds, func(id string) string { return addresses[id] }); err != nil {
		return nil, fmt.Errorf("fallback suppressions: %w", err)
	}

	var pending map[string]bool
	var counted []notify.Delivery
	if sm.BatchID == "" {
		ids, err := p.store.CreateDeliveries(ctx, n.ID, notify.NoChunk, ds)
		if err != nil {
			return nil, fmt.Errorf("create fallbacks: %w", err)
		}
		pending = make(map[string]bool, len(ids))
		for _, id := range ids {
			pending[id] = true
		}
	} else {
		// The bulk lane keeps no delivery records: the fallbacks are counted with the AlimTalk
		// batch's completion, and their batch, named after it, is claimed once.
		counted = ds
		pending = map[string]bool{}
		for _, d := range ds {
			if d.Status == notify.DeliveryPending {
				pending[d.ID] = true
			}
		}
	}
	var send []sendItem
	for _, f := range fbs {
		if pending[f.item.DeliveryID] {
			send = append(send, f.item)
		}
	}
	for len(send) > 0 {
		m := min(len(send), p.batchSize(notify.ProviderTwilio))
		next := sendMsg{NotificationID: n.ID, Provider: notify.ProviderTwilio, Items: send[:m]}
		if sm.BatchID != "" {
			next.BatchID = fmt.Sprintf("%s.sms%d", sm.BatchID, len(send))
		}
		if err := p.send(ctx, notify.LaneQueue(notify.StageSend, lane(n)), n.Service, 0, next); err != nil {
			return nil, fmt.Errorf("enqueue fallbacks: %w", err)
		}
		send = send[m:]
	}
	for _, f := range fbs {
		u := &o.updates[f.update]
		u.Status = notify.DeliverySkipped
		u.Detail += fmt.Sprintf("; fell back to %s delivery %s", f.item.Kind, f.item.DeliveryID)
		o.failed--
		o.reasons[notify.ReasonUnreachable]--
		o.fellBack++
	}
	return counted, nil
}

// wantsFallback reports whether a recipient in locale that KakaoTalk cannot reach gets the text
// as SMS/LMS: the send's own choice, else the configured default.
func (p *Pipeline) wantsFallback(n *notify.Notification, locale string) bool {
	switch n.ContentFor(notify.ChannelAlimTalk, locale).Data[notify.AlimTalkFallbackKey] {
	case notify.AlimTalkFallbackSMS:
		return true
	case notify.AlimTalkFallbackNone:
		return false
	}
	return p.cfg.AlimTalkFallback
}

// fallbackContent is what a fallback sends: the AlimTalk's text alone (the approved template
// with its variables filled in).
func fallbackContent(n *notify.Notification, locale string) notify.Content {
	return notify.Content{Body: n.ContentFor(notify.ChannelAlimTalk, locale).Body}
}

// fallbackDetail is the detail a fallback delivery carries: its kind and what it stands in for.
func fallbackDetail(it sendItem) string {
	return fmt.Sprintf("%s fallback of alimtalk delivery %s (not reachable by KakaoTalk)", it.Kind, it.FallbackOf)
}
