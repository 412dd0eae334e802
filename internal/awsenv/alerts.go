package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"herald/internal/config"
	"herald/internal/netguard"
	"herald/internal/notify"
	"herald/internal/slack"
)

// The alerts function posts Herald's operator events to Slack. An EventBridge rule on the
// environment's bus delivers them (infra/events.go); it is a function rather than an
// EventBridge API destination because an incoming webhook's secret is its URL path, and an API
// destination's endpoint is a plain URL in the template — only its Connection's header or query
// credentials come from Secrets Manager. The function reads the URL from
// alerts.slack.webhook_url_secret at start and renders posts with internal/slack, as the local
// runtime does.
//
// Folding is per function instance: a warm instance folds a burst into one post a minute per
// queue with the count carried by the next post. The deployment reserves no concurrency by
// default (a new account has none to reserve), so a burst spread over several instances posts
// once a minute per queue per instance; stack.functions.alerts.reserved_concurrency: 1 makes one
// instance see every event. A cold start begins with an empty fold, so
// after an instance is recycled one more post may go out early. There is no timer between
// invocations: a count folded at the end of a burst rides on the next post of that key.

// Metrics the alerts function emits (dimension Type: the event type).
const (
	MetricSlackPosted = "SlackPosts"
	MetricSlackFailed = "SlackPostsFailed"
	MetricSlackFolded = "SlackPostsFolded"
)

// Alerts posts operator events to one webhook.
type Alerts struct {
	WebhookURL string
	Options    slack.Options
	Client     *http.Client
	Folder     *slack.Folder
	Log        *slog.Logger
	Metrics    notify.Metrics // nil: none
	Now        func() time.Time
}

// Handle takes one EventBridge event from Herald's bus. It never returns an error for a post
// Slack refused or could not take — the alert is advisory, and a retry would only post late —
// but counts and logs it; an event that is not a Herald operator event is an error, so a
// miswired rule shows in the function's error alarm.
func (a *Alerts) Handle(ctx context.Context, ev events.EventBridgeEvent) error {
	if ev.Source != notify.EventSource || len(ev.Detail) == 0 {
		return notify.Errorf(notify.EINVALID, "alerts: event from %q with detail-type %q is not a Herald operator event", ev.Source, ev.DetailType)
	}
	var e notify.Event
	if err := json.Unmarshal(ev.Detail, &e); err != nil || e.Type == "" {
		return notify.Errorf(notify.EINVALID, "alerts: the detail of %q is not an operator event", ev.DetailType)
	}
	// Herald puts each event under its own title (eventbus): a detail under another
	// detail-type is not one Herald emitted, and is refused rather than posted as what it says.
	if ev.DetailType != notify.EventTitle(e.Type) {
		return notify.Errorf(notify.EINVALID, "alerts: a %s detail under detail-type %q (want %q)", e.Type, ev.DetailType, notify.EventTitle(e.Type))
	}
	if !a.Options.Posted(e.Type) {
		a.Log.InfoContext(ctx, "operator event not posted", "event", e.Type)
		return nil
	}
	dims := map[string]string{"Type": e.Type}
	post, folded := a.Folder.Admit(slack.Key(e), e, a.Now())
	if !post {
		a.count(ctx, MetricSlackFolded, dims)
		return nil
	}
	m, _ := slack.Build(e, a.Options, folded)
	if err := slack.Post(ctx, a.Client, a.WebhookURL, m); err != nil {
		a.count(ctx, MetricSlackFailed, dims)
		a.Log.WarnContext(ctx, "slack post failed", "event", e.Type, "code", notify.ErrorCode(err), "error", err.Error())
		return nil
	}
	a.count(ctx, MetricSlackPosted, dims)
	a.Log.InfoContext(ctx, "operator event posted to slack", "event", e.Type, "folded", folded)
	return nil
}

func (a *Alerts) count(ctx context.Context, name string, dims map[string]string) {
	if a.Metrics != nil {
		a.Metrics.Add(ctx, name, 1, dims)
	}
}

// LoadAlerts builds the alerts function from the config file and its webhook secret.
func LoadAlerts(ctx context.Context) (*Alerts, error) {
	log := notify.NewJSONLogger(os.Stdout, nil)
	slog.SetDefault(log)
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	return newAlerts(ctx, cfg, log)
}

func newAlerts(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Alerts, error) {
	sc := cfg.Alerts.Slack
	url := sc.WebhookURL // a test's; a deployment refuses it at synth
	if url == "" {
		if sc.WebhookURLSecret == "" {
			return nil, errors.New("alerts.slack.webhook_url_secret is not set: the alerts function has nowhere to post")
		}
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("aws config: %w", err)
		}
		if url, err = Secret(ctx, secretsmanager.NewFromConfig(awsCfg), sc.WebhookURLSecret); err != nil {
			return nil, fmt.Errorf("alerts.slack.webhook_url_secret: %w", err)
		}
		url = strings.TrimSpace(url)
	}
	return &Alerts{
		WebhookURL: url, Options: slack.Options{ConsoleURL: sc.ConsoleURL, CampaignFinished: sc.CampaignFinished},
		// The deployed webhook (from its secret) is never dialled on a private, loopback or
		// metadata address (netguard). A plain webhook_url is a test's on this machine (synth
		// refuses one), so it may be on loopback.
		Client: &http.Client{Timeout: 5 * time.Second, Transport: netguard.Policy{AllowLoopback: sc.WebhookURL != ""}.Transport()},
		Folder: &slack.Folder{}, Log: log,
		Metrics: &emf{w: os.Stdout, env: cfg.Env, now: time.Now}, Now: time.Now,
	}, nil
}

// StartAlerts is the alerts function's main; it returns only when the configuration is wrong.
func StartAlerts() error {
	a, err := LoadAlerts(context.Background())
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	lambda.Start(a.Handle)
	return nil
}
