package notify

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestExpressRoundTripAndApply(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	lease := at.Add(time.Minute)
	x := Express{
		Deliveries: []Delivery{
			{ID: "d_b", UserID: "u1", Channel: ChannelPush, Provider: ProviderFCM, App: "default", AddressMasked: "fcm-…0001",
				Status: DeliverySending, Attempts: 1, LeaseUntil: lease, UpdatedAt: at},
			{ID: "d_a", UserID: "u1", Channel: ChannelInbox, Provider: ProviderInbox, AddressMasked: "u1", Status: DeliverySent, UpdatedAt: at},
		},
		Lease: lease,
	}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	var back Express
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, x) {
		t.Fatalf("round trip:\n got %+v\nwant %+v\n(json %s)", back, x, b)
	}
	if c := back.Counts(); c[ChannelPush] != (ChannelStats{Total: 1}) || c[ChannelInbox] != (ChannelStats{Total: 1, Sent: 1}) {
		t.Fatalf("counts %v, want push 1 pending and inbox 1 sent", c)
	}
	if !back.Pending() || back.FinalStatus() != StatusSent {
		t.Fatalf("pending %v, final %s", back.Pending(), back.FinalStatus())
	}
	if page, more := back.Page("", 1); len(page) != 1 || page[0].ID != "d_a" || !more {
		t.Fatalf("first page %+v, more %v", page, more)
	}
	if page, more := back.Page("d_a", 1); len(page) != 1 || page[0].ID != "d_b" || more {
		t.Fatalf("second page %+v, more %v", page, more)
	}
	n := back.Apply([]DeliveryUpdate{
		{ID: "d_b", Status: DeliveryFailed, Reason: ReasonUnregistered, At: at},
		{ID: "d_a", Status: DeliveryFailed, At: at}, // not SENDING: ignored
		{ID: "d_zz", Status: DeliverySent, At: at},  // unknown: ignored
	})
	if n != 1 || back.Pending() {
		t.Fatalf("applied %d, pending %v", n, back.Pending())
	}
	st := Stats{Channels: MergeCounts(nil, back.Counts())}
	st.SplitReasons()
	if st.Channels[ChannelPush] != (ChannelStats{Total: 1, Failed: 1}) || st.FailedByReason[ReasonUnregistered] != 1 ||
		back.FinalStatus() != StatusPartiallySent {
		t.Fatalf("after a failure: %+v, final %s", st, back.FinalStatus())
	}
	if len(b) > 400 {
		t.Errorf("a two-delivery express record is %d bytes of JSON: %s", len(b), b)
	}
}
