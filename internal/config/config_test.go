package config

import (
	"strings"
	"testing"
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
