package local

import (
	"testing"

	"herald/internal/alimtalk"
	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/sandbox"
)

// The development config's sandbox AlimTalk app gets a sender that signs its requests with the
// key the sandbox was told to trust, so an AlimTalk reaches /sandbox/deliveries; no channel sends
// through it yet.
func TestDevSendersIncludeSandboxAlimTalk(t *testing.T) {
	sb, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	senders, closeAll, err := buildSenders(t.Context(), config.Dev(), sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAll() })
	var at notify.Sender
	for _, s := range senders {
		if s.Provider() == notify.ProviderAlimTalk {
			at = s
		}
	}
	if at == nil {
		t.Fatal("no AlimTalk sender built from the dev config")
	}
	res, err := at.Send(t.Context(), []notify.OutboundMessage{{DeliveryID: "d_1", Address: "+821012345678", App: "default",
		Content: notify.Content{Data: map[string]string{alimtalk.DataTemplate: "WELCOME", "#{name}": "하나"}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("send: %v %v", err, res[0].Err)
	}
	if got := sb.Recorder.List("alimtalk", "01012345678"); len(got) != 1 || got[0].Data["template_id"] != "WELCOME" {
		t.Errorf("recorded %+v", got)
	}
}
