package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// runDLQ lists queues and their dead letters, shows one queue's dead letters (reason and masked
// payload), and redrives them — through the API, as an admin service.
func runDLQ(args []string, out io.Writer) error {
	// The subcommand may come after flags: the first argument that is neither a flag nor a
	// flag's value (every flag here but --json and -h takes one).
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			if !strings.Contains(a, "=") && !isHelp(a) && strings.TrimLeft(a, "-") != "json" {
				i++
			}
			continue
		}
		sub := map[string]command{"show": runDLQShow, "redrive": runDLQRedrive}[a]
		if sub == nil {
			break
		}
		return sub(append(args[:i:i], args[i+1:]...), out)
	}
	fs := newFlagSet("dlq", "[show QUEUE | redrive QUEUE] [flags]", `
Without a subcommand: every queue's depth (visible, in flight, delayed) and how many dead
letters wait in its dead-letter queue.
  herald dlq show QUEUE      its dead letters: id, receives, error code, reason, when, payload
  herald dlq redrive QUEUE   move them back to QUEUE`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unknown subcommand %q (show, redrive)", pos[0])
	}
	var res struct {
		Queues []struct {
			Name  string `json:"name"`
			Stats struct {
				Visible  int `json:"visible"`
				InFlight int `json:"in_flight"`
				Delayed  int `json:"delayed"`
			} `json:"stats"`
			DeadLetters int `json:"dead_letters"`
		} `json:"queues"`
	}
	if err := call(http.MethodGet, strings.TrimRight(*apiURL, "/")+"/v1/admin/queues", *key, nil, &res); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\tvisible\tin flight\tdelayed\tdead letters\t")
	for _, q := range res.Queues {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", q.Name, q.Stats.Visible, q.Stats.InFlight, q.Stats.Delayed, q.DeadLetters)
	}
	return tw.Flush()
}

// deadLetter is one entry of GET /v1/admin/queues/{queue}/dead-letters.
type deadLetter struct {
	ID           string          `json:"id"`
	Code         string          `json:"code"`
	Error        string          `json:"error"`
	SourceQueue  string          `json:"source_queue"`
	ReceiveCount int             `json:"receive_count"`
	SentAt       time.Time       `json:"sent_at"`
	Payload      json.RawMessage `json:"payload"` // masked by the API
}

func runDLQShow(args []string, out io.Writer) error {
	fs := newFlagSet("dlq show", "QUEUE [flags]", `
Shows QUEUE's dead letters, oldest first, as a table: id, how many times it was received, the
error code and reason Herald recorded when it gave up (none: it failed 5 receives — see the
consumer's logs), when it was first sent, and the start of its payload. Tokens, email addresses
and phone numbers are masked by the API. --json prints the API's answer whole.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	limit := fs.Int("limit", 10, "dead letters to show (at most 100)")
	raw := fs.Bool("json", false, "print the API's JSON answer instead of a table")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one queue: herald dlq show QUEUE (herald dlq lists them)")
	}
	var body json.RawMessage
	u := fmt.Sprintf("%s/v1/admin/queues/%s/dead-letters?limit=%d", strings.TrimRight(*apiURL, "/"), url.PathEscape(pos[0]), *limit)
	if err := call(http.MethodGet, u, *key, nil, &body); err != nil {
		return err
	}
	if *raw {
		var b bytes.Buffer
		if err := json.Indent(&b, body, "", "  "); err != nil {
			return fmt.Errorf("GET %s: %w", u, err)
		}
		fmt.Fprintln(out, b.String())
		return nil
	}
	var res struct {
		Queue       string       `json:"queue"`
		DeadLetters []deadLetter `json:"dead_letters"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	printDeadLetters(out, pos[0], res.DeadLetters)
	return nil
}

// printDeadLetters writes dead letters as a table, one line each, reason and payload cut short.
func printDeadLetters(out io.Writer, queue string, dls []deadLetter) {
	if len(dls) == 0 {
		fmt.Fprintf(out, "%s: no dead letters\n", queue)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECEIVES\tCODE\tREASON\tSENT\tPAYLOAD")
	for _, d := range dls {
		code, reason := d.Code, d.Error
		if code == "" {
			code = "-"
		}
		if reason == "" {
			reason = "failed every receive (see the consumer's logs)"
		}
		var payload bytes.Buffer
		if json.Compact(&payload, d.Payload) != nil {
			payload.Reset()
			payload.Write(d.Payload)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", d.ID, d.ReceiveCount, code, cut(oneLine(reason), 60),
			d.SentAt.UTC().Format("2006-01-02 15:04:05Z"), cut(payload.String(), 60))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "%d dead letters in %s (--json for the whole of each)\n", len(dls), queue)
}

// oneLine keeps s on one table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cut shortens s to n characters, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func runDLQRedrive(args []string, out io.Writer) error {
	fs := newFlagSet("dlq redrive", "QUEUE [flags]", `
Moves every dead letter of QUEUE back to QUEUE, where it is processed again. Safe to repeat:
deliveries are idempotent, so what was already sent is skipped.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(fs, "want one queue: herald dlq redrive QUEUE")
	}
	var res struct {
		Moved int `json:"moved"`
	}
	if err := call(http.MethodPost, strings.TrimRight(*apiURL, "/")+"/v1/admin/queues/"+url.PathEscape(pos[0])+"/redrive", *key, nil, &res); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d dead letters moved back to %s\n", res.Moved, pos[0])
	return nil
}
