package local

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"herald/internal/netguard"
	"herald/internal/notify"
	"herald/internal/slack"
)

// startAlerts adds Slack to o.Events when alerts.slack has a webhook — in sandbox mode, the
// sandbox's fake one unless webhook_url names another — and reports the messages the queue
// dead-letters by itself (receives used up) as message_dead_lettered too, as the settle path
// does for permanent failures. It returns the notifier (nil: no Slack), closed with the runtime.
func (r *Runtime) startAlerts(o *Options) *slack.Notifier {
	events := o.Events
	r.Queue.OnDeadLetter = func(queue string, m notify.Message) {
		e := notify.DeadLetterEvent(r.clock.Now().UTC(), queue, m.ID, "retries_exhausted",
			fmt.Sprintf("received %d times without success (the queue's max_receive_count)", m.ReceiveCount), m.Body)
		if err := events.Emit(context.Background(), e); err != nil {
			r.log.Warn("operator event not emitted", "event", e.Type, "message_id", m.ID, "error", err)
		}
	}
	sc := o.Config.Alerts.Slack
	url := sc.WebhookURL
	if url == "" && r.Sandbox != nil {
		url = r.Sandbox.SlackWebhookURL()
	}
	if url == "" {
		return nil
	}
	// A webhook on a private, link-local or metadata address is never posted to (netguard), as
	// in AWS; loopback only where the sandbox is, whose fake Slack is on this machine.
	client := &http.Client{Timeout: 5 * time.Second, Transport: netguard.Policy{AllowLoopback: r.Sandbox != nil}.Transport()}
	n := slack.NewNotifier(slack.Config{
		WebhookURL: url, Window: o.AlertFold, Logger: o.Logger, Client: client,
		Options: slack.Options{ConsoleURL: sc.ConsoleURL, CampaignFinished: sc.CampaignFinished},
	})
	// Queued posts get a moment to go out before the sandbox (closed after this) stops.
	r.closers = append([]func() error{func() error { n.Close(2 * time.Second); return nil }}, r.closers...)
	events = notify.TeeEvents(o.Events, n)
	o.Events = events
	return n
}
