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
		return fmt.Sprintf(`{"to":%q,"from":"0212345678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":%q,"variables":{"#{name}":"하나"},"disableSms":true%s}}`, to, template, extra)
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
		{"no sender number", sign("HMAC-SHA256", key, secret, now), `{"messages":[{"to":"01012345678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T"}}]}`, 400, "ValidationError", nil, 0},
		{"a sender number with dashes", sign("HMAC-SHA256", key, secret, now), `{"messages":[{"to":"01012345678","from":"02-1234-5678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T"}}]}`, 400, "ValidationError", nil, 0},
		{"one accepted", reused, body(msg("01012345678", "T", "")), 200, "", nil, 1},
		{"signature reused", reused, body(msg("01012345679", "T", "")), 403, "DuplicatedSignature", nil, 0},
		{"HMAC-MD5", sign("HMAC-MD5", key, secret, now), body(msg("01012345670", "T", "")), 200, "", nil, 1},
		{"per-message refusals", sign("HMAC-SHA256", key, secret, now), body(
			`{"to":"01012340001","from":"0212345678","type":"ATA","kakaoOptions":{"pfId":"PF1"}}`,
			msg("0212345678", "T", ""),
			`{"to":"01012340003","from":"0212345678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T","variables":{"name":"x"}}}`,
			msg("01012340004", "T", `,"buttons":[{"buttonName":"a","buttonType":"WL"}]`),
			msg("01012340005", "T", `,"buttons":[{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"},{"buttonName":"a","buttonType":"BK"}]`),
			`{"to":"01012340006","from":"0212345678","type":"SMS","text":"hi"}`,
			msg("01055550001", "T", ""),
			msg("01055550002", "T", ""),
			msg("01012340009", "T_mismatch", ""),
			msg("01012340010", "T", ""),
			msg("01012340010", "T", ""),
		), 200, "", []string{"1010", "1011", "1011", "1045", "1050", "1025", "1043", "1026"}, 3},
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
	if list.Total != 5 { // two single sends, and the per-message batch's three accepted
		t.Fatalf("listed %d alimtalk deliveries, want 5: %+v", list.Total, list.Deliveries)
	}
	d := list.Deliveries[0]
	if d.Address != "01012345678" || d.App != "PF1" || d.Data["template_id"] != "T" || d.Data["#{name}"] != "하나" || !strings.HasPrefix(d.MessageID, "M4V") {
		t.Errorf("delivery %+v", d)
	}
}

// The message list reports accepted messages by id or group, as Solapi's does: delivered (4000)
// at once, and a late number's verdict (0011: 3104) only from its second report, after a
// pending 3000.
func TestAlimTalkFakeMessageList(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	const key, secret = "NCSLISTKEY", "list-secret"
	srv.TrustAlimTalkKey(key, secret)
	var salt atomic.Int64
	auth := func() string {
		date := time.Now().UTC().Format(time.RFC3339)
		s := fmt.Sprintf("listsalt%08d", salt.Add(1))
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(date + s))
		return fmt.Sprintf("HMAC-SHA256 apiKey=%s, date=%s, salt=%s, signature=%s", key, date, s, hex.EncodeToString(mac.Sum(nil)))
	}
	do := func(method, path, body, authz string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var sent struct {
		GroupInfo   struct{ GroupID string } `json:"groupInfo"`
		MessageList []struct {
			MessageID, StatusCode, To string
		} `json:"messageList"`
	}
	body := `{"showMessageList":true,"messages":[` +
		`{"to":"01055550011","from":"0212345678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T","disableSms":true}},` +
		`{"to":"01012345678","from":"0212345678","type":"ATA","kakaoOptions":{"pfId":"PF1","templateId":"T","disableSms":true}}]}`
	if code := do("POST", "/messages/v4/send-many/detail", body, auth(), &sent); code != 200 || len(sent.MessageList) != 2 {
		t.Fatalf("send = %d %+v", code, sent)
	}
	late, ok := sent.MessageList[0].MessageID, sent.MessageList[1].MessageID
	for _, m := range sent.MessageList {
		if m.StatusCode != "2000" {
			t.Fatalf("accepted %+v, want 2000 (the verdict comes later)", m)
		}
	}

	type listed struct {
		Limit       int `json:"limit"`
		MessageList map[string]struct {
			MessageID, GroupID, StatusCode, To string
			Reason                             *string
		} `json:"messageList"`
	}
	list := func(query string) listed {
		t.Helper()
		var l listed
		if code := do("GET", "/messages/v4/list?"+query, "", auth(), &l); code != 200 {
			t.Fatalf("list %s = %d", query, code)
		}
		return l
	}
	l := list("messageIds=" + late + "&messageIds=" + ok + "&limit=2")
	if len(l.MessageList) != 2 || l.MessageList[late].StatusCode != "3000" || l.MessageList[ok].StatusCode != "4000" ||
		l.MessageList[ok].GroupID != sent.GroupInfo.GroupID || l.Limit != 2 {
		t.Fatalf("first report %+v", l)
	}
	l = list("criteria=messageId&cond=eq&value=" + late)
	if m := l.MessageList[late]; len(l.MessageList) != 1 || m.StatusCode != "3104" || m.Reason == nil || *m.Reason == "" || m.To != "01055550011" {
		t.Fatalf("second report %+v, want 3104 with its reason", l)
	}
	if l := list("groupId=" + sent.GroupInfo.GroupID); len(l.MessageList) != 2 {
		t.Fatalf("by group: %+v", l)
	}
	if l := list("messageIds=M4VNOTSENT"); len(l.MessageList) != 0 {
		t.Fatalf("an unknown id is listed: %+v", l)
	}

	var e struct{ ErrorCode string }
	if code := do("GET", "/messages/v4/list?messageIds="+late+"&limit=0", "", auth(), &e); code != 400 || e.ErrorCode != "ValidationError" {
		t.Errorf("limit=0 = %d %+v", code, e)
	}
	if code := do("GET", "/messages/v4/list?criteria=statusCode&cond=eq&value=4000", "", auth(), &e); code != 400 || e.ErrorCode != "ValidationError" {
		t.Errorf("an unsupported criteria = %d %+v", code, e)
	}
	if code := do("GET", "/messages/v4/list?messageIds="+late, "", "", &e); code != 403 || e.ErrorCode != "InvalidAPIKey" {
		t.Errorf("no Authorization = %d %+v", code, e)
	}
	if got := srv.Recorder.List("alimtalk", "01055550011"); len(got) != 1 || got[0].Data["late_verdict"] != "3104" {
		t.Errorf("the late number is not recorded as accepted: %+v", got)
	}
}
