package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/internal/config"
)

const baseYAML = `
env: local
services:
  - {name: orders, api_keys: [orders-local-key], max_concurrency: 4, iam_principals: ["arn:aws:iam::123456789012:role/orders"]}
  - {name: marketing, api_key_secret: herald/x/marketing, max_concurrency: 2, iam_principals: ["arn:aws:iam::123456789012:role/marketing"]}
providers:
  fcm: {apps: {default: {project_id: p, credentials_file: ./fcm.json}}}
  ses: {from: "Ex <noreply@example.com>", configuration_set: herald-x}
  twilio: {account_sid: AC1, auth_token_secret: herald/x/twilio}
contacts: {encryption_key_secret: herald/x/contacts}
`

const overlayYAML = `
herald:
  services:
    - {name: orders, api_keys: null, api_key_secret: herald/x/orders, max_concurrency: 9}
    - {name: billing, api_key_secret: herald/x/billing, iam_principals: ["arn:aws:iam::123456789012:user/billing"]}
  providers:
    fcm: {apps: {default: {credentials_file: null, credentials_secret: herald/x/fcm}}}
stack:
  api: {jwt: {issuer: "https://idp.example.com/", audience: [inbox]}}
  functions: {prepare: {timeout: 2m}}
`

func TestBuildMergesOverlay(t *testing.T) {
	env, err := Build("staging", []byte(baseYAML), []byte(overlayYAML), "staging.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := env.Config
	if c.Env != "staging" {
		t.Errorf("env = %q, want the deployment's name", c.Env)
	}
	if got := c.ServiceNames(); !slices.Equal(got, []string{"orders", "marketing", "billing"}) {
		t.Errorf("services = %v: want merged by name, base order first, new ones appended", got)
	}
	if o := c.Services[0]; len(o.APIKeys) != 0 || o.APIKeySecret != "herald/x/orders" || o.MaxConcurrency != 9 {
		t.Errorf("orders = %+v: want api_keys deleted by null, secret and concurrency overridden", o)
	}
	if m := c.Services[1]; m.APIKeySecret != "herald/x/marketing" || m.MaxConcurrency != 2 {
		t.Errorf("marketing = %+v: want untouched", m)
	}
	if a := c.Providers.FCM.Apps["default"]; a.CredentialsFile != "" || a.CredentialsSecret != "herald/x/fcm" || a.ProjectID != "p" {
		t.Errorf("fcm app = %+v: want maps merged key by key", a)
	}
	// Prepare's 2m timeout raises its queues' visibility to 12m in what the functions read.
	if v := c.Lanes["bulk"].Prepare.VisibilityTimeout.D(); v != 12*time.Minute {
		t.Errorf("bulk prepare visibility = %v, want 12m (6 × 2m)", v)
	}
	// What the functions read is a valid herald.yaml naming secrets, never holding them.
	back, err := config.Parse(env.ConfigYAML)
	if err != nil {
		t.Fatalf("effective config does not parse: %v\n%s", err, env.ConfigYAML)
	}
	if back.Env != "staging" || len(back.Services) != 3 {
		t.Errorf("round trip lost data: %+v", back)
	}
	if strings.Contains(string(env.ConfigYAML), "orders-local-key") {
		t.Error("a plaintext API key reached the deployed config")
	}
}

func TestBuildRefusesSecretValuesAndLocalFiles(t *testing.T) {
	_, err := Build("dev", []byte(baseYAML+"sandbox: true\n"), []byte("herald: {contacts: {encryption_key: "+
		"aGVyYWxkLWRldi1vbmx5LW5vdC1hLXNlY3JldC1rZXk=}, providers: {twilio: {auth_token: abcdefgh}, "+
		"alimtalk: {api_key: NCSKEY, api_secret: abcdefgh, from: '0212345678', apps: {default: {sender_key: PF1}}}, webpush: {vapid_public_key: "+
		config.DevVAPIDPublicKey+", vapid_private_key: xYsKtQFyLFkSYM84LyV8CbG-hnSPjIx-R1uDeAQjSZg, subscriber: 'mailto:ops@example.com'}}, "+
		"alerts: {slack: {webhook_url: 'https://hooks.example.com/services/T0/B0/x'}}}\n"), "dev.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, key := range []string{
		"herald.services[0] (orders).api_keys", "herald.contacts.encryption_key", "herald.providers.twilio.auth_token",
		"herald.providers.fcm.apps.default.credentials_file", "herald.sandbox",
		"herald.providers.alimtalk.api_secret:", "herald.providers.alimtalk.api_secret_secret",
		"herald.providers.webpush.vapid_private_key", "herald.providers.webpush.vapid_private_key_secret",
		"herald.alerts.slack.webhook_url",
	} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
}

func TestBuildRejectsBadSettings(t *testing.T) {
	deployable := strings.NewReplacer("api_keys: [orders-local-key]", "api_key_secret: herald/x/orders",
		"credentials_file: ./fcm.json", "credentials_secret: herald/x/fcm").Replace(baseYAML)
	if _, err := Build("dev", []byte(deployable), []byte("stack: {}"), "dev.yaml"); err != nil {
		t.Fatalf("the deployable base is refused: %v", err)
	}
	for name, overlay := range map[string]string{
		"unknown stack key":   "stack: {protect_dta: true}",
		"unknown nested key":  "stack: {api: {rate_limt: 5}}",
		"unknown top key":     "hrald: {}",
		"retention":           "stack: {log_retention_days: 31}",
		"jwt half set":        "stack: {api: {jwt: {issuer: 'https://x/'}}}",
		"jwt not https":       "stack: {api: {jwt: {issuer: 'http://x/', audience: [a]}}}",
		"console without jwt": "stack: {api: {console: true}}",
		"console, no group":   "stack: {api: {console: true, jwt: {issuer: 'https://x/', audience: [a]}}}",
		"alarm kind":          "stack: {alarms: {oldest_message_age: {sms: 5m}}}",
		"alarm email":         "stack: {alarms: {emails: [not-an-address]}}",
		"slack incomplete":    "stack: {alarms: {slack: {workspace_id: T1}}}",
		"function timeout":    "stack: {functions: {send: {timeout: 20m}}}",
		"env mismatch":        "herald: {env: prod}",
		"ses region mismatch": "stack: {region: eu-west-1}",
		"runtime validation":  "herald: {services: [{name: orders, max_concurrency: 1}]}",
		"no config set":       "herald: {providers: {ses: {configuration_set: null}}}",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Build("dev", []byte(deployable), []byte(overlay), "dev.yaml"); err == nil {
				t.Errorf("Build accepted %q", overlay)
			} else {
				t.Log(err)
			}
		})
	}
}

// TestBuildRefusesServiceWithNoWayIn: behind API Gateway only SigV4 callers reach /v1, and an
// ingest queue admits only its service's principals, so a service without iam_principals could
// not reach Herald at all in AWS; a service name whose queue name SQS would refuse is refused too.
func TestBuildRefusesServiceWithNoWayIn(t *testing.T) {
	base := strings.NewReplacer("api_keys: [orders-local-key]", "api_key_secret: herald/x/orders",
		"credentials_file: ./fcm.json", "credentials_secret: herald/x/fcm").Replace(baseYAML)
	_, err := Build("dev", []byte(base), []byte("herald: {services: [{name: marketing, iam_principals: null}]}"), "dev.yaml")
	if err == nil || !strings.Contains(err.Error(), "herald.services[marketing].iam_principals") {
		t.Fatalf("err = %v, want it to name herald.services[marketing].iam_principals", err)
	}
	if strings.Contains(err.Error(), "services[orders]") {
		t.Errorf("err names orders, which has a principal: %v", err)
	}
	long := "s" + strings.Repeat("x", 39)
	_, err = Build(strings.Repeat("e", 40), []byte(base), []byte("herald: {services: [{name: "+long+", iam_principals: [\"arn:aws:iam::123456789012:role/x\"]}]}"), "e.yaml")
	if err == nil || !strings.Contains(err.Error(), "herald.services["+long+"].name") || !strings.Contains(err.Error(), "SQS allows 80") {
		t.Fatalf("err = %v, want it to name herald.services[%s].name", err, long)
	}
}

func TestRepositoryEnvironmentsLoad(t *testing.T) {
	entries, err := os.ReadDir("env")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		if _, err := Load(name, filepath.Join("..", "herald.example.yaml"), "env"); err != nil {
			t.Errorf("infra/env/%s: %v", e.Name(), err)
		}
	}
	if _, err := Load("qa", filepath.Join("..", "herald.example.yaml"), "env"); err == nil || !strings.Contains(err.Error(), "qa.yaml") {
		t.Errorf("unknown environment: err = %v, want it to name the missing file", err)
	}
}

func TestDiscoverFunctions(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"send", "api", ".git", "_template"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := DiscoverFunctions(dir)
	if err != nil || !slices.Equal(got, []string{"api", "send"}) {
		t.Errorf("DiscoverFunctions = %v, %v; want [api send]", got, err)
	}
}

func TestPascal(t *testing.T) {
	for in, want := range map[string]string{"ingest-orders": "IngestOrders", "herald/dev/x-y": "HeraldDevXY", "send": "Send"} {
		if got := pascal(in); got != want {
			t.Errorf("pascal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSendReadsTheAlimTalkSecret(t *testing.T) {
	yaml := strings.Replace(baseYAML, "providers:\n", "providers:\n  alimtalk: {api_key: NCSKEY, api_secret_secret: herald/x/solapi, from: '0212345678', apps: {default: {sender_key: PF1}}}\n", 1)
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if got := secretNames(c, "send")["providers.alimtalk.api_secret_secret"]; got != "herald/x/solapi" {
		t.Errorf("send may not read the Solapi secret: %q", got)
	}
	if _, ok := secretNames(c, "api")["providers.alimtalk.api_secret_secret"]; ok {
		t.Error("api may read the Solapi secret")
	}
}

// The VAPID private key is read by the send function alone, from the secret herald.yaml names.
func TestWebPushSecretGoesToSendOnly(t *testing.T) {
	deployable := strings.NewReplacer("api_keys: [orders-local-key]", "api_key_secret: herald/x/orders",
		"credentials_file: ./fcm.json", "credentials_secret: herald/x/fcm").Replace(baseYAML)
	env, err := Build("dev", []byte(deployable), []byte("herald: {providers: {webpush: {vapid_public_key: "+config.DevVAPIDPublicKey+
		", vapid_private_key_secret: herald/x/vapid, subscriber: 'mailto:ops@example.com'}}}\n"), "dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := secretNames(env.Config, "send")["providers.webpush.vapid_private_key_secret"]; got != "herald/x/vapid" {
		t.Errorf("send may read %q, want herald/x/vapid", got)
	}
	for _, fn := range []string{"api", "prepare", "cleanup"} {
		if _, ok := secretNames(env.Config, fn)["providers.webpush.vapid_private_key_secret"]; ok {
			t.Errorf("%s may read the VAPID private key", fn)
		}
	}
}

func TestAlertsReadTheWebhookSecretOnly(t *testing.T) {
	yaml := baseYAML + "alerts: {slack: {webhook_url_secret: herald/x/slack}}\n"
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if got := secretNames(c, alertsFunction); len(got) != 1 || got["alerts.slack.webhook_url_secret"] != "herald/x/slack" {
		t.Errorf("alerts may read %v, want the webhook secret only", got)
	}
	for _, fn := range []string{"api", "send", "ingest"} {
		if _, ok := secretNames(c, fn)["alerts.slack.webhook_url_secret"]; ok {
			t.Errorf("%s may read the webhook secret", fn)
		}
	}
}
