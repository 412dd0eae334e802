package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestDeliveryIDUnchanged holds DeliveryID to the ids it has always made: a redelivered prepare
// message recreates its deliveries by them, across versions too.
func TestDeliveryIDUnchanged(t *testing.T) {
	for _, tc := range []struct{ n, addr string }{
		{"ntf_1", "tok"}, {"ntf_01JXYZ", strings.Repeat("long-token-", 40)}, {"", ""}, {"n", "é\x00x"},
	} {
		h := sha256.Sum256([]byte(tc.n + "\x00" + string(ChannelPush) + "\x00" + tc.addr))
		want := "d_" + hex.EncodeToString(h[:12])
		if got := DeliveryID(tc.n, ChannelPush, tc.addr); got != want {
			t.Errorf("DeliveryID(%q, push, %q) = %s, want %s", tc.n, tc.addr, got, want)
		}
	}
	if got := DeliveryID("ntf_1", ChannelPush, "tok"); got != "d_39533f6d08540be4283d89bb" {
		t.Errorf("DeliveryID(ntf_1, push, tok) = %s, want d_39533f6d08540be4283d89bb", got)
	}
}
