package sandbox_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"herald/internal/sandbox"
)

func TestSlackWebhook(t *testing.T) {
	t.Parallel()
	sb := startFCMSandbox(t)
	post := func(body string) int {
		resp, err := http.Post(sb.SlackWebhookURL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(`{"text":"dead letter on send-realtime","blocks":[{"type":"section"}]}`); c != 200 {
		t.Fatalf("post = %d", c)
	}
	for _, bad := range []string{`not json`, `{}`} {
		if c := post(bad); c != 400 {
			t.Fatalf("post %s = %d, want 400", bad, c)
		}
	}
	resp, err := http.Get(sb.URL() + "/sandbox/slack")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Total int                 `json:"total"`
		Posts []sandbox.SlackPost `json:"posts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Total != 1 || list.Posts[0].Text != "dead letter on send-realtime" || !strings.Contains(string(list.Posts[0].Body), "section") {
		t.Fatalf("list = %+v", list)
	}
	req, _ := http.NewRequest("DELETE", sb.URL()+"/sandbox/slack", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("reset = %v %v", resp, err)
	}
	if n := len(sb.SlackPosts()); n != 0 {
		t.Fatalf("%d posts after reset", n)
	}
}
