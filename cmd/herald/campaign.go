package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"herald/internal/notify"
)

func runCampaign(args []string) error {
	if len(args) == 0 {
		return errors.New("want `campaign create …` or `campaign watch ID`")
	}
	switch args[0] {
	case "create":
		return runCampaignCreate(args[1:])
	case "watch":
		return runCampaignWatch(args[1:])
	}
	return fmt.Errorf("unknown subcommand %q (create, watch)", args[0])
}

func runCampaignCreate(args []string) error {
	fs := flag.NewFlagSet("campaign create", flag.ContinueOnError)
	apiURL := fs.String("api", envOr("HERALD_API", "http://127.0.0.1:8080"), "Herald API base URL (env HERALD_API)")
	key := fs.String("key", envOr("HERALD_API_KEY", "dev-demo-key"), "API key (env HERALD_API_KEY)")
	app := fs.String("app", "default", "send to every device of this provider app (unless --lists is given)")
	lists := fs.String("lists", "", "comma-separated uploaded user lists (herald audience upload), sent in this order, instead of --app")
	title := fs.String("title", "", "title")
	body := fs.String("body", "", "message body")
	channels := fs.String("channels", "push", "comma-separated channels")
	category := fs.String("category", "marketing", "marketing or transactional")
	sendAt := fs.String("send-at", "", "start time, RFC 3339 (default: now)")
	maxRate := fs.Int("max-rate", 0, "recipients per second; 0: no limit")
	idem := fs.String("idempotency-key", "", "idempotency key: the same key creates once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	audience := notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceAppDevices, App: *app}}}
	if *lists != "" {
		audience.Sources = nil
		for _, l := range splitList(*lists) {
			audience.Sources = append(audience.Sources, notify.Segment{Kind: notify.AudienceUserList, ListID: l})
		}
	}
	req := map[string]any{
		"category": *category,
		"channels": splitList(*channels),
		"content":  notify.Content{Title: *title, Body: *body},
		"audience": audience,
		"max_rate": *maxRate,
	}
	if *idem != "" {
		req["idempotency_key"] = *idem
	}
	if *sendAt != "" {
		at, err := time.Parse(time.RFC3339, *sendAt)
		if err != nil {
			return fmt.Errorf("--send-at %q: want RFC 3339, e.g. 2026-05-01T10:00:00+09:00", *sendAt)
		}
		req["send_at"] = at
	}
	raw, _ := json.Marshal(req)
	var acc struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := call(http.MethodPost, *apiURL+"/v1/campaigns", *key, raw, &acc); err != nil {
		return err
	}
	fmt.Printf("%s %s\n", acc.ID, acc.State)
	return nil
}

// campaignStatus is the part of GET /v1/campaigns/{id} that watch shows.
type campaignStatus struct {
	State  string `json:"state"`
	Totals struct {
		Members         int            `json:"members"`
		Total           int            `json:"total"`
		Sent            int            `json:"sent"`
		Failed          int            `json:"failed"`
		Skipped         int            `json:"skipped"`
		Pending         int            `json:"pending"`
		Remaining       int            `json:"remaining"`
		RemainingExact  bool           `json:"remaining_exact"`
		SkippedByReason map[string]int `json:"skipped_by_reason"`
	} `json:"totals"`
	ETA *time.Time `json:"eta"`
}

func runCampaignWatch(args []string) error {
	fs := flag.NewFlagSet("campaign watch", flag.ContinueOnError)
	apiURL := fs.String("api", envOr("HERALD_API", "http://127.0.0.1:8080"), "Herald API base URL (env HERALD_API)")
	key := fs.String("key", envOr("HERALD_API_KEY", "dev-demo-key"), "API key (env HERALD_API_KEY)")
	every := fs.Duration("every", 500*time.Millisecond, "poll interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one campaign id: herald campaign watch ID")
	}
	u := *apiURL + "/v1/campaigns/" + url.PathEscape(fs.Arg(0))
	var (
		lastDone int
		lastAt   time.Time
		rate     float64
	)
	for {
		var st campaignStatus
		if err := call(http.MethodGet, u, *key, nil, &st); err != nil {
			fmt.Println()
			return err
		}
		done := st.Totals.Sent + st.Totals.Failed + st.Totals.Skipped
		now := time.Now()
		if !lastAt.IsZero() {
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				rate = float64(done-lastDone) / dt
			}
		}
		lastDone, lastAt = done, now
		fmt.Print("\r" + progressLine(st, rate, 30) + "\x1b[K")
		// COMPLETED means the audience is dispatched; its last deliveries may still be going.
		if notify.CampaignState(st.State).Final() && (st.State != string(notify.CampaignCompleted) || st.Totals.Pending == 0) {
			fmt.Println()
			return nil
		}
		time.Sleep(*every)
	}
}

// progressLine renders one line: state, a bar of width cells, sent of the expected total, the
// current rate and the ETA. The bar measures ended deliveries against those plus the remaining
// ones, which are an estimate ("~") until the whole audience has been read.
func progressLine(st campaignStatus, rate float64, width int) string {
	t := st.Totals
	done := t.Sent + t.Failed + t.Skipped
	expected := done + t.Remaining
	filled := 0
	if expected > 0 {
		filled = min(width, done*width/expected)
	}
	total := fmt.Sprint(expected)
	if !t.RemainingExact && !notify.CampaignState(st.State).Final() {
		total = "~" + total
	}
	line := fmt.Sprintf("%-18s [%s%s] %d/%s sent  %d failed  %d skipped  %.0f/s",
		st.State, strings.Repeat("#", filled), strings.Repeat(".", width-filled), t.Sent, total, t.Failed, t.Skipped, rate)
	if st.ETA != nil {
		line += "  eta " + time.Until(*st.ETA).Round(time.Second).String()
	}
	return line
}
