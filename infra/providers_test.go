package main

import (
	"strings"
	"testing"

	"herald/internal/notify"
)

// Every provider of the one list (notify.Providers) has its dashboard graph — its Sent and
// Failed lines in this environment — and its failure-rate alarm, so a provider added to the list
// (AlimTalk, Web Push) cannot go unwatched.
func TestEveryProviderHasDashboardLineAndAlarm(t *testing.T) {
	environments(t, func(t *testing.T, s *synthesis) {
		body := mustJSON(s.props(s.ofType("AWS::CloudWatch::Dashboard")[0])["DashboardBody"])
		for _, want := range []notify.Provider{notify.ProviderAlimTalk, notify.ProviderWebPush} {
			if !containsProvider(want) {
				t.Fatalf("notify.Providers lacks %s", want)
			}
		}
		for _, prov := range notify.Providers {
			if !strings.Contains(body, providerGraphTitle(prov)) {
				t.Errorf("dashboard has no graph %q", providerGraphTitle(prov))
			}
			for _, metric := range []string{metricSent, metricFailed} {
				line := `\"Herald\",\"` + metric + `\",\"Env\",\"` + s.env.Name + `\",\"Provider\",\"` + string(prov) + `\"`
				if !strings.Contains(body, line) && !strings.Contains(body, strings.ReplaceAll(line, `\"`, `"`)) {
					t.Errorf("dashboard has no %s line for %s", metric, prov)
				}
			}
			p := s.props(s.idByProp(t, "AWS::CloudWatch::Alarm", "AlarmName", "herald-"+s.env.Name+"-provider-failures-"+string(prov)))
			if num(p["Threshold"]) != 20 {
				t.Errorf("%s alarm threshold %v, want 20", prov, p["Threshold"])
			}
			ms := mustJSON(p["Metrics"])
			for _, want := range []string{"100 * failed / (sent + failed)", `"Value":"` + string(prov) + `"`, `"MetricName":"Failed"`, `"MetricName":"Sent"`} {
				if !strings.Contains(ms, want) {
					t.Errorf("%s alarm metrics lack %s: %s", prov, want, ms)
				}
			}
		}
		for _, line := range []string{"FellBack", "VerdictsPending", "VerdictUnknown"} {
			if !strings.Contains(body, line) {
				t.Errorf("dashboard has no AlimTalk %s line", line)
			}
		}
	})
}

func containsProvider(p notify.Provider) bool {
	for _, q := range notify.Providers {
		if q == p {
			return true
		}
	}
	return false
}
