package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"herald/internal/config"
	"herald/internal/notify"
)

// Environment is everything one deployment is made from: the effective herald.yaml (the base file
// with the environment's overrides merged in, validated by the same code the runtime uses) and
// the settings that only the infrastructure needs.
type Environment struct {
	Name     string
	Config   *config.Config
	Settings Settings
	// ConfigYAML is the effective herald.yaml shipped to every function (it holds secret names,
	// never secret values: Load refuses those).
	ConfigYAML []byte
}

// Settings are the parts of a deployment herald.yaml has no keys for: they live under `stack:`
// in infra/env/<env>.yaml.
type Settings struct {
	Account string `yaml:"account"` // optional: pin the stack to one account…
	Region  string `yaml:"region"`  // …and region; empty means the CLI's credentials decide
	// ProtectData keeps tables (RETAIN + deletion protection) and log groups when the stack or a
	// resource is deleted. Set it wherever the data matters (prod).
	ProtectData      bool                        `yaml:"protect_data"`
	LogRetentionDays int                         `yaml:"log_retention_days"`
	API              APISettings                 `yaml:"api"`
	Alarms           AlarmSettings               `yaml:"alarms"`
	Functions        map[string]FunctionSettings `yaml:"functions"`
	Exports          ExportSettings              `yaml:"exports"`
	// LambdaConcurrencyQuota is the account's Lambda concurrency quota in the stack's region
	// (Service Quotas, "Concurrent executions"): 10 where nobody has raised it, the default.
	// Lambda refuses a reservation that would leave the account less than 100 unreserved, or
	// less than the whole quota where that is under 100, so with 10 no function may reserve any.
	LambdaConcurrencyQuota int `yaml:"lambda_concurrency_quota"`
	// DeployRoles are the principals CloudFormation acts as when it deploys the stack (ARN
	// patterns): the ingest queues' and the lists bucket's policies refuse everyone else what
	// only Herald's roles do there, and CloudFormation must still update and delete them.
	// Default: the CDK bootstrap's execution role, cdk-*-cfn-exec-role-<account>-<region>.
	DeployRoles []string `yaml:"deploy_roles"`
	// RecipientIndex files each notification sent to one user under that user (the
	// notifications table's by_user index), so the console can find a user's notifications. It
	// costs one DynamoDB write unit more per such notification ($0.63 per million at on-demand
	// prices), which is why it is a choice; without it the console's search by user says so.
	RecipientIndex bool `yaml:"recipient_index"`
}

// ExportSettings configures export files (functions/export).
type ExportSettings struct {
	// LinkTTL is how long a presigned download link is valid: default 15m, at most 168h (what
	// SigV4 presigning allows).
	LinkTTL config.Duration `yaml:"link_ttl"`
}

// ExportLinkTTL is exports.link_ttl with its default.
func (s Settings) ExportLinkTTL() time.Duration {
	if s.Exports.LinkTTL == 0 {
		return exportLinkTTLDefault
	}
	return s.Exports.LinkTTL.D()
}

// APISettings configures the HTTP API.
type APISettings struct {
	RateLimit  float64     `yaml:"rate_limit"`  // steady requests per second for the whole API
	BurstLimit int         `yaml:"burst_limit"` // requests allowed at once above the rate
	JWT        JWTSettings `yaml:"jwt"`         // end users' tokens for the inbox routes
	// OpenRoutes caps the routes anyone may call without credentials — GET /healthz, the
	// console's page and script, and the live inbox's $connect (whose JWT the stream function
	// checks) — per route, so a flood there cannot take the concurrency the stages need.
	OpenRoutes ThrottleSettings `yaml:"open_routes"`
	// Console serves the operator console (/console) from the admin function, its data routes
	// (/console/api/…) behind the JWT authorizer: operators sign in with a token from jwt.issuer
	// carrying jwt.admin_group or jwt.admin_scope.
	Console bool `yaml:"console"`
}

// ThrottleSettings is an API Gateway throttle: a steady rate and a burst above it.
type ThrottleSettings struct {
	RateLimit  float64 `yaml:"rate_limit"`
	BurstLimit int     `yaml:"burst_limit"`
}

// JWTSettings is the identity provider whose tokens the inbox routes accept.
type JWTSettings struct {
	Issuer   string   `yaml:"issuer"`   // e.g. https://cognito-idp.<region>.amazonaws.com/<pool id>
	Audience []string `yaml:"audience"` // client ids
	// AdminGroup and AdminScope admit an operator to the console: a token whose groups claim
	// (cognito:groups or groups) holds AdminGroup, or whose scope claim (scope or scp) holds
	// AdminScope. The gateway checks the token; the admin function checks these claims again.
	AdminGroup string `yaml:"admin_group"`
	AdminScope string `yaml:"admin_scope"`
}

// AlarmSettings says where alarms go and when they fire.
type AlarmSettings struct {
	Emails []string       `yaml:"emails"` // subscribed to the alarm topic (each must confirm)
	Slack  *SlackSettings `yaml:"slack"`  // AWS Chatbot; the workspace must be authorized once in the console
	// OldestMessageAge is the age of the oldest message that pages, per queue kind: ingest,
	// realtime, bulk, cleanup, bounce.
	OldestMessageAge map[string]config.Duration `yaml:"oldest_message_age"`
	// LambdaErrorRatePercent is the share of failed invocations over 5 minutes that pages.
	LambdaErrorRatePercent float64 `yaml:"lambda_error_rate_percent"`
	// SES reputation thresholds, in percent. SES reviews an account at 5 % bounces and 0.1 %
	// complaints; the defaults (4 %, 0.08 %) page before that.
	SESBounceRatePercent    float64 `yaml:"ses_bounce_rate_percent"`
	SESComplaintRatePercent float64 `yaml:"ses_complaint_rate_percent"`
	// ProviderFailureRatePercent is the share of one provider's sends over 15 minutes that
	// ended failed (Failed / (Sent + Failed)) that pages, once at least ProviderFailureMinSends
	// were attempted (a few failures of a quiet provider are not an outage).
	ProviderFailureRatePercent float64 `yaml:"provider_failure_rate_percent"`
	ProviderFailureMinSends    int     `yaml:"provider_failure_min_sends"`
}

// SlackSettings is one Slack channel AWS Chatbot posts alarms to.
type SlackSettings struct {
	WorkspaceID string `yaml:"workspace_id"`
	ChannelID   string `yaml:"channel_id"`
}

// FunctionSettings overrides a function's size.
type FunctionSettings struct {
	Timeout  config.Duration `yaml:"timeout"`
	MemoryMB int             `yaml:"memory_mb"`
	// ReservedConcurrency reserves (and caps) the function's concurrency; 0, the default for
	// every function, reserves none. The sum over functions must leave the account's minimum
	// unreserved (lambda_concurrency_quota).
	ReservedConcurrency int `yaml:"reserved_concurrency"`
}

// defaultFunctionSettings are the sizes used where infra/env/<env>.yaml says nothing. The
// timeout also sets the visibility timeout of the queues a function consumes (at least 6×).
var defaultFunctionSettings = map[string]FunctionSettings{
	"api":      {Timeout: config.Duration(10 * time.Second), MemoryMB: 256},
	"ingest":   {Timeout: config.Duration(30 * time.Second), MemoryMB: 256},
	"prepare":  {Timeout: config.Duration(60 * time.Second), MemoryMB: 512},
	"send":     {Timeout: config.Duration(60 * time.Second), MemoryMB: 512},
	"record":   {Timeout: config.Duration(30 * time.Second), MemoryMB: 256},
	"cleanup":  {Timeout: config.Duration(30 * time.Second), MemoryMB: 256},
	"bounce":   {Timeout: config.Duration(30 * time.Second), MemoryMB: 256},
	"campaign": {Timeout: config.Duration(60 * time.Second), MemoryMB: 512},
	// One object per invocation: a million-line list takes minutes of batch writes. The import
	// checkpoints and asks to be retried before the timeout, so a longer list continues.
	"audience": {Timeout: config.Duration(15 * time.Minute), MemoryMB: 512},
	// One export per invocation, streamed page by page: memory stays flat whatever its size.
	"export": {Timeout: config.Duration(15 * time.Minute), MemoryMB: 512},
}

// Function returns the settings of function name with defaults applied.
func (s Settings) Function(name string) FunctionSettings {
	f := s.Functions[name]
	d, ok := defaultFunctionSettings[name]
	if !ok {
		d = FunctionSettings{Timeout: config.Duration(30 * time.Second), MemoryMB: 256}
	}
	if f.Timeout == 0 {
		f.Timeout = d.Timeout
	}
	if f.MemoryMB == 0 {
		f.MemoryMB = d.MemoryMB
	}
	return f
}

// defaultLambdaConcurrencyQuota is a new account's Lambda concurrency quota.
const defaultLambdaConcurrencyQuota = 10

// minUnreserved is what Lambda keeps unreserved in an account with quota: 100, or the whole
// quota where that is smaller.
func minUnreserved(quota int) int { return min(100, quota) }

// MaxReserved is the most concurrency the functions may reserve together.
func (s Settings) MaxReserved() int {
	return s.LambdaConcurrencyQuota - minUnreserved(s.LambdaConcurrencyQuota)
}

// ReservedConcurrency is the concurrency the functions reserve together.
func (s Settings) ReservedConcurrency() int {
	n := 0
	for _, f := range s.Functions {
		n += f.ReservedConcurrency
	}
	return n
}

// reservations lists the functions that reserve concurrency, for an error message.
func (s Settings) reservations() string {
	var out []string
	for _, name := range sortedKeys(s.Functions) {
		if r := s.Functions[name].ReservedConcurrency; r > 0 {
			out = append(out, fmt.Sprintf("%s %d", name, r))
		}
	}
	return strings.Join(out, ", ")
}

// queueKinds are the keys of alarms.oldest_message_age.
var queueKinds = []string{"ingest", "realtime", "bulk", "cleanup", "bounce"}

func (s *Settings) applyDefaults() {
	if s.LogRetentionDays == 0 {
		s.LogRetentionDays = 30
	}
	if s.API.RateLimit == 0 {
		s.API.RateLimit = 200
	}
	if s.API.BurstLimit == 0 {
		s.API.BurstLimit = 400
	}
	if s.API.OpenRoutes.RateLimit == 0 {
		s.API.OpenRoutes.RateLimit = 20
	}
	if s.API.OpenRoutes.BurstLimit == 0 {
		s.API.OpenRoutes.BurstLimit = 40
	}
	if s.LambdaConcurrencyQuota == 0 {
		s.LambdaConcurrencyQuota = defaultLambdaConcurrencyQuota
	}
	a := &s.Alarms
	defaults := map[string]time.Duration{
		"ingest": 5 * time.Minute, "realtime": 5 * time.Minute, "bulk": time.Hour,
		"cleanup": time.Hour, "bounce": time.Hour,
	}
	if a.OldestMessageAge == nil {
		a.OldestMessageAge = map[string]config.Duration{}
	}
	for k, d := range defaults {
		if a.OldestMessageAge[k] == 0 {
			a.OldestMessageAge[k] = config.Duration(d)
		}
	}
	if a.LambdaErrorRatePercent == 0 {
		a.LambdaErrorRatePercent = 5
	}
	if a.SESBounceRatePercent == 0 {
		a.SESBounceRatePercent = 4
	}
	if a.SESComplaintRatePercent == 0 {
		a.SESComplaintRatePercent = 0.08
	}
	if a.ProviderFailureRatePercent == 0 {
		a.ProviderFailureRatePercent = 20
	}
	if a.ProviderFailureMinSends == 0 {
		a.ProviderFailureMinSends = 20
	}
}

func (s Settings) validate(bad func(key, format string, args ...any)) {
	if _, ok := retentionDays[s.LogRetentionDays]; !ok {
		bad("stack.log_retention_days", "%d is not a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, 180, 365, 731, 1827, 3653)", s.LogRetentionDays)
	}
	if d := s.Exports.LinkTTL.D(); d != 0 && (d < time.Minute || d > 7*24*time.Hour) {
		bad("stack.exports.link_ttl", "%s must be between 1m and 168h", d)
	}
	if s.API.RateLimit < 1 || s.API.BurstLimit < 1 {
		bad("stack.api", "rate_limit and burst_limit must be positive")
	}
	if s.API.JWT.Issuer != "" && !strings.HasPrefix(s.API.JWT.Issuer, "https://") {
		bad("stack.api.jwt.issuer", "%q must be an https URL", s.API.JWT.Issuer)
	}
	if (s.API.JWT.Issuer == "") != (len(s.API.JWT.Audience) == 0) {
		bad("stack.api.jwt", "set both issuer and audience, or neither (then the inbox routes are not exposed)")
	}
	if s.API.Console && (s.API.JWT.Issuer == "" || s.API.JWT.AdminGroup == "" && s.API.JWT.AdminScope == "") {
		bad("stack.api.console", "the console needs stack.api.jwt.issuer and stack.api.jwt.admin_group or admin_scope: without them any token of the issuer would operate the queues")
	}
	for k := range s.Alarms.OldestMessageAge {
		if !contains(queueKinds, k) {
			bad("stack.alarms.oldest_message_age."+k, "unknown queue kind (want one of %s)", strings.Join(queueKinds, ", "))
		}
	}
	for _, e := range s.Alarms.Emails {
		if _, err := mail.ParseAddress(e); err != nil {
			bad("stack.alarms.emails", "%q is not an email address", e)
		}
	}
	if sl := s.Alarms.Slack; sl != nil && (sl.WorkspaceID == "" || sl.ChannelID == "") {
		bad("stack.alarms.slack", "needs workspace_id and channel_id")
	}
	if s.API.OpenRoutes.RateLimit < 1 || s.API.OpenRoutes.BurstLimit < 1 {
		bad("stack.api.open_routes", "rate_limit and burst_limit must be positive")
	}
	for _, r := range s.DeployRoles {
		if !strings.HasPrefix(r, "arn:") || !strings.Contains(r, ":iam::") {
			bad("stack.deploy_roles", "%q is not an IAM role ARN (pattern)", r)
		}
	}
	if s.LambdaConcurrencyQuota < 0 {
		bad("stack.lambda_concurrency_quota", "%d is negative", s.LambdaConcurrencyQuota)
	}
	if reserved, most := s.ReservedConcurrency(), s.MaxReserved(); reserved > most {
		bad("stack.functions", "%d reserved concurrency in all (%s) would leave the account %d unreserved of its quota of %d (stack.lambda_concurrency_quota); "+
			"Lambda keeps at least %d unreserved and refuses the deploy: reserve at most %d, or raise the quota in Service Quotas first and set stack.lambda_concurrency_quota",
			reserved, s.reservations(), s.LambdaConcurrencyQuota-reserved, s.LambdaConcurrencyQuota, minUnreserved(s.LambdaConcurrencyQuota), most)
	}
	for name, f := range s.Functions {
		key := "stack.functions." + name
		if f.ReservedConcurrency < 0 {
			bad(key+".reserved_concurrency", "%d is negative", f.ReservedConcurrency)
		}
		if f.Timeout != 0 && (f.Timeout.D() < time.Second || f.Timeout.D() > 15*time.Minute) {
			bad(key+".timeout", "must be 1s–15m (and 6× it must fit SQS's 12h visibility limit)")
		}
		if f.MemoryMB != 0 && (f.MemoryMB < 128 || f.MemoryMB > 10240) {
			bad(key+".memory_mb", "%d is outside 128–10240", f.MemoryMB)
		}
	}
}

// Load builds environment env from the base herald.yaml at configPath and
// <envDir>/<env>.yaml. The environment file has two sections: `herald:` is merged over the base
// file (maps merge key by key, a null deletes a key, lists of named entries such as services
// merge by name, other lists and scalars replace), and `stack:` holds Settings. `env` in the
// result is always env.
func Load(env, configPath, envDir string) (*Environment, error) {
	base, err := os.ReadFile(configPath)
	if err != nil {
		return nil, fmt.Errorf("herald config: %w", err)
	}
	envPath := filepath.Join(envDir, env+".yaml")
	overlay, err := os.ReadFile(envPath)
	if err != nil {
		return nil, fmt.Errorf("environment %q: %w (each -c env=<name> needs %s)", env, err, envPath)
	}
	return Build(env, base, overlay, envPath)
}

// Build is Load on bytes; where names the overlay in error messages.
func Build(env string, base, overlay []byte, where string) (*Environment, error) {
	var baseMap map[string]any
	if err := yaml.Unmarshal(base, &baseMap); err != nil {
		return nil, fmt.Errorf("herald config: %w", err)
	}
	var file struct {
		Herald map[string]any `yaml:"herald"`
		Stack  yaml.Node      `yaml:"stack"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(overlay))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%s: %w (top-level keys are herald and stack)", where, err)
	}
	merged := mergeYAML(baseMap, file.Herald)
	if v, ok := merged["env"]; ok && v != env && file.Herald["env"] != nil {
		return nil, fmt.Errorf("%s: herald.env is %v but this is environment %q", where, v, env)
	}
	merged["env"] = env
	b, err := yaml.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("herald.yaml merged with %s:\n%w", where, err)
	}

	var settings Settings
	if file.Stack.Kind != 0 {
		// Node.Decode ignores unknown keys; a strict decoder catches a typo at any depth.
		raw, err := yaml.Marshal(&file.Stack)
		if err != nil {
			return nil, fmt.Errorf("%s: stack: %w", where, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&settings); err != nil {
			return nil, fmt.Errorf("%s: stack: %w", where, err)
		}
	}
	settings.applyDefaults()

	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: %s", where, key, fmt.Sprintf(format, args...)))
	}
	settings.validate(bad)
	checkDeployable(cfg, bad)
	if settings.Region != "" && cfg.Providers.SES.Region != settings.Region {
		errs = append(errs, fmt.Errorf("%s herald.providers.ses.region: %q, but the stack deploys to %q: the configuration set and its bounce route live in the stack's region",
			where, cfg.Providers.SES.Region, settings.Region))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	raiseVisibility(cfg, settings)
	// What the functions read is the validated config, re-encoded: defaults filled in and
	// visibility timeouts as deployed, so the runtime and the infrastructure cannot disagree.
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode effective config: %w", err)
	}
	return &Environment{Name: env, Config: cfg, Settings: settings, ConfigYAML: out}, nil
}

// raiseVisibility sets every stage queue's visibility timeout to at least 6× its consumer's
// function timeout (Lambda's rule for SQS event sources), in place.
func raiseVisibility(c *config.Config, s Settings) {
	raise := func(cs *config.Consumer, function string) {
		if min := 6 * s.Function(function).Timeout; cs.VisibilityTimeout < min {
			cs.VisibilityTimeout = min
		}
	}
	for name, l := range c.Lanes {
		raise(&l.Prepare, notify.StagePrepare)
		raise(&l.Send, notify.StageSend)
		raise(&l.Record, notify.StageRecord)
		c.Lanes[name] = l
	}
	for name, cs := range c.Stages {
		raise(&cs, name)
		c.Stages[name] = cs
	}
}

// mergeYAML returns base with over merged in: maps merge recursively, a nil value deletes the
// key, lists of named entries merge by name, anything else replaces.
func mergeYAML(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = mergeYAML(bm, om)
			continue
		}
		bl, bok := out[k].([]any)
		ol, ook := v.([]any)
		if bok && ook && named(bl) && named(ol) {
			out[k] = mergeNamed(bl, ol)
			continue
		}
		out[k] = v
	}
	return out
}

// named reports whether every entry of list is a map with a string name (like services).
func named(list []any) bool {
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return len(list) > 0
}

// mergeNamed merges lists of named entries by name: an entry of over merges into the base entry of
// the same name, or is appended; base entries keep their order.
func mergeNamed(base, over []any) []any {
	out := make([]any, len(base))
	copy(out, base)
	index := map[string]int{}
	for i, e := range out {
		index[e.(map[string]any)["name"].(string)] = i
	}
	for _, e := range over {
		m := e.(map[string]any)
		if i, ok := index[m["name"].(string)]; ok {
			out[i] = mergeYAML(out[i].(map[string]any), m)
			continue
		}
		out = append(out, m)
	}
	return out
}

// checkDeployable rejects what works locally but must not reach AWS: secret values (they would
// end up in the function package and the template) and local files. Each message says which key
// to set instead.
func checkDeployable(c *config.Config, bad func(key, format string, args ...any)) {
	h := func(key string) string { return "herald." + key }
	if c.Sandbox {
		bad(h("sandbox"), "sandbox providers are for the local runtime; set sandbox: null")
	}
	for i, s := range c.Services {
		key := fmt.Sprintf("services[%d] (%s)", i, s.Name)
		if len(s.APIKeys) > 0 {
			bad(h(key+".api_keys"), "API keys must not be deployed in plain text: store them in Secrets Manager, set api_key_secret and api_keys: null")
		}
	}
	if c.Contacts.EncryptionKey != "" {
		bad(h("contacts.encryption_key"), "must not be deployed in plain text: set encryption_key_secret and encryption_key: null")
	}
	if c.Contacts.EncryptionKeySecret == "" {
		bad(h("contacts.encryption_key_secret"), "required in AWS (a Secrets Manager secret holding base64 of 32 bytes)")
	}
	if c.Providers.Twilio.AuthToken != "" {
		bad(h("providers.twilio.auth_token"), "must not be deployed in plain text: set auth_token_secret and auth_token: null")
	}
	if c.Providers.Twilio.AccountSID != "" && c.Providers.Twilio.AuthTokenSecret == "" {
		bad(h("providers.twilio.auth_token_secret"), "required in AWS (a Secrets Manager secret name)")
	}
	if c.Providers.AlimTalk.APISecret != "" {
		bad(h("providers.alimtalk.api_secret"), "must not be deployed in plain text: set api_secret_secret and api_secret: null")
	}
	if c.Providers.AlimTalk.Configured() && c.Providers.AlimTalk.APISecretSecret == "" {
		bad(h("providers.alimtalk.api_secret_secret"), "required in AWS (a Secrets Manager secret holding the Solapi API secret)")
	}
	for _, name := range config.SortedApps(c.Providers.FCM.Apps) {
		a := c.Providers.FCM.Apps[name]
		key := h("providers.fcm.apps." + name)
		if a.CredentialsFile != "" {
			bad(key+".credentials_file", "a local file does not exist in Lambda: set credentials_secret and credentials_file: null")
		}
		if a.CredentialsSecret == "" {
			bad(key+".credentials_secret", "required in AWS (a Secrets Manager secret holding the service-account JSON)")
		}
	}
	for _, name := range config.SortedApps(c.Providers.APNs.Apps) {
		a := c.Providers.APNs.Apps[name]
		key := h("providers.apns.apps." + name)
		if a.KeyFile != "" {
			bad(key+".key_file", "a local file does not exist in Lambda: set key_secret and key_file: null")
		}
		if a.KeySecret == "" {
			bad(key+".key_secret", "required in AWS (a Secrets Manager secret holding the .p8 key)")
		}
	}
	if w := c.Providers.WebPush; w.Enabled() {
		if w.VAPIDPrivateKey != "" {
			bad(h("providers.webpush.vapid_private_key"), "must not be deployed in plain text: set vapid_private_key_secret and vapid_private_key: null")
		}
		if w.VAPIDPrivateKeySecret == "" {
			bad(h("providers.webpush.vapid_private_key_secret"), "required in AWS (a Secrets Manager secret holding the base64url VAPID private key)")
		}
	}
	if c.Alerts.Slack.WebhookURL != "" {
		bad(h("alerts.slack.webhook_url"), "a webhook URL is its own secret and must not be deployed in plain text: store it in Secrets Manager, set webhook_url_secret and webhook_url: null")
	}
	if c.Providers.SES.From != "" {
		if _, err := mail.ParseAddress(c.Providers.SES.From); err != nil {
			bad(h("providers.ses.from"), "%q is not an address: %v", c.Providers.SES.From, err)
		}
	}
	if c.Providers.SES.ConfigurationSet == "" {
		bad(h("providers.ses.configuration_set"), "required in AWS: the stack creates it and routes its bounces and complaints to the bounce queue")
	}
	for _, s := range c.Services {
		key := h("services[" + s.Name + "]")
		// The runtime derives queue names itself (herald-<env>-ingest-<service>[-dlq]), so they
		// cannot be shortened here: a name SQS would refuse is refused now, at synth.
		if q := queueName(c.Env, notify.DLQName(notify.IngestQueue(s.Name))); len(q) > maxQueueName {
			bad(key+".name", "queue name %q is %d characters; SQS allows %d: shorten the service name (or herald.env)", q, len(q), maxQueueName)
		}
		// Behind API Gateway every /v1 call is SigV4-signed and the caller's role decides the
		// service, and the ingest queue admits only these principals: a service without one
		// could neither call the API nor send to its queue.
		if len(s.IAMPrincipals) == 0 {
			bad(key+".iam_principals", "required in AWS: the IAM role or user ARN(s) the service runs as — the only way it can call the API (SigV4) or send to its ingest queue")
		}
	}
}

// secretNames lists the Secrets Manager names a function may read, keyed by the config key that
// names them. Every function gets the contacts key: internal/awsenv builds the store, which seals
// and opens contacts, at start-up. Only the API authenticates services, and only send talks to
// providers.
func secretNames(c *config.Config, function string) map[string]string {
	out := map[string]string{}
	if function == alertsFunction { // reads no store: the Slack webhook only
		if s := c.Alerts.Slack.WebhookURLSecret; s != "" {
			out["alerts.slack.webhook_url_secret"] = s
		}
		return out
	}
	if c.Contacts.EncryptionKeySecret != "" {
		out["contacts.encryption_key_secret"] = c.Contacts.EncryptionKeySecret
	}
	switch function {
	case "api":
		for _, s := range c.Services {
			if s.APIKeySecret != "" {
				out["services."+s.Name+".api_key_secret"] = s.APIKeySecret
			}
		}
	case "send", "ingest": // ingest sends express notifications itself
		for _, name := range config.SortedApps(c.Providers.FCM.Apps) {
			if s := c.Providers.FCM.Apps[name].CredentialsSecret; s != "" {
				out["providers.fcm.apps."+name+".credentials_secret"] = s
			}
		}
		for _, name := range config.SortedApps(c.Providers.APNs.Apps) {
			if s := c.Providers.APNs.Apps[name].KeySecret; s != "" {
				out["providers.apns.apps."+name+".key_secret"] = s
			}
		}
		if s := c.Providers.Twilio.AuthTokenSecret; s != "" {
			out["providers.twilio.auth_token_secret"] = s
		}
		if s := c.Providers.AlimTalk.APISecretSecret; s != "" {
			out["providers.alimtalk.api_secret_secret"] = s
		}
		if s := c.Providers.WebPush.VAPIDPrivateKeySecret; s != "" {
			out["providers.webpush.vapid_private_key_secret"] = s
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
