package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"herald/internal/notify"
)

// TestBatchIDUnchanged holds batchID to the ids it has always made: a retried batch is claimed
// once by them, across versions too.
func TestBatchIDUnchanged(t *testing.T) {
	hold := time.Unix(1_800_000_000, 0)
	for _, sm := range []sendMsg{
		{NotificationID: "ntf_1", Provider: notify.ProviderFCM, App: "default", Items: []sendItem{{DeliveryID: "d_1"}, {DeliveryID: "d_2"}}},
		{NotificationID: "ntf_2", Provider: notify.ProviderAPNs, HoldUntil: &hold, Items: []sendItem{{DeliveryID: "d_3"}}},
		{NotificationID: "ntf_3", Provider: notify.ProviderTwilio},
	} {
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", sm.NotificationID, sm.Provider, sm.App)
		if sm.HoldUntil != nil {
			fmt.Fprintf(h, "%d", sm.HoldUntil.Unix())
		}
		for _, it := range sm.Items {
			h.Write([]byte{0})
			h.Write([]byte(it.DeliveryID))
		}
		want := "b_" + hex.EncodeToString(h.Sum(nil)[:12])
		if got := batchID(sm); got != want {
			t.Errorf("batchID(%s) = %s, want %s", sm.NotificationID, got, want)
		}
	}
}
