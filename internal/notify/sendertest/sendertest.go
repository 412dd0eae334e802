// Package sendertest is the conformance suite of notify.Sender: what every provider's sender
// promises the send stage, run on each of them against the sandbox's providers (internal/local
// runs it on the senders the runtime builds). A sender's own tests keep only what is its own: its
// payload, its error table, its provider's quirks.
package sendertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

// Target is one sender and the addresses its provider (the sandbox) answers in known ways.
type Target struct {
	Sender notify.Sender
	// Good is the i-th of as many distinct addresses the provider accepts as a test asks for.
	Good func(i int) string
	// Dead is an address the provider refuses for good at once, and DeadCode the notify error
	// code it comes back with; "" where the provider has none (an email bounces later).
	Dead, DeadCode string
	// Flaky is an address the provider answers with a retryable error on its first attempt and
	// accepts on the next; "" where the provider's SDK retries such answers itself.
	Flaky string
	// Message fills in what a message to addr needs beyond the address (content, app, data).
	Message func(addr string) notify.OutboundMessage
	// Received is the bodies the provider received for addr, where the test can see them (the
	// sandbox's record); nil skips the check that each message's own body reached its address.
	Received func(addr string) []string
}

// Run runs every case on a fresh Target from newTarget.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, Target)
	}{
		{"Identity", testIdentity},
		{"OneResultPerMessageInOrder", testInOrder},
		{"ADeadAddressFailsAlone", testDeadAlone},
		{"RetryableThenAccepted", testRetryable},
		{"CanceledContextEndsTheCall", testCanceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newTarget(t))
		})
	}
}

func messages(tg Target, addrs ...string) []notify.OutboundMessage {
	out := make([]notify.OutboundMessage, len(addrs))
	for i, a := range addrs {
		m := tg.Message(a)
		m.Address = a
		m.DeliveryID = fmt.Sprintf("d_suite_%02d_%s", i, notify.AddressKey(m.Channel, a)[:8])
		m.NotificationID = "n_suite"
		if m.Attempt == 0 {
			m.Attempt = 1
		}
		out[i] = m
	}
	return out
}

// accepted reports whether r is a success: sent, or accepted with its verdict to come.
func accepted(r notify.SendResult) bool { return r.Err == nil }

func send(t *testing.T, tg Target, msgs []notify.OutboundMessage) []notify.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := tg.Sender.Send(ctx, msgs)
	if err != nil {
		t.Fatalf("Send(%d messages): %v", len(msgs), err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("Send(%d messages) returned %d results, want one per message", len(msgs), len(res))
	}
	for i := range res {
		if res[i].DeliveryID != msgs[i].DeliveryID {
			t.Fatalf("result %d names delivery %q, want %q: results come in the messages' order", i, res[i].DeliveryID, msgs[i].DeliveryID)
		}
	}
	return res
}

func testIdentity(t *testing.T, tg Target) {
	if !slices.Contains(notify.Providers, tg.Sender.Provider()) {
		t.Errorf("Provider() = %q, not one of %v", tg.Sender.Provider(), notify.Providers)
	}
	if tg.Sender.MaxBatch() < 1 {
		t.Errorf("MaxBatch() = %d, want at least 1", tg.Sender.MaxBatch())
	}
}

// A full batch (at most 500), a dead address every 50th where the provider has one, each message
// with its own body: one result per message in order, only the dead ones failing, and each body
// at its own address.
func testInOrder(t *testing.T, tg Target) {
	n := min(tg.Sender.MaxBatch(), 500)
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = tg.Good(i)
		if tg.Dead != "" && i%50 == 7 {
			addrs[i] = tg.Dead
		}
	}
	msgs := messages(tg, addrs...)
	for i := range msgs {
		msgs[i].Content.Body = fmt.Sprintf("message %d", i)
	}
	for i, r := range send(t, tg, msgs) {
		switch {
		case addrs[i] == tg.Dead && notify.ErrorCode(r.Err) != tg.DeadCode:
			t.Errorf("message %d to the dead address: %v, want code %s", i, r.Err, tg.DeadCode)
		case addrs[i] != tg.Dead && !accepted(r):
			t.Errorf("message %d to a good address: %v", i, r.Err)
		}
	}
	if tg.Received == nil {
		return
	}
	for i, a := range addrs {
		if a == tg.Dead {
			continue
		}
		if got := tg.Received(a); len(got) != 1 || !strings.HasSuffix(got[0], fmt.Sprintf("message %d", i)) {
			t.Errorf("address %d received %q, want its own message %d", i, got, i)
		}
	}
}

func testDeadAlone(t *testing.T, tg Target) {
	if tg.Dead == "" {
		t.Skip("the provider has no address it refuses at once")
	}
	addrs := []string{tg.Good(0), tg.Dead, tg.Good(1)}
	if tg.Sender.MaxBatch() < len(addrs) {
		addrs = []string{tg.Dead}
	}
	for i, r := range send(t, tg, messages(tg, addrs...)) {
		switch {
		case addrs[i] == tg.Dead && notify.ErrorCode(r.Err) != tg.DeadCode:
			t.Errorf("the dead address: %v, want code %s", r.Err, tg.DeadCode)
		case addrs[i] == tg.Dead && notify.IsRetryable(r.Err):
			t.Errorf("the dead address's %v is retryable", r.Err)
		case addrs[i] != tg.Dead && !accepted(r):
			t.Errorf("message %d beside the dead address: %v", i, r.Err)
		}
	}
}

func testRetryable(t *testing.T, tg Target) {
	if tg.Flaky == "" {
		t.Skip("the provider's SDK retries its retryable answers itself")
	}
	first := send(t, tg, messages(tg, tg.Flaky))[0]
	if first.Err == nil || !notify.IsRetryable(first.Err) {
		t.Fatalf("the first attempt: %v, want a retryable error", first.Err)
	}
	msgs := messages(tg, tg.Flaky)
	msgs[0].Attempt = 2
	if r := send(t, tg, msgs)[0]; !accepted(r) {
		t.Fatalf("the second attempt: %v, want it accepted", r.Err)
	}
}

func testCanceled(t *testing.T, tg Target) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := make(chan struct{})
	var res []notify.SendResult
	var err error
	msgs := messages(tg, tg.Good(0), tg.Good(1))[:min(2, tg.Sender.MaxBatch())]
	go func() {
		defer close(done)
		res, err = tg.Sender.Send(ctx, msgs)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Send with a canceled context did not return in 10s")
	}
	if err == nil && len(res) != len(msgs) {
		t.Fatalf("Send with a canceled context returned %d results for %d messages", len(res), len(msgs))
	}
}
