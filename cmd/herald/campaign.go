package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"herald/internal/notify"
)

const campaignUsage = `Usage: herald campaign create [flags]   start (or reserve) a campaign to an app's devices or uploaded lists
       herald campaign watch ID [flags]  follow a campaign's progress until it ends

Run "herald campaign create -h" or "herald campaign watch -h" for their flags.
`

func runCampaign(args []string, out io.Writer) error {
	return dispatch("campaign", campaignUsage, map[string]command{"create": runCampaignCreate, "watch": runCampaignWatch}, args, out)
}

func runCampaignCreate(args []string, out io.Writer) error {
	fs := newFlagSet("campaign create", "[--app APP | --lists L1,L2] --body B [flags]", `
Creates a campaign and prints its id and state: to every device of an app (--app), or to the
users of uploaded lists (--lists, in that order). Marketing campaigns keep quiet hours
(21:00–08:00 Asia/Seoul by default). Follow it with: herald campaign watch ID`)
	apiURL, key := apiFlags(fs, "API key")
	app := fs.String("app", "default", "send to every device of this provider app (unless --lists is given)")
	lists := fs.String("lists", "", "comma-separated uploaded user lists (herald audience upload), sent in this order, instead of --app")
	title := fs.String("title", "", "title")
	body := fs.String("body", "", "message body")
	channels := fs.String("channels", "push", "comma-separated channels")
	category := fs.String("category", "marketing", "marketing or transactional")
	sendAt := fs.String("send-at", "", "start time, RFC 3339 (default: now)")
	maxRate := fs.Int("max-rate", 0, "recipients per second; 0: no limit")
	idem := fs.String("idempotency-key", "", "idempotency key: the same key creates once")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q", pos[0])
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
			return usagef(fs, "--send-at %q: want RFC 3339, e.g. 2026-05-01T10:00:00+09:00", *sendAt)
		}
		req["send_at"] = at
	}
	raw, _ := json.Marshal(req)
	var acc struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := call(http.MethodPost, strings.TrimRight(*apiURL, "/")+"/v1/campaigns", *key, raw, &acc); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s\n", acc.ID, acc.State)
	return nil
}

// campaignStatus is the part of GET /v1/campaigns/{id} that watch shows.
type campaignStatus struct {
	State       string     `json:"state"`
	PausedUntil *time.Time `json:"paused_until"`
	Error       string     `json:"error"`
	Totals      struct {
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

func runCampaignWatch(args []string, out io.Writer) error {
	fs := newFlagSet("campaign watch", "ID [flags]", `
Follows a campaign until it ends: its state, a progress bar, sent of expected, failed, skipped,
the rate and the ETA — while paused for quiet hours, when it resumes (paused_until). On a
terminal the line updates in place; otherwise a line is printed each time it changes.
Exits 0 when the campaign COMPLETED, 3 when it ended CANCELED or FAILED (with its error),
1 if the API cannot be reached or answers an error.`)
	apiURL, key := apiFlags(fs, "API key")
	every := fs.Duration("every", 500*time.Millisecond, "poll interval")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one campaign id: herald campaign watch ID")
	}
	if *every <= 0 {
		return usagef(fs, "--every must be positive")
	}
	u := strings.TrimRight(*apiURL, "/") + "/v1/campaigns/" + url.PathEscape(pos[0])
	tty := isTerminal(out)
	var (
		lastDone int
		lastAt   time.Time
		rate     float64
		lastLine string
	)
	for {
		var st campaignStatus
		if err := call(http.MethodGet, u, *key, nil, &st); err != nil {
			if tty && lastLine != "" {
				fmt.Fprintln(out)
			}
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
		state := notify.CampaignState(st.State)
		if state != notify.CampaignRunning {
			rate = 0 // not sending: no rate to show, and a constant line while it waits
		}
		// Print only what changed, so a campaign waiting out its quiet hours is one line, not
		// one per poll.
		if line := progressLine(st, rate, 30, now); line != lastLine {
			if tty {
				fmt.Fprint(out, "\r"+line+"\x1b[K")
			} else {
				fmt.Fprintln(out, line)
			}
			lastLine = line
		}
		// COMPLETED means the audience is dispatched; its last deliveries may still be going.
		if state.Final() && (state != notify.CampaignCompleted || st.Totals.Pending == 0) {
			if tty {
				fmt.Fprintln(out)
			}
			switch state {
			case notify.CampaignCompleted:
				return nil
			case notify.CampaignFailed:
				return exitCodeError{exitNotDone, fmt.Sprintf("campaign %s FAILED: %s", pos[0], st.Error)}
			default:
				return exitCodeError{exitNotDone, fmt.Sprintf("campaign %s ended %s", pos[0], state)}
			}
		}
		time.Sleep(*every)
	}
}

// progressLine renders one line: state, a bar of width cells, sent of the expected total, the
// current rate and the ETA, or when a paused campaign resumes. The bar measures ended deliveries
// against those plus the remaining ones, which are an estimate ("~") until the whole audience has
// been read. Times are rounded to the minute (seconds for an ETA under a minute), so a waiting
// campaign's line does not change on every poll.
func progressLine(st campaignStatus, rate float64, width int, now time.Time) string {
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
	if st.PausedUntil != nil && notify.CampaignState(st.State) == notify.CampaignPausedQuietHours {
		line += "  resumes " + st.PausedUntil.Local().Format("2006-01-02 15:04 MST") + " (in " + roughly(st.PausedUntil.Sub(now)) + ")"
	} else if st.ETA != nil {
		line += "  eta " + roughly(st.ETA.Sub(now))
	}
	return line
}

// roughly is d for people: seconds under a minute, minutes above.
func roughly(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	default:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}
