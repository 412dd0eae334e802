package local

import (
	"encoding/json"
	"fmt"
	"testing"

	"herald/internal/alimtalk"
	"herald/internal/config"
	"herald/internal/notify"
	"herald/internal/notify/sendertest"
	"herald/internal/sandbox"
)

// TestSenders runs the notify.Sender conformance suite on each of the six senders the runtime
// builds (the development configuration), against a fresh sandbox per case.
func TestSenders(t *testing.T) {
	t.Parallel()
	content := notify.Content{Title: "Suite", Body: "Conformance"}
	bodies := func(sb *sandbox.Server, provider string) func(string) []string {
		return func(addr string) []string {
			var out []string
			for _, d := range sb.Recorder.List(provider, addr) {
				out = append(out, d.Body)
			}
			return out
		}
	}
	targets := map[notify.Provider]func(sb *sandbox.Server) sendertest.Target{
		notify.ProviderFCM: func(sb *sandbox.Server) sendertest.Target {
			return sendertest.Target{
				Received: bodies(sb, "fcm"),
				Good:     func(i int) string { return fmt.Sprintf("fcm-suite-token-%04d", i) },
				Dead:     "fcm-suite-unregistered-0001", DeadCode: notify.EDEADADDRESS,
				// Flaky: none — the Firebase SDK retries a 503 itself.
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelPush, App: "default", Content: content}
				},
			}
		},
		notify.ProviderAPNs: func(sb *sandbox.Server) sendertest.Target {
			return sendertest.Target{
				Received: bodies(sb, "apns"),
				Good:     func(i int) string { return fmt.Sprintf("apns-suite-token-%04d", i) },
				Dead:     "apns-suite-unregistered-0001", DeadCode: notify.EDEADADDRESS,
				Flaky: "apns-suite-unavailable1-0001",
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelPush, App: "default", Environment: "production", Content: content}
				},
			}
		},
		notify.ProviderSES: func(sb *sandbox.Server) sendertest.Target {
			return sendertest.Target{
				Received: bodies(sb, "ses"),
				Good:     func(i int) string { return fmt.Sprintf("suite%d@example.com", i) },
				Flaky:    "suite+unavailable1@example.com",
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelEmail, Content: content}
				},
			}
		},
		notify.ProviderTwilio: func(sb *sandbox.Server) sendertest.Target {
			return sendertest.Target{
				Received: bodies(sb, "twilio"),
				Good:     func(i int) string { return fmt.Sprintf("+821012%06d", i) },
				Dead:     "+15005550001", DeadCode: notify.EREJECTED,
				Flaky: "+15005554291",
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelSMS, Content: content}
				},
			}
		},
		notify.ProviderAlimTalk: func(*sandbox.Server) sendertest.Target {
			return sendertest.Target{
				Good:  func(i int) string { return fmt.Sprintf("+82105550%04d", 100+i) },
				Flaky: "+821055555031",
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelAlimTalk, App: "default",
						Content: notify.Content{Body: "하나님, 주문이 발송되었습니다.", Data: map[string]string{alimtalk.DataTemplate: "SUITE", "#{name}": "하나"}}}
				},
			}
		},
		notify.ProviderWebPush: func(sb *sandbox.Server) sendertest.Target {
			mint := func(label string) string {
				raw, err := sb.MintWebPushSubscription(label, config.Dev().Providers.WebPush.VAPIDPublicKey)
				if err != nil {
					t.Fatal(err)
				}
				var s notify.WebPushSubscription
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatal(err)
				}
				return s.Token()
			}
			good := map[int]string{}
			return sendertest.Target{
				Good: func(i int) string {
					if good[i] == "" {
						good[i] = mint("")
					}
					return good[i]
				},
				Dead: mint("gone"), DeadCode: notify.EDEADADDRESS,
				Flaky: mint("unavailable1"),
				Message: func(string) notify.OutboundMessage {
					return notify.OutboundMessage{Channel: notify.ChannelPush, App: "default", Content: content}
				},
			}
		},
	}
	for prov, target := range targets {
		t.Run(string(prov), func(t *testing.T) {
			t.Parallel()
			sendertest.Run(t, func(t *testing.T) sendertest.Target {
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
				tg := target(sb)
				for _, s := range senders {
					if s.Provider() == prov {
						tg.Sender = s
					}
				}
				if tg.Sender == nil {
					t.Fatalf("the development configuration builds no %s sender", prov)
				}
				return tg
			})
		})
	}
}
