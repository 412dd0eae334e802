package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/pipeline"
)

// fakeText is a phone provider: AlimTalk answers EUNREACHABLE for numbers ending 0001; both
// record what they accepted, per address.
type fakeText struct {
	prov notify.Provider
	mu   sync.Mutex
	got  map[string][]string // address -> bodies accepted
}

func (f *fakeText) Provider() notify.Provider { return f.prov }
func (f *fakeText) MaxBatch() int             { return 2 }
func (f *fakeText) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i].DeliveryID = m.DeliveryID
		if f.prov == notify.ProviderAlimTalk && strings.HasSuffix(m.Address, "0001") {
			out[i].Err = notify.Errorf(notify.EUNREACHABLE, "3104 not a KakaoTalk user")
			continue
		}
		f.got[m.Address] = append(f.got[m.Address], m.Content.Body)
	}
	return out, nil
}

// On the bulk lane (a transactional campaign) the fallbacks are a batch of their own: every
// unreachable member gets one SMS, counted with the AlimTalk batch, and a redelivery of every
// send message sends and counts nothing twice.
func TestBulkAlimTalkFallback(t *testing.T) {
	t.Parallel()
	alim := &fakeText{prov: notify.ProviderAlimTalk, got: map[string][]string{}}
	sms := &fakeText{prov: notify.ProviderTwilio, got: map[string][]string{}}
	b := newBulkHarnessWith(t, []notify.Sender{alim, sms},
		pipeline.Config{RetryBase: time.Second, RetryMax: time.Second, AlimTalkFallback: true})
	p, st, q, clock := b.p, b.st, b.q, b.clock
	ctx := t.Context()

	var rs []notify.Recipient
	unreachable := 0
	for i := range 7 {
		suffix := fmt.Sprintf("%04d", 1000+i)
		if i%2 == 0 {
			suffix = "0001"
		}
		rs = append(rs, notify.Recipient{Phone: fmt.Sprintf("+82105%03d%s", i, suffix)})
		if i%2 == 0 {
			unreachable++
		}
	}
	n := &notify.Notification{
		ID: notify.NewID("n_", clock.Now()), Service: "shop", Category: notify.CategoryTransactional, Lane: notify.LaneBulk,
		Channels:   []notify.Channel{notify.ChannelAlimTalk},
		Content:    notify.Content{Body: "점검 안내", Data: map[string]string{notify.AlimTalkTemplateKey: "TPL"}},
		Recipients: rs, RecipientCount: len(rs), Status: notify.StatusProcessing, CreatedAt: clock.Now(), UpdatedAt: clock.Now(),
	}
	if _, _, err := st.CreateNotification(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.SetChunksTotal(ctx, n.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.EnqueuePrepare(ctx, n, 0, 1, nil); err != nil {
		t.Fatal(err)
	}
	b.drain(t, "prepare-bulk", p.Prepare())
	sends := b.drain(t, "send-bulk", p.Send())
	b.drain(t, "record-bulk", p.Record())
	for _, body := range sends { // every send message again: nothing twice
		if err := q.Send(ctx, "send-bulk", notify.OutMessage{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	b.drain(t, "send-bulk", p.Send())

	for _, r := range rs {
		national := "0" + strings.TrimPrefix(r.Phone, "+82")
		if strings.HasSuffix(r.Phone, "0001") {
			if got := sms.got[r.Phone]; len(got) != 1 || got[0] != "점검 안내" {
				t.Errorf("unreachable %s: sms %v", r.Phone, got)
			}
			continue
		}
		if got := alim.got[national]; len(got) != 1 || len(sms.got[r.Phone]) != 0 {
			t.Errorf("reachable %s: alimtalk %v, sms %v", national, got, sms.got[r.Phone])
		}
	}
	stored, err := st.GetNotification(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stored.Stats.Channels[notify.ChannelAlimTalk], (notify.ChannelStats{Total: 7, Sent: 7 - unreachable, Skipped: unreachable}); got != want {
		t.Errorf("alimtalk stats %+v, want %+v", got, want)
	}
	if got, want := stored.Stats.Channels[notify.ChannelSMS], (notify.ChannelStats{Total: unreachable, Sent: unreachable}); got != want {
		t.Errorf("sms stats %+v, want %+v", got, want)
	}
	if stored.Status != notify.StatusSent || stored.Stats.SkippedByReason[notify.ReasonUnreachable] != unreachable {
		t.Errorf("status %s, skipped %v; want SENT, %d unreachable", stored.Status, stored.Stats.SkippedByReason, unreachable)
	}
}

// The SMS fallback keeps Herald's rules for SMS: a number on the suppression list gets no text;
// its fallback delivery is SKIPPED suppressed, and the other unreachable number gets its SMS.
func TestAlimTalkFallbackSkipsASuppressedNumber(t *testing.T) {
	t.Parallel()
	alim := &fakeText{prov: notify.ProviderAlimTalk, got: map[string][]string{}}
	sms := &fakeText{prov: notify.ProviderTwilio, got: map[string][]string{}}
	b := newBulkHarnessWith(t, []notify.Sender{alim, sms},
		pipeline.Config{RetryBase: time.Second, RetryMax: time.Second, AlimTalkFallback: true})
	ctx := t.Context()
	const stopped, open = "+821055550001", "+821066660001" // both unreachable on KakaoTalk
	if err := b.st.Suppress(ctx, notify.Suppression{AddressKey: notify.AddressKey(notify.ChannelSMS, stopped),
		Channel: notify.ChannelSMS, Masked: notify.MaskPhone(stopped), Reason: "provider_opt_out", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"idempotency_key":"fb-suppressed","channels":["alimtalk"],"content":{"body":"점검 안내","data":{"` +
		notify.AlimTalkTemplateKey + `":"TPL"}},"recipients":[{"phone":"` + stopped + `"},{"phone":"` + open + `"}]}`)
	if fails := b.p.Ingest("shop", nil)(ctx, []notify.Message{{ID: "m", Body: body}}); len(fails) != 0 {
		t.Fatal(fails[0].Err)
	}
	b.drain(t, "prepare-realtime", b.p.Prepare())
	b.drain(t, "send-realtime", b.p.Send())
	b.drain(t, "record-realtime", b.p.Record())
	if len(sms.got[stopped]) != 0 || len(sms.got[open]) != 1 {
		t.Fatalf("sms to the suppressed number %v, to the other %v; want none and one", sms.got[stopped], sms.got[open])
	}
	id := notify.NotificationIDFor("shop", "fb-suppressed", b.clock.Now())
	ds, _, err := b.st.ListDeliveries(ctx, id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, d := range ds {
		if d.Channel == notify.ChannelSMS && d.Status == notify.DeliverySkipped && d.Reason == notify.ReasonSuppressed {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("deliveries %+v: want the suppressed number's fallback SKIPPED suppressed", ds)
	}
}
