package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// A fake Slack incoming webhook: POST /sandbox/slack/webhook takes what Slack takes (a JSON
// object with a text or blocks) and records it; GET /sandbox/slack lists the posts, oldest
// first; DELETE /sandbox/slack forgets them. The local runtime in sandbox mode posts its
// operator alerts here (internal/slack) unless alerts.slack.webhook_url names another webhook.
// Posts are kept in memory only: they are alerts about the run, not deliveries.

// SlackPost is one message the fake webhook accepted.
type SlackPost struct {
	Seq  int64           `json:"seq"`
	Text string          `json:"text"`
	Body json.RawMessage `json:"body"` // the posted JSON as received
	At   time.Time       `json:"at"`
}

type slackPosts struct {
	mu    sync.Mutex
	posts []SlackPost
}

// SlackWebhookURL is the fake webhook's URL.
func (s *Server) SlackWebhookURL() string { return s.plainURL + "/sandbox/slack/webhook" }

// SlackPosts returns the posts so far, oldest first.
func (s *Server) SlackPosts() []SlackPost {
	s.slack.mu.Lock()
	defer s.slack.mu.Unlock()
	return append([]SlackPost(nil), s.slack.posts...)
}

func (s *Server) slackRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /sandbox/slack/webhook", s.handleSlackPost)
	mux.HandleFunc("GET /sandbox/slack", s.handleSlackList)
	mux.HandleFunc("DELETE /sandbox/slack", s.handleSlackReset)
}

// handleSlackPost answers as Slack does: 200 "ok", or 400 "invalid_payload" / "no_text".
func (s *Server) handleSlackPost(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	var m struct {
		Text   string            `json:"text"`
		Blocks []json.RawMessage `json:"blocks"`
	}
	if err != nil || json.Unmarshal(b, &m) != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	if m.Text == "" && len(m.Blocks) == 0 {
		http.Error(w, "no_text", http.StatusBadRequest)
		return
	}
	s.slack.mu.Lock()
	s.slack.posts = append(s.slack.posts, SlackPost{Seq: int64(len(s.slack.posts) + 1), Text: m.Text, Body: b, At: time.Now().UTC()})
	s.slack.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) handleSlackList(w http.ResponseWriter, _ *http.Request) {
	posts := s.SlackPosts()
	if posts == nil {
		posts = []SlackPost{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"total": len(posts), "posts": posts})
}

func (s *Server) handleSlackReset(w http.ResponseWriter, _ *http.Request) {
	s.slack.mu.Lock()
	s.slack.posts = nil
	s.slack.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
