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
		{"all skipped", ChannelStats{Total: 2, Skipped: 2}, StatusFailed},
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
