package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
	"herald/internal/notify"
)

// setupFallback is setup with AlimTalk's SMS fallback configured on (providers.alimtalk.fallback).
func setupFallback(t *testing.T, fallback string) *env {
	t.Helper()
	return setupFallbackWith(t, fallback)
}

// setupFallbackWith is setupFallback with the configuration edited further.
func setupFallbackWith(t *testing.T, fallback string, edit ...func(*config.Config)) *env {
	t.Helper()
	cfg := config.Dev()
	cfg.Providers.AlimTalk.VerdictCheck = config.Duration(200 * time.Millisecond)
	cfg.Retry.Base = config.Duration(100 * time.Millisecond)
	cfg.Retry.Max = config.Duration(2 * time.Second)
	cfg.Providers.AlimTalk.Fallback = fallback
	for _, e := range edit {
		e(cfg)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &env{t: t, rt: rt, log: logs}
}

type alimtalkStatus struct {
	Status          string                                                `json:"status"`
	Stats           map[string]struct{ Total, Sent, Failed, Skipped int } `json:"stats"`
	SkippedByReason map[string]int                                        `json:"skipped_by_reason"`
	Deliveries      []struct {
		ID                string `json:"id"`
		Channel           string `json:"channel"`
		Address           string `json:"address"`
		Status            string `json:"status"`
		Reason            string `json:"reason"`
		Detail            string `json:"detail"`
		ProviderMessageID string `json:"provider_message_id"`
	} `json:"deliveries"`
}

func (e *env) waitAlimTalk(id string) alimtalkStatus {
	e.t.Helper()
	e.waitFinal(id)
	var st alimtalkStatus
	if code := e.do("GET", "/v1/notifications/"+id+"?limit=1000", nil, &st); code != http.StatusOK {
		e.t.Fatalf("get %s = %d", id, code)
	}
	return st
}

// A stored template's alimtalk content — the template code and Kakao's #{var} text — reaches
// Solapi (the sandbox) with the variables filled from the send's data. A recipient KakaoTalk
// can't reach (Kakao's 3104, reported late for numbers ending 0001) gets the same text as an SMS, and the
// notification shows both attempts; the recipient counts as sent, not failed.
func TestAlimTalkTemplateAndSMSFallback(t *testing.T) {
	t.Parallel()
	e := setupFallback(t, "sms")
	e.mustDo("PUT", "/v1/users/minji/contacts", map[string]any{"phone": "+821012345678"}, 200)
	e.mustDo("PUT", "/v1/users/jun/contacts", map[string]any{"phone": "+821055550001"}, 200)
	e.mustDo("PUT", "/v1/templates/order-shipped", map[string]any{
		"channels": map[string]any{
			"alimtalk": map[string]any{
				"body": "#{name}님, 주문 #{order_id}이 발송되었습니다.",
				"data": map[string]any{"alimtalk_template": "TPL_SHIPPED_01"},
			},
		},
		"variables": []map[string]any{{"name": "name"}, {"name": "order_id"}},
	}, http.StatusCreated)

	var acc struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", map[string]any{
		"channels":   []string{"alimtalk"},
		"template":   map[string]any{"name": "order-shipped", "data": map[string]any{"name": "민지", "order_id": 1001}},
		"recipients": []map[string]any{{"user_id": "minji"}, {"user_id": "jun"}},
	}, &acc); code != http.StatusAccepted {
		t.Fatalf("send = %d", code)
	}
	st := e.waitAlimTalk(acc.ID)
	if st.Status != "SENT" {
		t.Fatalf("status %s, want SENT (the fallback was sent); deliveries %+v", st.Status, st.Deliveries)
	}

	at := e.rt.Sandbox.Recorder.List("alimtalk", "01012345678")
	if len(at) != 1 || at[0].Data["template_id"] != "TPL_SHIPPED_01" || at[0].Data["#{name}"] != "민지" || at[0].Data["#{order_id}"] != "1001" {
		t.Fatalf("alimtalk got %+v", at)
	}
	// Solapi accepts it; Kakao's verdict comes later, through the message list.
	if got := e.rt.Sandbox.Recorder.List("alimtalk", "01055550001"); len(got) != 1 || got[0].Data["late_verdict"] != "3104" {
		t.Fatalf("the AlimTalk to a non-KakaoTalk number: %+v, want one accepted, its 3104 to come late", got)
	}
	if got := e.rt.Sandbox.Recorder.List("twilio", "+821012345678"); len(got) != 0 {
		t.Fatalf("a reachable recipient got an SMS too: %+v", got)
	}
	sms := e.rt.Sandbox.Recorder.List("twilio", "+821055550001")
	if len(sms) != 1 || sms[0].Body != "민지님, 주문 1001이 발송되었습니다." {
		t.Fatalf("fallback sms got %+v", sms)
	}

	var alim, fb string
	for _, d := range st.Deliveries {
		switch {
		case d.Channel == "alimtalk" && d.Status == "SKIPPED":
			if d.Reason != "unreachable" || !strings.Contains(d.Detail, "3104") {
				t.Fatalf("unreachable alimtalk delivery %+v", d)
			}
			alim, fb = d.ID, d.Detail
		case d.Channel == "sms":
			if d.Status != "SENT" || !strings.HasPrefix(d.Detail, "SMS fallback of alimtalk delivery ") {
				t.Fatalf("fallback delivery %+v", d)
			}
		}
	}
	var smsID, smsDetail string
	for _, d := range st.Deliveries {
		if d.Channel == "sms" {
			smsID, smsDetail = d.ID, d.Detail
		}
	}
	if alim == "" || smsID == "" || !strings.Contains(fb, "fell back to SMS delivery "+smsID) || !strings.Contains(smsDetail, alim) {
		t.Fatalf("the two attempts don't name each other: %+v", st.Deliveries)
	}
	if len(st.Deliveries) != 3 {
		t.Fatalf("%d deliveries, want 3 (two alimtalk, one sms): %+v", len(st.Deliveries), st.Deliveries)
	}
	if c := st.Stats["alimtalk"]; c.Total != 2 || c.Sent != 1 || c.Skipped != 1 || c.Failed != 0 {
		t.Fatalf("alimtalk stats %+v", c)
	}
	if c := st.Stats["sms"]; c.Total != 1 || c.Sent != 1 {
		t.Fatalf("sms stats %+v", c)
	}
	if st.SkippedByReason["unreachable"] != 1 {
		t.Fatalf("skipped by reason %+v", st.SkippedByReason)
	}
}

// Without a fallback (the default), an unreachable recipient's AlimTalk fails "unreachable";
// a send may ask for the fallback itself (channel_content.alimtalk.data.alimtalk_fallback), and
// a text longer than one SMS goes as LMS. A number that is not Korean is skipped unsent.
func TestAlimTalkFallbackPerSendAndUnsupported(t *testing.T) {
	t.Parallel()
	e := setupFallback(t, "")
	long := strings.Repeat("가", 50) // 100 EUC-KR bytes: over one SMS
	send := func(fallback string) string {
		data := map[string]string{"alimtalk_template": "TPL_NOTICE"}
		if fallback != "" {
			data["alimtalk_fallback"] = fallback
		}
		var acc struct {
			ID string `json:"id"`
		}
		if code := e.do("POST", "/v1/notifications", map[string]any{
			"channels":        []string{"alimtalk"},
			"content":         map[string]any{"body": long},
			"channel_content": map[string]any{"alimtalk": map[string]any{"data": data}},
			"recipients":      []map[string]any{{"phone": "+821077770001"}, {"phone": "+14155550100"}},
		}, &acc); code != http.StatusAccepted {
			t.Fatalf("send = %d", code)
		}
		return acc.ID
	}

	st := e.waitAlimTalk(send(""))
	if st.Status != "FAILED" {
		t.Fatalf("without a fallback: status %s, deliveries %+v", st.Status, st.Deliveries)
	}
	for _, d := range st.Deliveries {
		switch {
		case d.Channel != "alimtalk":
			t.Fatalf("a delivery on %s without a fallback: %+v", d.Channel, d)
		case d.Status == "FAILED" && d.Reason == "unreachable":
		case d.Status == "SKIPPED" && d.Reason == "unsupported_address":
		default:
			t.Fatalf("delivery %+v", d)
		}
	}
	if got := e.rt.Sandbox.Recorder.List("twilio", "+821077770001"); len(got) != 0 {
		t.Fatalf("sms sent without a fallback: %+v", got)
	}

	st = e.waitAlimTalk(send("sms"))
	if st.Status != "SENT" {
		t.Fatalf("with a fallback: status %s, deliveries %+v", st.Status, st.Deliveries)
	}
	var lms bool
	for _, d := range st.Deliveries {
		if d.Channel == "sms" && d.Status == "SENT" && strings.HasPrefix(d.Detail, "LMS fallback of ") {
			lms = true
		}
	}
	if !lms {
		t.Fatalf("no LMS fallback delivery: %+v", st.Deliveries)
	}
	if sms := e.rt.Sandbox.Recorder.List("twilio", "+821077770001"); len(sms) != 1 || sms[0].Body != long {
		t.Fatalf("fallback got %+v", sms)
	}
}

// AlimTalk is informational only: a marketing send (or campaign) on it is refused naming the
// channel, and an alimtalk channel without a template code names the missing field.
func TestAlimTalkRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var errResp struct {
		Error struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"error"`
	}
	code := e.do("POST", "/v1/notifications", map[string]any{
		"category": "marketing", "channels": []string{"push", "alimtalk"},
		"content":         map[string]any{"body": "sale"},
		"channel_content": map[string]any{"alimtalk": map[string]any{"data": map[string]any{"alimtalk_template": "T"}}},
		"recipients":      []map[string]any{{"user_id": "a"}},
	}, &errResp)
	if code != http.StatusBadRequest || errResp.Error.Field != "channels[1]" {
		t.Fatalf("marketing alimtalk = %d %+v, want 400 channels[1]", code, errResp)
	}
	errResp.Error.Field = ""
	code = e.do("POST", "/v1/notifications", map[string]any{
		"channels": []string{"alimtalk"}, "content": map[string]any{"body": "hi"},
		"recipients": []map[string]any{{"phone": "+821012345678"}},
	}, &errResp)
	if code != http.StatusBadRequest || errResp.Error.Field != "channel_content.alimtalk.data.alimtalk_template" {
		t.Fatalf("no template code = %d %+v", code, errResp)
	}
}

// Kakao's verdict comes after Solapi accepted the AlimTalk: the sandbox reports numbers ending
// 0011 "not a KakaoTalk user" and 0010 delivered only from its message list's second report.
// Herald reads the list until the verdicts are in: the late-unreachable recipient gets one SMS
// with the same text (the notification shows both attempts), the late-delivered one is SENT
// with no SMS, and a verdict check delivered again sends nothing twice.
func TestAlimTalkLateVerdicts(t *testing.T) {
	t.Parallel()
	e := setupFallback(t, "sms")
	const text = "주문 1001이 발송되었습니다."
	var acc struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", map[string]any{
		"channels":        []string{"alimtalk"},
		"content":         map[string]any{"body": text},
		"channel_content": map[string]any{"alimtalk": map[string]any{"data": map[string]string{"alimtalk_template": "TPL_SHIPPED_01"}}},
		"recipients":      []map[string]any{{"phone": "+821055550011"}, {"phone": "+821055550010"}, {"phone": "+821012345678"}},
	}, &acc); code != http.StatusAccepted {
		t.Fatalf("send = %d", code)
	}
	st := e.waitAlimTalk(acc.ID)
	if st.Status != "SENT" {
		t.Fatalf("status %s, want SENT; deliveries %+v", st.Status, st.Deliveries)
	}
	for _, n := range []string{"01055550011", "01055550010", "01012345678"} {
		if got := e.rt.Sandbox.Recorder.List("alimtalk", n); len(got) != 1 {
			t.Fatalf("alimtalk to %s: %+v, want one accepted", n, got)
		}
	}
	sms := e.rt.Sandbox.Recorder.List("twilio", "+821055550011")
	if len(sms) != 1 || sms[0].Body != text {
		t.Fatalf("fallback sms %+v, want one with the AlimTalk's text", sms)
	}
	for _, n := range []string{"+821055550010", "+821012345678"} {
		if got := e.rt.Sandbox.Recorder.List("twilio", n); len(got) != 0 {
			t.Fatalf("a delivered recipient %s got an SMS: %+v", n, got)
		}
	}
	var alimID, pmid, smsID string
	sent := 0
	for _, d := range st.Deliveries {
		switch {
		case d.Channel == "sms":
			smsID = d.ID
			if d.Status != "SENT" || !strings.HasPrefix(d.Detail, "SMS fallback of alimtalk delivery ") {
				t.Fatalf("fallback delivery %+v", d)
			}
		case d.Status == "SKIPPED":
			alimID, pmid = d.ID, d.ProviderMessageID
			if d.Reason != "unreachable" || !strings.Contains(d.Detail, "3104") || !strings.HasPrefix(pmid, "M4V") {
				t.Fatalf("late unreachable alimtalk delivery %+v", d)
			}
		case d.Status == "SENT" && strings.HasPrefix(d.ProviderMessageID, "M4V") && d.Reason == "":
			sent++
		default:
			t.Fatalf("delivery %+v", d)
		}
	}
	if len(st.Deliveries) != 4 || sent != 2 || alimID == "" || smsID == "" {
		t.Fatalf("deliveries %+v: want 2 delivered, 1 unreachable and its SMS", st.Deliveries)
	}
	if c := st.Stats["alimtalk"]; c.Total != 3 || c.Sent != 2 || c.Skipped != 1 {
		t.Fatalf("alimtalk stats %+v", c)
	}

	// The verdict check of the unreachable delivery, delivered again.
	body, _ := json.Marshal(map[string]any{"kind": "verdict_check", "notification_id": acc.ID, "provider": "alimtalk",
		"app": "default", "check": 1, "sent_at": time.Now().UTC(),
		"items": []map[string]any{{"id": alimID, "address": "01055550011", "provider_message_id": pmid, "attempt": 1}}})
	if err := e.rt.Queue.Send(t.Context(), "send-realtime", notify.OutMessage{Body: body}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		qs, err := e.rt.Queue.Stats(t.Context(), "send-realtime")
		if err != nil {
			t.Fatal(err)
		}
		if qs.Visible+qs.InFlight+qs.Delayed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the redelivered check was not handled: %+v", qs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.rt.Sandbox.Recorder.List("twilio", "+821055550011"); len(got) != 1 {
		t.Fatalf("after a redelivered check: %d SMS, want still 1", len(got))
	}
	var again alimtalkStatus
	if code := e.do("GET", "/v1/notifications/"+acc.ID+"?limit=1000", nil, &again); code != http.StatusOK {
		t.Fatalf("get = %d", code)
	}
	if fmt.Sprint(again.Stats) != fmt.Sprint(st.Stats) || len(again.Deliveries) != 4 {
		t.Fatalf("a redelivered check changed the notification: %+v, was %+v", again.Stats, st.Stats)
	}
}

// TestAlimTalkLostAnswerDeliveredOnce: Solapi accepted an AlimTalk and the answer was lost on its
// way back (the sandbox drops the connection after storing the message). The retry looks the
// delivery up in Solapi's message list, finds it, and sends nothing again: one AlimTalk, and the
// delivery SENT under the found message's id.
func TestAlimTalkLostAnswerDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := setupFallbackWith(t, "sms", func(cfg *config.Config) {
		cfg.Retry.Providers = map[string]config.ProviderRetry{"alimtalk": {MaxRetries: 3,
			Delays: []config.Duration{config.Duration(time.Second), config.Duration(time.Second), config.Duration(time.Second)}}}
	})
	var acc struct {
		ID string `json:"id"`
	}
	if code := e.do("POST", "/v1/notifications", map[string]any{
		"channels":        []string{"alimtalk"},
		"content":         map[string]any{"body": "주문 2002가 발송되었습니다."},
		"channel_content": map[string]any{"alimtalk": map[string]any{"data": map[string]string{"alimtalk_template": "TPL_lost1"}}},
		"recipients":      []map[string]any{{"phone": "+821012342002"}},
	}, &acc); code != http.StatusAccepted {
		t.Fatalf("send = %d", code)
	}
	st := e.waitAlimTalk(acc.ID)
	talks := e.rt.Sandbox.Recorder.List("alimtalk", "01012342002")
	if len(talks) != 1 {
		t.Fatalf("%d AlimTalks accepted, want exactly 1 (the answer was lost, not the message)", len(talks))
	}
	if st.Status != "SENT" || len(st.Deliveries) != 1 || st.Deliveries[0].Status != "SENT" ||
		st.Deliveries[0].ProviderMessageID != talks[0].MessageID {
		t.Fatalf("status %s, deliveries %+v; want one SENT under %s", st.Status, st.Deliveries, talks[0].MessageID)
	}
	if sms := e.rt.Sandbox.Recorder.List("twilio", "+821012342002"); len(sms) != 0 {
		t.Fatalf("an SMS fallback was sent for a delivered AlimTalk: %+v", sms)
	}
}

// TestStartRefusesAlimTalkWithoutFrom: Solapi sends nothing without a registered sender
// number, so a configuration with AlimTalk and no from does not start, and says which key.
func TestStartRefusesAlimTalkWithoutFrom(t *testing.T) {
	t.Parallel()
	cfg := config.Dev()
	cfg.Providers.AlimTalk.From = ""
	rt, err := Start(context.Background(), Options{Config: cfg, DataDir: t.TempDir(), Addr: "127.0.0.1:0",
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), SandboxInMemory: true})
	if err == nil {
		_ = rt.Shutdown(context.Background())
		t.Fatal("started without providers.alimtalk.from")
	}
	if !strings.Contains(err.Error(), "providers.alimtalk.from") {
		t.Fatalf("error %q does not name providers.alimtalk.from", err)
	}
}
