package notify

import "testing"

func TestFinalStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cs   ChannelStats
		want NotificationStatus
	}{
		{"all sent", ChannelStats{Total: 3, Sent: 3}, StatusSent},
		{"sent and skipped", ChannelStats{Total: 3, Sent: 2, Skipped: 1}, StatusSent},
		{"some failed", ChannelStats{Total: 3, Sent: 2, Failed: 1}, StatusPartiallySent},
		{"nothing sent", ChannelStats{Total: 3, Failed: 1, Skipped: 2}, StatusFailed},
		{"all skipped", ChannelStats{Total: 2, Skipped: 2}, StatusSkipped},
		{"failed and skipped", ChannelStats{Total: 2, Failed: 1, Skipped: 1}, StatusFailed},
		{"no deliveries at all (an inbox broadcast, an empty audience)", ChannelStats{}, StatusSent},
	} {
		st := Stats{Channels: map[Channel]ChannelStats{ChannelPush: c.cs}}
		if c.cs == (ChannelStats{}) {
			st.Channels = nil
		}
		if got := st.FinalStatus(); got != c.want {
			t.Errorf("%s: FinalStatus = %s, want %s", c.name, got, c.want)
		}
	}
}

// An EXPIRED delivery counts as failed, under the reason "expired", whatever reason it carried.
func TestCountExpired(t *testing.T) {
	t.Parallel()
	delta := map[Channel]ChannelStats{}
	CountDelivery(delta, ChannelPush, DeliveryExpired, "throttled", true)
	CountDelivery(delta, ChannelPush, DeliverySent, "", true)
	st := Stats{Channels: delta}
	st.SplitReasons()
	if got := st.Channels[ChannelPush]; got != (ChannelStats{Total: 2, Sent: 1, Failed: 1}) {
		t.Fatalf("push = %+v, want 2 total, 1 sent, 1 failed", got)
	}
	if st.FailedByReason[ReasonExpired] != 1 || len(st.FailedByReason) != 1 {
		t.Fatalf("failed by reason = %v, want expired: 1", st.FailedByReason)
	}
	if !st.Complete() || st.FinalStatus() != StatusPartiallySent {
		t.Fatalf("complete %v final %s, want PARTIALLY_SENT", st.Complete(), st.FinalStatus())
	}
	if !DeliveryExpired.Terminal() {
		t.Fatal("EXPIRED is not terminal")
	}
}
