// Package slack posts Herald's operator events (notify.Event) to a Slack incoming webhook: a
// message dead-lettered, a large send started, a campaign failed and — when asked — a campaign
// finished. Build turns an event into the webhook's JSON (a text fallback and Block Kit blocks);
// Folder folds bursts (at most one post per queue, or per event kind and id, per window, the
// rest counted into the next post); Post sends one message; Notifier puts the three together
// behind notify.Events, asynchronously, so a slow or failing Slack never holds up a send.
//
// A post carries ids, counts, codes and masked excerpts only: every free text an event carries
// goes through notify.MaskText, and payload excerpts are masked by notify.MaskPayload before
// they are events at all.
package slack

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"herald/internal/notify"
)

// Message is an incoming webhook's body: text is the notification and fallback, blocks the
// rendered message.
type Message struct {
	Text   string  `json:"text"`
	Blocks []Block `json:"blocks,omitempty"`
}

// Block is a Block Kit block: a section (text, fields) or a context line (elements).
type Block struct {
	Type     string `json:"type"`
	Text     *Text  `json:"text,omitempty"`
	Fields   []Text `json:"fields,omitempty"`
	Elements []Text `json:"elements,omitempty"`
}

// Text is a Block Kit text object (mrkdwn).
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func mrkdwn(s string) Text { return Text{Type: "mrkdwn", Text: s} }

// Options choose what is posted and how it links.
type Options struct {
	// ConsoleURL is the operator console's base URL; dead letters link to
	// <ConsoleURL>/console#/queues/<queue>, the console's page of its dead letters. Empty: no link.
	ConsoleURL string
	// CampaignFinished posts campaign_finished too (off by default: routine).
	CampaignFinished bool
}

// Posted reports whether events of type t are posted under o.
func (o Options) Posted(t string) bool {
	switch t {
	case notify.EventMessageDeadLettered, notify.EventLargeSendStarted, notify.EventCampaignFailed, notify.EventProviderAuthFailed:
		return true
	case notify.EventCampaignFinished:
		return o.CampaignFinished
	}
	return false
}

// Key is what bursts of e fold on: the queue of a dead letter, the campaign or notification
// of the others.
func Key(e notify.Event) string {
	if e.Type == notify.EventMessageDeadLettered {
		return e.Type + ":" + detail(e, "queue")
	}
	if e.Type == notify.EventProviderAuthFailed {
		return e.Type + ":" + detail(e, "provider")
	}
	if e.CampaignID != "" {
		return e.Type + ":campaign:" + e.CampaignID
	}
	return e.Type + ":notification:" + e.NotificationID
}

// Build renders e as a webhook message; folded is how many more events of its Key were folded
// into it (0: none). ok is false for events that are not posted (Options.Posted).
func Build(e notify.Event, o Options, folded int) (m Message, ok bool) {
	if !o.Posted(e.Type) {
		return Message{}, false
	}
	env := ""
	if e.Service != "" {
		env = " (" + esc(e.Service) + ")"
	}
	var head string
	var fields []Text
	field := func(name, value string) {
		if value != "" {
			fields = append(fields, mrkdwn("*"+name+"*\n"+value))
		}
	}
	var body []Block
	switch e.Type {
	case notify.EventMessageDeadLettered:
		q := detail(e, "queue")
		head = fmt.Sprintf(":rotating_light: Message dead-lettered on `%s`: %s", esc(q), esc(detail(e, "reason")))
		field("Queue", "`"+esc(q)+"`")
		field("Message id", "`"+esc(detail(e, "message_id"))+"`")
		field("Error code", esc(detail(e, "code")))
		field("Notification", esc(e.NotificationID))
		field("Campaign", esc(e.CampaignID))
		if p := detail(e, "payload"); p != "" {
			body = append(body, Block{Type: "section", Text: ptr(mrkdwn("*Payload (masked)*\n```" + strings.ReplaceAll(esc(p), "```", "'''") + "```"))})
		}
		if link := consoleLink(o.ConsoleURL, q); link != "" {
			body = append(body, Block{Type: "context", Elements: []Text{mrkdwn("<" + link + "|Open the dead letters of " + esc(q) + " in the console>")}})
		}
	case notify.EventLargeSendStarted:
		what := "notification `" + esc(e.NotificationID) + "`"
		if e.CampaignID != "" {
			what = "campaign `" + esc(e.CampaignID) + "`"
		}
		head = fmt.Sprintf(":loudspeaker: Large send started: %s to %d recipients", what, e.Recipients)
		field("Category", esc(detail(e, "category")))
		field("Channels", esc(detail(e, "channels")))
	case notify.EventCampaignFailed:
		head = fmt.Sprintf(":x: Campaign `%s` failed: %s", esc(e.CampaignID), esc(detail(e, "error")))
		field("Error code", esc(detail(e, "code")))
		field("Dispatched", fmt.Sprint(e.Recipients))
	case notify.EventProviderAuthFailed:
		head = fmt.Sprintf(":no_entry: %s refuses Herald's credentials, account or balance: %s", esc(detail(e, "provider")), esc(detail(e, "error")))
		field("Provider", esc(detail(e, "provider")))
		field("Deliveries failed", fmt.Sprint(e.Recipients))
		field("Notification", esc(e.NotificationID))
		body = append(body, Block{Type: "context", Elements: []Text{mrkdwn("Nothing goes out through this provider until its credentials, account or balance are fixed; the failed deliveries are not retried.")}})
	case notify.EventCampaignFinished:
		head = fmt.Sprintf(":white_check_mark: Campaign `%s` finished: %d recipients", esc(e.CampaignID), e.Recipients)
		field("Chunks", esc(detail(e, "chunks")))
	}
	head += env
	if folded > 0 {
		head += fmt.Sprintf(" — and %d more in the last minute", folded)
	}
	m.Text = head
	m.Blocks = append(m.Blocks, Block{Type: "section", Text: ptr(mrkdwn(head))})
	if len(fields) > 0 {
		m.Blocks = append(m.Blocks, Block{Type: "section", Fields: fields})
	}
	m.Blocks = append(m.Blocks, body...)
	return m, true
}

// Summary is the post for events of e's Key folded after the last post, when no further event
// came to carry their count (Notifier posts it when the window closes).
func Summary(e notify.Event, o Options, folded int) Message {
	var head string
	switch e.Type {
	case notify.EventMessageDeadLettered:
		q := detail(e, "queue")
		head = fmt.Sprintf(":rotating_light: %d more messages dead-lettered on `%s` in the last minute (the last: %s)", folded, esc(q), esc(detail(e, "reason")))
		m := Message{Text: head, Blocks: []Block{{Type: "section", Text: ptr(mrkdwn(head))}}}
		if link := consoleLink(o.ConsoleURL, q); link != "" {
			m.Blocks = append(m.Blocks, Block{Type: "context", Elements: []Text{mrkdwn("<" + link + "|Open the dead letters of " + esc(q) + " in the console>")}})
		}
		return m
	default:
		head = fmt.Sprintf("%d more %s events in the last minute", folded, esc(notify.EventTitle(e.Type)))
	}
	return Message{Text: head, Blocks: []Block{{Type: "section", Text: ptr(mrkdwn(head))}}}
}

// consoleLink is the console's page of queue's dead letters.
func consoleLink(base, queue string) string {
	if base == "" || queue == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/console#/queues/" + url.PathEscape(queue)
}

// detail is e.Detail[k] as masked text; lists are joined with commas.
func detail(e notify.Event, k string) string {
	switch v := e.Detail[k].(type) {
	case nil:
		return ""
	case string:
		return notify.MaskText(v)
	case []string:
		return notify.MaskText(strings.Join(v, ", "))
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		sort.Strings(parts)
		return notify.MaskText(strings.Join(parts, ", "))
	default: // a typed list such as []notify.Channel prints as [push email]
		s := fmt.Sprint(v)
		if inner, ok := strings.CutPrefix(s, "["); ok && strings.HasSuffix(inner, "]") {
			s = strings.Join(strings.Fields(strings.TrimSuffix(inner, "]")), ", ")
		}
		return notify.MaskText(s)
	}
}

// esc escapes the three characters Slack's mrkdwn gives meaning to, so text from an event can
// neither open a link nor mention anyone.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func ptr[T any](v T) *T { return &v }
