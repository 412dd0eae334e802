package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// auditEntry is one entry of GET /v1/admin/audit.
type auditEntry struct {
	ID         string            `json:"id"`
	At         time.Time         `json:"at"`
	Actor      string            `json:"actor"`
	ActorKind  string            `json:"actor_kind"`
	Action     string            `json:"action"`
	TargetType string            `json:"target_type"`
	TargetID   string            `json:"target_id"`
	Params     map[string]string `json:"params"`
	Result     string            `json:"result"`
	RequestID  string            `json:"request_id,omitempty"`
}

// runAudit is `herald audit`: the operator actions recorded in the audit log, newest first.
func runAudit(args []string, out io.Writer) error {
	fs := newFlagSet("audit", "[flags]", `
Prints the audit log of operator actions, newest first, as a table: when, who (a service, or
an end user's subject), the action (queue.redrive, notification.cancel, campaign.pause, …), its
target, its result (ok or the error code answered) and its parameters. Entries are kept one
year and hold no addresses, tokens, emails or phone numbers. Needs an admin service's key.`)
	apiURL, key := apiFlags(fs, "API key of an admin service")
	sigv4 := fs.Bool("sigv4", false, "sign requests with SigV4 using the default AWS credentials (the API behind API Gateway), instead of --key")
	actor := fs.String("actor", "", "only actions by this service (or end user subject)")
	action := fs.String("action", "", "only this action, e.g. campaign.cancel or queue.redrive")
	target := fs.String("target", "", "only actions on this target: ID, or TYPE:ID (e.g. campaign:c_123, queue:send-bulk)")
	since := fs.Duration("since", 24*time.Hour, "only actions in this last period, e.g. 1h, 720h (0: the whole year kept)")
	limit := fs.Int("limit", 100, "print at most this many entries")
	asJSON := fs.Bool("json", false, "print the entries as JSON, one per line")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return usagef(fs, "unexpected argument %q", pos[0])
	case *since < 0:
		return usagef(fs, "--since must not be negative")
	case *limit < 1:
		return usagef(fs, "--limit must be at least 1")
	}
	q := url.Values{}
	for name, v := range map[string]string{"actor": *actor, "action": *action} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if *target != "" {
		tt, id, ok := strings.Cut(*target, ":")
		if !ok {
			tt, id = "", *target
		}
		if id == "" {
			return usagef(fs, "--target wants ID or TYPE:ID, got %q", *target)
		}
		if tt != "" {
			q.Set("target_type", tt)
		}
		q.Set("target_id", id)
	}
	if *since > 0 {
		q.Set("from", time.Now().Add(-*since).UTC().Format(time.RFC3339))
	}
	get := func(u string, out any) error { return call(http.MethodGet, u, *key, nil, out) }
	if *sigv4 {
		signed, err := sigv4Caller(context.Background())
		if err != nil {
			return err
		}
		get = func(u string, out any) error { return signed(http.MethodGet, u, out) }
	}
	entries, more, err := readAudit(*apiURL, q, *limit, get)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	printAudit(out, entries, more)
	return nil
}

// readAudit pages GET /v1/admin/audit with query until it has limit entries or the log ends;
// more says whether entries were left unread.
func readAudit(apiURL string, query url.Values, limit int, get func(url string, out any) error) (entries []auditEntry, more bool, err error) {
	cursor := ""
	for {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Set("limit", strconv.Itoa(min(200, limit-len(entries))))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Entries    []auditEntry `json:"entries"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := get(strings.TrimSuffix(apiURL, "/")+"/v1/admin/audit?"+q.Encode(), &page); err != nil {
			return entries, false, err
		}
		entries = append(entries, page.Entries...)
		if page.NextCursor == "" {
			return entries, false, nil
		}
		if len(entries) >= limit {
			return entries, true, nil
		}
		cursor = page.NextCursor
	}
}

// printAudit writes entries as a table, one line each.
func printAudit(out io.Writer, entries []auditEntry, more bool) {
	if len(entries) == 0 {
		fmt.Fprintln(out, "no audit entries match")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTOR\tACTION\tTARGET\tRESULT\tPARAMS")
	for _, e := range entries {
		actor := e.Actor
		if e.ActorKind == "user" {
			actor = "user:" + actor
		}
		target := e.TargetType
		if e.TargetID != "" {
			target += ":" + e.TargetID
		}
		keys := make([]string, 0, len(e.Params))
		for k := range e.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		params := make([]string, 0, len(keys))
		for _, k := range keys {
			params = append(params, k+"="+e.Params[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format("2006-01-02 15:04:05Z"), actor, e.Action,
			target, e.Result, cut(oneLine(strings.Join(params, " ")), 80))
	}
	_ = tw.Flush()
	if more {
		fmt.Fprintf(out, "%d entries shown; more match (--limit, --since)\n", len(entries))
	}
}
