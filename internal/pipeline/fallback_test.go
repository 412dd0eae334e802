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
