package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"herald/internal/notify"
)

func runSend(args []string, out io.Writer) error {
	fs := newFlagSet("send", "--to RECIPIENTS --body B [flags]", `
Sends one notification through a running Herald and prints its id and status; with --wait,
polls until the notification reaches a final status and prints it.
A server elsewhere: --api http://127.0.0.1:9000 (or HERALD_API), with its key in --key (or
HERALD_API_KEY).`)
	apiURL, key := apiFlags(fs, "API key")
	to := fs.String("to", "", "comma-separated recipients: user:ID, email:ADDR, phone:+E164, fcm:TOKEN, apns:TOKEN")
	channels := fs.String("channels", "push,inbox", "comma-separated channels: push, email, sms, inbox, alimtalk")
	title := fs.String("title", "", "title (email subject)")
	body := fs.String("body", "", "message body")
	category := fs.String("category", "transactional", "transactional or marketing")
	idem := fs.String("idempotency-key", "", "idempotency key: the same key sends once")
	wait := fs.Bool("wait", false, "wait until the notification reaches a final status and print it")
	pos, err := parseFlags(fs, args, out)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fs, "unexpected argument %q (recipients go in --to)", pos[0])
	}
	req := notify.SendRequest{
		IdempotencyKey: *idem,
		Category:       notify.Category(*category),
		Content:        notify.Content{Title: *title, Body: *body},
	}
	for _, c := range splitList(*channels) {
		req.Channels = append(req.Channels, notify.Channel(c))
	}
	for _, r := range splitList(*to) {
		kind, v, ok := strings.Cut(r, ":")
		if !ok {
			return usagef(fs, "--to %q: want kind:value, e.g. user:alice", r)
		}
		switch kind {
		case "user":
			req.Recipients = append(req.Recipients, notify.Recipient{UserID: v})
		case "email":
			req.Recipients = append(req.Recipients, notify.Recipient{Email: v})
		case "phone":
			req.Recipients = append(req.Recipients, notify.Recipient{Phone: v})
		case "fcm":
			req.Recipients = append(req.Recipients, notify.Recipient{FCMToken: v})
		case "apns":
			req.Recipients = append(req.Recipients, notify.Recipient{APNsToken: v})
		default:
			return usagef(fs, "--to %q: unknown kind %q (user, email, phone, fcm, apns)", r, kind)
		}
	}
	raw, _ := json.Marshal(req)
	var acc struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	base := strings.TrimRight(*apiURL, "/")
	if err := call(http.MethodPost, base+"/v1/notifications", *key, raw, &acc); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s\n", acc.ID, acc.Status)
	if !*wait {
		return nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var st map[string]any
		err := call(http.MethodGet, base+"/v1/notifications/"+url.PathEscape(acc.ID), *key, nil, &st)
		if err == nil && notify.NotificationStatus(fmt.Sprint(st["status"])).Final() {
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(out, string(b))
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("gave up waiting after 2 minutes; the notification is still being processed")
}

// call does one API request and decodes a 2xx JSON answer into out; a 4xx/5xx becomes an error
// carrying the API's message.
func call(method, u, key string, body []byte, out any) error {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is Herald running there? --api or HERALD_API names the server)", method, u, err)
	}
	return answer(method, u, resp, out)
}

// answer reads an API answer and closes it: a 2xx JSON body is decoded into out, a 4xx/5xx
// becomes an error carrying the API's message.
func answer(method, u string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, u, err)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
