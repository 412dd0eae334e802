package sandbox_test

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/sandbox"
)

func TestAlimTalkFake(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	const key, secret = "NCSTESTKEY", "test-secret"
	srv.TrustAlimTalkKey(key, secret)

	var saltSeq atomic.Int64
	sign := func(method, key, secret string, at time.Time) string {
		date := at.UTC().Format(time.RFC3339)
		salt := fmt.Sprintf("salt%012d", saltSeq.Add(1))
		var h func() hash.Hash = sha256.New
		if method == "HMAC-MD5" {
			h = md5.New
		}
		mac := hmac.New(h, []byte(secret))
		mac.Write([]byte(date + salt))
		return fmt.Sprintf("%s apiKey=%s, date=%s, salt=%s, signature=%s", method, key, date, salt, hex.EncodeToString(mac.Sum(nil)))
	}
	msg := func(to, template string, extra string) string {
		return fmt.Sprintf(`{"to":%q,"type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":%q,"variables":{"#{name}":"하나"},"disableSms":true%s}}`, to, template, extra)
	}
	body := func(msgs ...string) string {
		return `{"showMessageList":true,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	now := time.Now()
	reused := sign("HMAC-SHA256", key, secret, now)
	tests := []struct {
		name   string
		auth   string
		body   string
		status int
		code   string   // errorCode of a non-200
		failed []string // statusCode of each failedMessageList entry, in order
		sent   int
	}{
		{"no auth", "", body(msg("01012345678", "T", "")), 403, "InvalidAPIKey", nil, 0},
		{"garbled auth", "Bearer x", body(msg("01012345678", "T", "")), 403, "InvalidAPIKey", nil, 0},
		{"unknown key", sign("HMAC-SHA256", "NCSOTHER", secret, now), body(msg("01012345678", "T", "")), 403, "InvalidAPIKey", nil, 0},
		{"wrong secret", sign("HMAC-SHA256", key, "other", now), body(msg("01012345678", "T", "")), 403, "SignatureDoesNotMatch", nil, 0},
		{"clock 16 minutes behind", sign("HMAC-SHA256", key, secret, now.Add(-16*time.Minute)), body(msg("01012345678", "T", "")), 403, "RequestTimeTooSkewed", nil, 0},
		{"not JSON", sign("HMAC-SHA256", key, secret, now), `{"messages":`, 400, "ValidationError", nil, 0},
		{"no messages", sign("HMAC-SHA256", key, secret, now), `{}`, 400, "ValidationError", nil, 0},
		{"empty messages", sign("HMAC-SHA256", key, secret, now), `{"messages":[]}`, 400, "ValidationError", nil, 0},
		{"misspelt field", sign("HMAC-SHA256", key, secret, now), `{"messages":[{"to":"01012345678","kakaoOption":{}}]}`, 400, "ValidationError", nil, 0},
		{"one accepted", reused, body(msg("01012345678", "T", "")), 200, "", nil, 1},
		{"signature reused", reused, body(msg("01012345679", "T", "")), 403, "DuplicatedSignature", nil, 0},
		{"HMAC-MD5", sign("HMAC-MD5", key, secret, now), body(msg("01012345670", "T", "")), 200, "", nil, 1},
		{"per-message refusals", sign("HMAC-SHA256", key, secret, now), body(
			`{"to":"01012340001","type":"ATA","kakaoOptions":{"pfId":"PF1"}}`,
			msg("0212345678", "T", ""),
			`{"to":"01012340003","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T","variables":{"name":"x"}}}`,
			msg("01012340004", "T", `,"buttons":[{"buttonName":"a","buttonType":"WL"}]`),
			msg("01012340005", "T", `,"buttons":[{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"}]`),
			`{"to":"01012340006","type":"SMS","text":"hi"}`,
			msg("01055550001", "T", ""),
			msg("01055550002", "T", ""),
			msg("01012340009", "T_mismatch", ""),
			msg("01012340010", "T", ""),
			msg("01012340010", "T", ""),
		), 200, "", []string{"1010", "1011", "1011", "1045", "1050", "1025", "3104", "3107", "3103", "1026"}, 1},
	}
	for _, tt := range tests { // in order: the signature reuse follows its first use
		req, _ := http.NewRequest("POST", srv.URL()+"/messages/v4/send-many/detail", strings.NewReader(tt.body))
		req.Header.Set("Content-Type", "application/json")
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			ErrorCode    string `json:"errorCode"`
			ErrorMessage string `json:"errorMessage"`
			GroupInfo    struct {
				GroupID string         `json:"groupId"`
				Count   map[string]int `json:"count"`
			} `json:"groupInfo"`
			FailedMessageList []struct {
				To, StatusCode, StatusMessage, MessageID string
			} `json:"failedMessageList"`
			MessageList []struct {
				MessageID, StatusCode string
			} `json:"messageList"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if resp.StatusCode != tt.status || out.ErrorCode != tt.code {
			t.Errorf("%s: %d %s %s, want %d %s", tt.name, resp.StatusCode, out.ErrorCode, out.ErrorMessage, tt.status, tt.code)
			continue
		}
		if tt.status != 200 {
			if out.ErrorMessage == "" {
				t.Errorf("%s: no errorMessage", tt.name)
			}
			continue
		}
		var codes []string
		for _, f := range out.FailedMessageList {
			codes = append(codes, f.StatusCode)
			if f.StatusMessage == "" || !strings.HasPrefix(f.MessageID, "M4V") {
				t.Errorf("%s: failed entry %+v", tt.name, f)
			}
		}
		if strings.Join(codes, ",") != strings.Join(tt.failed, ",") {
			t.Errorf("%s: failed %v, want %v", tt.name, codes, tt.failed)
		}
		if len(out.MessageList) != tt.sent || out.GroupInfo.Count["registeredSuccess"] != tt.sent ||
			out.GroupInfo.Count["registeredFailed"] != len(tt.failed) || !strings.HasPrefix(out.GroupInfo.GroupID, "G4V") {
			t.Errorf("%s: %d accepted, count %v, group %q", tt.name, len(out.MessageList), out.GroupInfo.Count, out.GroupInfo.GroupID)
		}
		for _, m := range out.MessageList {
			if m.StatusCode != "2000" || !strings.HasPrefix(m.MessageID, "M4V") {
				t.Errorf("%s: accepted entry %+v", tt.name, m)
			}
		}
	}

	// What was accepted is listed like every provider's deliveries.
	resp, err := hc.Get(srv.URL() + "/sandbox/deliveries?provider=alimtalk")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Total      int                `json:"total"`
		Deliveries []sandbox.Delivery `json:"deliveries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Total != 3 {
		t.Fatalf("listed %d alimtalk deliveries, want 3: %+v", list.Total, list.Deliveries)
	}
	d := list.Deliveries[0]
	if d.Address != "01012345678" || d.App != "PF1" || d.Data["template_id"] != "T" || d.Data["#{name}"] != "하나" || !strings.HasPrefix(d.MessageID, "M4V") {
		t.Errorf("delivery %+v", d)
	}
}
