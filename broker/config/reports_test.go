package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseReportsConfig(t *testing.T) {
	data, err := os.ReadFile("testdata/reports.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("reports.good.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	want := ReportsConfig{TimeZone: "Europe/Berlin", DashboardURL: "https://gpubroker.example.com",
		Slack: SlackConfig{BotTokenEnv: "GPUBROKER_SLACK_TOKEN", WebhookURLFile: "/etc/gpubroker/slack-webhook"},
		Schedules: []ReportSchedule{{Period: "day", Cron: "0 9 * * *", Channel: "#gpu-costs"},
			{Period: "week", Cron: "0 9 * * 1", Channel: "#gpu-costs", Team: "research"}},
		Alerts: AlertsConfig{Enabled: true, Schedule: "@every 2m", Channel: "#gpu-alerts", Kinds: map[string]string{"budget": "#finance"},
			Teams: map[string]string{"research": "#research-alerts"}, StormCount: 4, StormWindow: 30 * time.Minute,
			SilentAgent: 10 * time.Minute, FailingReplacements: 2, PriceMove: 0.25, BudgetLevels: []float64{0.5, 0.9, 1.0}}}
	if !reflect.DeepEqual(cfg.Reports, want) {
		t.Errorf("reports =\n%+v\nwant\n%+v", cfg.Reports, want)
	}
	if got := cfg.Reports.CronSpec("0 9 * * *"); got != "CRON_TZ=Europe/Berlin 0 9 * * *" {
		t.Errorf("CronSpec = %q", got)
	}
	if err := ValidateSchedule(cfg.Reports.CronSpec("0 9 * * *")); err != nil {
		t.Errorf("zoned schedule does not parse: %v", err)
	}
	if !cfg.Reports.Enabled() || DefaultConfig().Reports.Enabled() {
		t.Error("Enabled wrong")
	}
}

func TestParseReportsConfigErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"reports:\n  slack:\n    webhook_url: https://hooks.slack.com/services/T/B/X\n",
			"c.yaml:3:18: reports.slack.webhook_url: secrets are never written in the configuration; use webhook_url_env"},
		{"reports:\n  slack:\n    bot_token: xoxb-1\n", "c.yaml:3:16: reports.slack.bot_token: secrets are never written"},
		{"reports:\n  time_zone: Mars/Olympus\n", `c.yaml:2:14: reports.time_zone "Mars/Olympus" is not a time zone`},
		{"reports:\n  schedules:\n    - {period: fortnight, cron: \"0 9 * * *\"}\n", `c.yaml:3:16: reports.schedules[0].period "fortnight": want day, week or month`},
		{"reports:\n  schedules:\n    - {period: day}\n", "c.yaml:3:7: reports.schedules[0] needs period and cron"},
		{"reports:\n  schedules:\n    - {period: day, cron: \"61 9 * * *\"}\n", `c.yaml:3:27: reports.schedules[0].cron: "61 9 * * *" is not a cron schedule`},
		{"reports:\n  alerts:\n    kinds: {budgett: \"#x\"}\n", `c.yaml:3:13: reports.alerts.kinds: unknown alert kind "budgett"`},
		{"reports:\n  alerts:\n    channel: \"gpu alerts\"\n", `c.yaml:3:14: reports.alerts.channel "gpu alerts": want a channel name or ID`},
		{"reports:\n  alerts:\n    price_move: -1\n", `c.yaml:3:17: reports.alerts.price_move "-1": want a fraction`},
		{"reports:\n  slack:\n    bot_token_env: \"A B\"\n", `c.yaml:3:20: reports.slack.bot_token_env "A B": want an environment variable name`},
		{"reports:\n  slack:\n    bot_token_env: A\n    bot_token_file: /x\n", "c.yaml:3:5: reports.slack: give each secret either as _env or as _file, not both"},
		{"reports:\n  dashboard_url: javascript:alert(1)\n", `c.yaml:2:18: reports.dashboard_url "javascript:alert(1)": want an http(s) URL`},
	}
	for _, c := range cases {
		_, err := ParseConfig("c.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant …%s…", c.yaml, err, c.want)
		}
	}
}

func TestSlackSecretsNeverInErrors(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook")
	if err := os.WriteFile(hook, []byte("not a url with SECRETPART\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := SlackConfig{WebhookURLFile: hook}.Secrets()
	if err == nil || strings.Contains(err.Error(), "SECRETPART") {
		t.Errorf("bad webhook file: %v", err)
	}
	t.Setenv("GB_TEST_TOKEN", "  xoxb-1-2-3\n")
	t.Setenv("GB_TEST_HOOK", "https://hooks.slack.com/services/T/B/C")
	w, b, err := SlackConfig{WebhookURLEnv: "GB_TEST_HOOK", BotTokenEnv: "GB_TEST_TOKEN"}.Secrets()
	if err != nil || w != "https://hooks.slack.com/services/T/B/C" || b != "xoxb-1-2-3" {
		t.Errorf("secrets = %q %q %v", w, b, err)
	}
	_, _, err = SlackConfig{BotTokenEnv: "GB_TEST_UNSET_VAR"}.Secrets()
	if err == nil || !strings.Contains(err.Error(), "GB_TEST_UNSET_VAR is empty or unset") {
		t.Errorf("unset env: %v", err)
	}
	_, _, err = SlackConfig{BotTokenFile: filepath.Join(dir, "missing")}.Secrets()
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}
