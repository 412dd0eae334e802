package notify_test

import (
	"testing"

	"herald/internal/notify"
)

// TestIsRetryableSend: a provider's refusal of our credentials is retried on no send, though
// the same code from an AWS call is; every other code is decided by the one table as before.
func TestIsRetryableSend(t *testing.T) {
	for code, want := range map[string][2]bool{ // {IsRetryable, IsRetryableSend}
		notify.EAUTH:          {true, false},
		notify.ETHROTTLED:     {true, true},
		notify.EUNAVAILABLE:   {true, true},
		notify.EINTERNAL:      {true, true},
		notify.EREJECTED:      {false, false},
		notify.EUNKNOWNSTATUS: {false, false},
	} {
		err := notify.Errorf(code, "x")
		if got := [2]bool{notify.IsRetryable(err), notify.IsRetryableSend(err)}; got != want {
			t.Errorf("%s: retryable %v, on a send %v; want %v", code, got[0], got[1], want)
		}
	}
	if notify.IsRetryableSend(nil) {
		t.Error("nil is retryable")
	}
}
