package sandbox_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"herald/internal/sandbox"
)

func TestTwilioFake(t *testing.T) {
	t.Parallel()
	srv, err := sandbox.Start(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Its own client, whose idle connections close before the sandbox does (cleanups run last
	// first): Shutdown would otherwise wait for a connection dialed but never used.
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)

	const account = "AC0123456789abcdef0123456789abcdef"
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	tests := []struct {
		name       string
		user, pass string
		form       url.Values
		status     int
		code       int
	}{
		{"no auth", "", "", form("To", "+15551234567", "From", "+15005550006", "Body", "hi"), 401, 20003},
		{"other account", "AC999", "token", form("To", "+15551234567", "From", "+15005550006", "Body", "hi"), 401, 20003},
		{"wrong token", account, "invalidtoken", form("To", "+15551234567", "From", "+15005550006", "Body", "hi"), 401, 20003},
		{"no To", account, "token", form("From", "+15005550006", "Body", "hi"), 400, 21604},
		{"no From", account, "token", form("To", "+15551234567", "Body", "hi"), 400, 21603},
		{"no Body", account, "token", form("To", "+15551234567", "From", "+15005550006"), 400, 21602},
		{"too long", account, "token", form("To", "+15551234567", "From", "+15005550006", "Body", strings.Repeat("x", 1601)), 400, 21617},
		{"not E.164", account, "token", form("To", "5551234567", "From", "+15005550006", "Body", "hi"), 400, 21211},
		{"magic invalid", account, "token", form("To", "+15005550001", "From", "+15005550006", "Body", "hi"), 400, 21211},
		{"magic landline", account, "token", form("To", "+15005550009", "From", "+15005550006", "Body", "hi"), 400, 21614},
		{"api key", "SK0123456789abcdef0123456789abcdef", "secret", form("To", "+15551234567", "From", "+15005550006", "Body", "hi"), 201, 0},
		{"service", account, "token", form("To", "+15551234568", "MessagingServiceSid", "MG0123", "Body", "hi"), 201, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("POST", srv.URL()+"/2010-04-01/Accounts/"+account+"/Messages.json", strings.NewReader(tt.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tt.status, body)
			}
			if tt.code != 0 {
				if body["code"] != float64(tt.code) || body["status"] != float64(tt.status) || body["more_info"] == "" {
					t.Errorf("error body %v, want code %d", body, tt.code)
				}
				return
			}
			sid, _ := body["sid"].(string)
			if !strings.HasPrefix(sid, "SM") || body["to"] != tt.form.Get("To") || body["body"] != "hi" || body["account_sid"] != account {
				t.Errorf("message %v", body)
			}
			if tt.form.Get("MessagingServiceSid") != "" && (body["status"] != "accepted" || body["from"] != nil) {
				t.Errorf("via a messaging service: status %v from %v, want accepted and null", body["status"], body["from"])
			}
			if got := srv.Recorder.List("twilio", tt.form.Get("To")); len(got) != 1 || got[0].MessageID != sid || got[0].Body != "hi" {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}
