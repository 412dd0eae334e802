package config

import (
	"strings"
	"testing"
	"time"

	"herald/internal/notify"
)

func TestDevIsValid(t *testing.T) {
	t.Parallel()
	if err := Dev().Validate(); err != nil {
		t.Fatalf("Dev config invalid: %v", err)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("env: Prod\nservices: [{name: X, api_keys: [short]}]\nfoo: 1\nquiet_hours: {start: '25:00'}\n"))
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"config env", "services[0].name", "services[0].api_keys[0]", "config foo: unknown key", "quiet_hours.start", "contacts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestParseAppliesDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
env: dev
sandbox: true
services:
  - name: orders
    api_keys: [orders-key-123]
contacts:
  encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=
lanes:
  bulk:
    send: {max_concurrency: 3, visibility_timeout: 2m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Lanes["bulk"].Send.MaxConcurrency; got != 3 {
		t.Fatalf("bulk send concurrency = %d, want 3", got)
	}
	if got := c.Lanes["bulk"].Send.VisibilityTimeout.D().String(); got != "2m0s" {
		t.Fatalf("bulk send visibility = %s", got)
	}
	if got := c.Lanes["realtime"].Send.BatchSize; got != 1 {
		t.Fatalf("realtime send batch default = %d, want 1", got)
	}
	if c.Keys()["orders-key-123"] != "orders" {
		t.Fatal("key not mapped to its service")
	}
	if r := c.Redacted(); r.Services[0].APIKeys[0] != "***" || c.Services[0].APIKeys[0] == "***" {
		t.Fatal("Redacted must mask a copy, not the original")
	}
}

func TestExampleFileIsValid(t *testing.T) {
	t.Parallel()
	c, err := Load("../../herald.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ServiceNames(); len(got) != 2 || got[0] != "orders" {
		t.Fatalf("services = %v", got)
	}
}

func TestQuietHoursStartEqualsEndRefused(t *testing.T) {
	c := Dev()
	c.QuietHours.Start, c.QuietHours.End = "09:00", "09:00"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "quiet_hours.end") {
		t.Fatalf("Validate() = %v, want a problem with quiet_hours.end", err)
	}
}

func TestAlimTalkConfig(t *testing.T) {
	t.Parallel()
	const head = "env: dev\nservices: [{name: orders, api_keys: [orders-key-123]}]\ncontacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\nproviders:\n  ses: {from: a@example.com}\n  twilio: {account_sid: AC1, auth_token: t}\n"
	c, err := Parse([]byte(head + `  alimtalk:
    rate_per_second: 50
    api_key: NCSKEY
    api_secret_secret: herald/dev/solapi-api-secret
    apps: {default: {sender_key: KA01PF1}}
    from: 02-1234-5678
    verdict_check: 45s
    verdict_deadline: 12h
`))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Providers.AlimTalk; a.RatePerSecond != 50 || a.APIKey != "NCSKEY" || a.APISecretSecret != "herald/dev/solapi-api-secret" || a.Apps["default"].SenderKey != "KA01PF1" ||
		a.VerdictCheck.D() != 45*time.Second || a.VerdictDeadline.D() != 12*time.Hour || a.From != "0212345678" {
		t.Errorf("parsed %+v", a)
	}
	if _, err := Parse([]byte(head)); err != nil {
		t.Errorf("AlimTalk is optional: %v", err)
	}

	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no key, no secret, no app", "  alimtalk: {base_url: 'localhost:1', rate_per_second: -1}\n",
			[]string{"providers.alimtalk.api_key", "providers.alimtalk: needs api_secret or api_secret_secret", "providers.alimtalk.apps",
				"providers.alimtalk.base_url", "providers.alimtalk.rate_per_second"}},
		{"app without sender key", "  alimtalk: {api_key: K, api_secret: s, from: '0212345678', apps: {kr: {}}}\n", []string{"providers.alimtalk.apps.kr.sender_key"}},
		{"no sender number", "  alimtalk: {api_key: K, api_secret: s, apps: {kr: {sender_key: P}}}\n", []string{"providers.alimtalk.from: required"}},
		{"a sender number that is not Korean", "  alimtalk: {api_key: K, api_secret: s, from: '+1 555 0100', apps: {kr: {sender_key: P}}}\n", []string{"providers.alimtalk.from"}},
		{"a sender number too short", "  alimtalk: {api_key: K, api_secret: s, from: '12345', apps: {kr: {sender_key: P}}}\n", []string{"providers.alimtalk.from"}},
		{"misspelt key", "  alimtalk: {api_key: K, api_secret: s, apps: {kr: {pfid: x}}}\n", []string{"pfid"}},
		{"verdict check over SQS's longest delay", "  alimtalk: {api_key: K, api_secret: s, apps: {kr: {sender_key: P}}, from: '0212345678', verdict_check: 16m}\n",
			[]string{"providers.alimtalk.verdict_check"}},
		{"verdict deadline before the first check", "  alimtalk: {api_key: K, api_secret: s, apps: {kr: {sender_key: P}}, from: '0212345678', verdict_check: 5m, verdict_deadline: 1m}\n",
			[]string{"providers.alimtalk.verdict_deadline"}},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(head + tt.yaml))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not name %q:\n%v", tt.name, w, err)
			}
		}
	}

	d := Dev()
	if !d.Providers.AlimTalk.Configured() || d.Providers.AlimTalk.Apps["default"].SenderKey == "" {
		t.Errorf("the dev config has no sandbox AlimTalk app: %+v", d.Providers.AlimTalk)
	}
	if r := d.Redacted(); r.Providers.AlimTalk.APISecret != "***" || d.Providers.AlimTalk.APISecret == "***" {
		t.Error("Redacted must mask a copy of the AlimTalk secret")
	}
}

func TestWebPushConfig(t *testing.T) {
	t.Parallel()
	base := "env: dev\nservices: [{name: orders, api_keys: [orders-key-123]}]\n" +
		"contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\n" +
		"providers: {ses: {from: a@example.com}, twilio: {account_sid: AC1}, webpush: %s}\n"
	parse := func(webpush string) error {
		_, err := Parse([]byte(strings.Replace(base, "%s", webpush, 1)))
		return err
	}
	good := "{vapid_public_key: " + DevVAPIDPublicKey + ", vapid_private_key: " + devVAPIDPrivateKey + ", subscriber: 'mailto:ops@example.com'}"
	if err := parse(good); err != nil {
		t.Fatal(err)
	}
	if err := parse("{vapid_public_key: " + DevVAPIDPublicKey + ", vapid_private_key_secret: herald/vapid, subscriber: 'https://example.com/contact'}"); err != nil {
		t.Fatal(err)
	}
	other := "BC3l7-8v_4uu9yGn3H9Q1s1TCLQDCeyYVIeFzwBRmgzjG5R2rmXFdJ2DNqLYY1n5WP6Xz3iDzWJd5qZz7Qh0r0o"
	for webpush, want := range map[string]string{
		"{vapid_private_key: " + devVAPIDPrivateKey + "}":                                                                           "providers.webpush.vapid_public_key: required",
		"{vapid_public_key: nope, vapid_private_key_secret: s, subscriber: 'mailto:a@b.c'}":                                         "providers.webpush.vapid_public_key",
		"{vapid_public_key: " + other + ", vapid_private_key: " + devVAPIDPrivateKey + ", subscriber: 'mailto:a@b.c'}":              "providers.webpush.vapid",
		"{vapid_public_key: " + DevVAPIDPublicKey + ", subscriber: 'mailto:a@b.c'}":                                                 "providers.webpush: needs vapid_private_key or vapid_private_key_secret",
		"{vapid_public_key: " + DevVAPIDPublicKey + ", vapid_private_key_secret: s, subscriber: 'ops@example.com'}":                 "providers.webpush.subscriber",
		"{vapid_public_key: " + DevVAPIDPublicKey + ", vapid_private_key_secret: s}":                                                "providers.webpush.subscriber: required",
		"{vapid_public_key: " + DevVAPIDPublicKey + ", vapid_private_key: " + devVAPIDPrivateKey + "x, subscriber: 'mailto:a@b.c'}": "providers.webpush.vapid_private_key",
	} {
		err := parse(webpush)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to name %q", webpush, err, want)
		}
	}
	c := Dev()
	if got := c.ProviderApps()["webpush"]; len(got) != 1 || got[0] != "default" {
		t.Errorf("dev webpush apps %v", got)
	}
	if r := c.Redacted(); r.Providers.WebPush.VAPIDPrivateKey != "***" || c.Providers.WebPush.VAPIDPrivateKey == "***" {
		t.Error("the VAPID private key is not redacted")
	}
}

func TestAlertsSlack(t *testing.T) {
	t.Parallel()
	base := "env: dev\nsandbox: true\nservices: [{name: orders, api_keys: [orders-key-123]}]\ncontacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\n"
	c, err := Parse([]byte(base + "alerts: {slack: {webhook_url: 'https://hooks.example.com/services/T0/B0/secret', console_url: 'https://herald.example.com', campaign_finished: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Alerts.Slack.Enabled() || !c.Alerts.Slack.CampaignFinished {
		t.Fatalf("alerts.slack = %+v", c.Alerts.Slack)
	}
	if r := c.Redacted(); strings.Contains(r.Alerts.Slack.WebhookURL, "secret") || c.Alerts.Slack.WebhookURL == "***" {
		t.Fatal("Redacted must mask the webhook URL in a copy")
	}
	for yaml, want := range map[string]string{
		"alerts: {slack: {webhook_url: 'hooks/T0'}}":                                                   "alerts.slack.webhook_url",
		"alerts: {slack: {webhook_url: 'https://h.example.com/x', webhook_url_secret: herald/slack}}":  "alerts.slack.webhook_url: set webhook_url or webhook_url_secret",
		"alerts: {slack: {webhook_url_secret: herald/slack, console_url: 'ftp://x'}}":                  "alerts.slack.console_url",
		"alerts: {slack: {webhook_url_secret: herald/slack, console_url: 'https://x.example.com#/a'}}": "alerts.slack.console_url",
		"alerts: {slack: {webhook: 'https://h.example.com/x'}}":                                        "webhook",
	} {
		if _, err := Parse([]byte(base + yaml + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", yaml, err, want)
		}
	}
}

func TestExpressMaxRecipients(t *testing.T) {
	t.Parallel()
	base := "env: dev\nsandbox: true\nservices: [{name: orders, api_keys: [orders-key-123]}]\n" +
		"contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\n"
	for _, c := range []struct {
		lanes string
		want  int
	}{
		{"", 0},
		{"lanes: {realtime: {express_max_recipients: 0}}\n", -1},
		{"lanes: {realtime: {express_max_recipients: 2}}\n", 2},
	} {
		cfg, err := Parse([]byte(base + c.lanes))
		if err != nil {
			t.Fatalf("%q: %v", c.lanes, err)
		}
		if got := cfg.ExpressMaxRecipients(); got != c.want {
			t.Errorf("%q: ExpressMaxRecipients() = %d, want %d", c.lanes, got, c.want)
		}
	}
	for _, bad := range []string{
		"lanes: {realtime: {express_max_recipients: 9}}\n",
		"lanes: {realtime: {express_max_recipients: -1}}\n",
		"lanes: {bulk: {express_max_recipients: 2}}\n",
	} {
		if _, err := Parse([]byte(base + bad)); err == nil || !strings.Contains(err.Error(), "express_max_recipients") {
			t.Errorf("%q: %v, want a problem naming express_max_recipients", bad, err)
		}
	}
}

func TestServiceBatchingWindow(t *testing.T) {
	t.Parallel()
	const head = "env: dev\nsandbox: true\ncontacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\nservices: [{name: orders, api_keys: [orders-key-123], batching_window: "
	c, err := Parse([]byte(head + "2s}]\n"))
	if err != nil || c.Services[0].BatchingWindow.D() != 2*time.Second {
		t.Fatalf("2s: %+v, %v", c, err)
	}
	for _, bad := range []string{"301s", "1500ms", "-1s"} {
		if _, err := Parse([]byte(head + bad + "}]\n")); err == nil || !strings.Contains(err.Error(), "services[0].batching_window") {
			t.Errorf("%s: %v, want a problem naming services[0].batching_window", bad, err)
		}
	}
}

// TestProviderRetries: AlimTalk retries 3 times at 1m, 5m and 15m unless retry.providers says
// otherwise; a provider's policy is checked, naming the key.
func TestProviderRetries(t *testing.T) {
	t.Parallel()
	const head = "env: dev\nservices: [{name: orders, api_keys: [orders-key-123]}]\ncontacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\nproviders:\n  ses: {from: a@example.com}\n  twilio: {account_sid: AC1, auth_token: t}\n"
	c, err := Parse([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	rp := c.ProviderRetries()[notify.ProviderAlimTalk]
	if rp.MaxAttempts != 4 || len(rp.Delays) != 3 || rp.Delays[0] != time.Minute || rp.Delays[2] != 15*time.Minute {
		t.Fatalf("alimtalk retry %+v, want 3 retries at 1m, 5m, 15m", rp)
	}
	if _, ok := c.ProviderRetries()[notify.ProviderFCM]; ok {
		t.Fatal("fcm has a policy of its own by default")
	}
	c, err = Parse([]byte(head + "retry: {providers: {twilio: {max_retries: 2, delays: [30s]}, alimtalk: {max_retries: 1, delays: [2m]}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rp := c.ProviderRetries()[notify.ProviderTwilio]; rp.MaxAttempts != 3 || rp.Delays[0] != 30*time.Second {
		t.Fatalf("twilio %+v", rp)
	}
	if rp := c.ProviderRetries()[notify.ProviderAlimTalk]; rp.MaxAttempts != 2 {
		t.Fatalf("alimtalk %+v, want the configured one retry", rp)
	}
	for yaml, key := range map[string]string{
		"retry: {providers: {fax: {max_retries: 1, delays: [1m]}}}":  "retry.providers.fax",
		"retry: {providers: {fcm: {max_retries: 2}}}":                "retry.providers.fcm.delays",
		"retry: {providers: {fcm: {max_retries: 1, delays: [20m]}}}": "retry.providers.fcm.delays[0]",
		"retry: {providers: {fcm: {max_retries: -1, delays: [1m]}}}": "retry.providers.fcm.max_retries",
	} {
		if _, err := Parse([]byte(head + yaml + "\n")); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", yaml, err, key)
		}
	}
}

// Marketing SMS: with ad_prefix (Korea's advertising rules) wherever SMS can be sent, the free
// refusal line is required, one line; the unsubscribe base URL is an http(s) base.
func TestMarketingOptOutAndUnsubscribe(t *testing.T) {
	t.Parallel()
	base := "env: dev\nsandbox: true\nservices: [{name: orders, api_keys: [orders-key-123]}]\n" +
		"contacts: {encryption_key: aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}\n"
	c, err := Parse([]byte(base + "marketing: {ad_prefix: true, opt_out_sms: '무료수신거부 080-123-4567', unsubscribe_base_url: 'https://notify.example.com'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Marketing.OptOutSMS != "무료수신거부 080-123-4567" || c.Marketing.UnsubscribeBaseURL != "https://notify.example.com" {
		t.Fatalf("marketing = %+v", c.Marketing)
	}
	if _, err := Parse([]byte(base + "marketing: {ad_prefix: false}\n")); err != nil {
		t.Fatalf("no ad_prefix, no refusal line: %v", err)
	}
	for yaml, want := range map[string]string{
		"marketing: {ad_prefix: true}":                                         "marketing.opt_out_sms",
		"marketing: {ad_prefix: true, opt_out_sms: \"a\\nb\"}":                 "marketing.opt_out_sms",
		"marketing: {unsubscribe_base_url: 'ftp://x'}":                         "marketing.unsubscribe_base_url",
		"marketing: {unsubscribe_base_url: 'https://notify.example.com/?x=1'}": "marketing.unsubscribe_base_url",
	} {
		if _, err := Parse([]byte(base + yaml + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", yaml, err, want)
		}
	}
}
