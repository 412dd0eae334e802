package local

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"herald/internal/notify"
)

// callSizes is a sender that records how many messages each Send call carried.
type callSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (c *callSizes) Provider() notify.Provider { return notify.ProviderFCM }
func (c *callSizes) MaxBatch() int             { return 500 }
func (c *callSizes) Send(_ context.Context, msgs []notify.OutboundMessage) ([]notify.SendResult, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(msgs))
	c.mu.Unlock()
	out := make([]notify.SendResult, len(msgs))
	for i, m := range msgs {
		out[i].DeliveryID = m.DeliveryID
	}
	return out, nil
}

// A bulk batch goes in slices, yielding between them, only while the realtime lane is busy or
// was lately; after a lull it goes in one call, and a foreground batch always does.
func TestYieldingSlicesOnlyWhileRealtimeIsActive(t *testing.T) {
	msgs := make([]notify.OutboundMessage, 50)
	for i := range msgs {
		msgs[i].DeliveryID = string(rune('a' + i))
	}
	run := func(ctx context.Context) []int {
		t.Helper()
		c := &callSizes{}
		res, err := yieldingOf(c).Send(ctx, msgs)
		if err != nil || len(res) != len(msgs) {
			t.Fatalf("send: %d results, %v", len(res), err)
		}
		for i := range res {
			if res[i].DeliveryID != msgs[i].DeliveryID {
				t.Fatalf("result %d is %q, want %q", i, res[i].DeliveryID, msgs[i].DeliveryID)
			}
		}
		return c.sizes
	}
	g := &Gate{MaxHold: time.Millisecond}
	bulk := context.WithValue(context.Background(), gateKey{}, g)

	if got := run(bulk); !slices.Equal(got, []int{50}) {
		t.Errorf("realtime lane never active: calls %v, want [50]", got)
	}
	g.enter()
	g.leave() // a real-time batch just ended
	if got := run(bulk); !slices.Equal(got, []int{yieldSlice, yieldSlice, 50 - 2*yieldSlice}) {
		t.Errorf("realtime lane just active: calls %v, want slices of %d", got, yieldSlice)
	}
	g.last.Store(time.Now().Add(-quietLane - time.Second).UnixNano())
	if got := run(bulk); !slices.Equal(got, []int{50}) {
		t.Errorf("realtime lane quiet for %v: calls %v, want [50]", quietLane, got)
	}
	if got := run(context.Background()); !slices.Equal(got, []int{50}) {
		t.Errorf("foreground: calls %v, want [50]", got)
	}
}

// Ingest's queue carries both lanes: a batch of marketing sends is bulk work (it gives way to
// real-time work and does not hold the bulk lane back); anything else, or a message that does
// not say, is real-time work.
func TestIngestBatchRoleFollowsItsLane(t *testing.T) {
	ingest := Consumer{Foreground: true, ByLane: true}
	msg := func(lane string) notify.Message {
		if lane == "" {
			return notify.Message{}
		}
		return notify.Message{Attributes: map[string]string{notify.AttrLane: lane}}
	}
	for _, tc := range []struct {
		name   string
		lanes  []string
		fg, bg bool
	}{
		{"all bulk", []string{"bulk", "bulk"}, false, true},
		{"one realtime", []string{"bulk", "realtime"}, true, false},
		{"one unlabelled", []string{"bulk", ""}, true, false},
		{"realtime", []string{"realtime"}, true, false},
	} {
		var msgs []notify.Message
		for _, l := range tc.lanes {
			msgs = append(msgs, msg(l))
		}
		if fg, bg := ingest.role(msgs); fg != tc.fg || bg != tc.bg {
			t.Errorf("%s: foreground %v, background %v; want %v, %v", tc.name, fg, bg, tc.fg, tc.bg)
		}
	}
	// A consumer of one lane's queue keeps its role whatever the messages say.
	send := Consumer{Foreground: true}
	if fg, bg := send.role([]notify.Message{msg("bulk")}); !fg || bg {
		t.Errorf("realtime send consumer: foreground %v, background %v; want true, false", fg, bg)
	}
}
