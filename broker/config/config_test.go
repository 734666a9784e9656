package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

func TestParseConfigGood(t *testing.T) {
	data, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfig("full.good.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{DB: "postgres://gpubroker@db.internal:5432/gpubroker", ShutdownGrace: 45 * time.Second,
		DBPasswordFile: "/run/secrets/gpubroker-db", LeaseTTL: 20 * time.Second, CatalogReload: 10 * time.Second,
		Retention: RetentionConfig{PriceHistory: 180 * 24 * time.Hour, Events: 0, Agents: 14 * 24 * time.Hour, LaunchIntents: 0},
		Refresh: RefreshConfig{Schedule: "30 */4 * * *", OnStart: false, Clouds: []pricing.Cloud{pricing.AWS, pricing.GCP},
			Regions: []string{"us-*", "europe-west4"}, Concurrency: 8, FetchTimeout: 5 * time.Minute}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConfig =\n%+v\nwant\n%+v", got, want)
	}
	for _, empty := range []string{"", "# nothing\n", "---\n", "~\n"} {
		got, err := ParseConfig("empty.yaml", []byte(empty))
		if err != nil || !reflect.DeepEqual(got, DefaultConfig()) {
			t.Errorf("ParseConfig(%q) = %+v, %v; want the defaults", empty, got, err)
		}
	}
	got, err = ParseConfig("every.yaml", []byte("refresh:\n  schedule: \"@every 1h30m\"\n"))
	if err != nil || got.Refresh.Schedule != "@every 1h30m" || !got.Refresh.OnStart {
		t.Errorf("@every schedule: %+v, %v", got.Refresh, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		yaml string
		want string
	}{
		{"dbb: x\n", `c.yaml:1:1: unknown key "dbb" in the top level; known keys: catalog_reload, db, db_password_file, endpoints, fleet, lease_ttl, refresh, reports, retention, shutdown_grace`},
		{"lease_ttl: 0s\n", `c.yaml:1:12: lease_ttl "0s": want a positive duration`},
		{"lease_ttl: 200ms\n", `c.yaml:1:12: lease_ttl 200ms: want a duration from 1s to 10m0s`},
		{"lease_ttl: -5s\n", `c.yaml:1:12: lease_ttl "-5s": want a positive duration`},
		{"catalog_reload: 2h\n", `c.yaml:1:17: catalog_reload 2h0m0s: want a duration from 1s to 1h0m0s`},
		{"retention:\n  events: 30m\n", `c.yaml:2:11: retention.events: "30m": want whole days such as 90d`},
		{"retention:\n  price_history: -1d\n", `c.yaml:2:18: retention.price_history: "-1d"`},
		{"retention:\n  agents: -3d\n", `c.yaml:2:11: retention.agents: "-3d"`},
		{"retention:\n  logs: 1d\n", `c.yaml:2:3: unknown key "logs" in retention; known keys: agents, events, launch_intents, price_history`},
		{"refresh:\n  schedul: x\n", `c.yaml:2:3: unknown key "schedul" in refresh; known keys: clouds, concurrency, fetch_timeout, on_start, regions, schedule`},
		{"refresh:\n  schedule: \"0 */6 * *\"\n", `c.yaml:2:13: refresh.schedule: "0 */6 * *" is not a cron schedule (expected exactly 5 fields, found 4: [0 */6 * *]); want 5 fields such as "0 */6 * * *"`},
		{"refresh:\n  schedule: \"0 25 * * *\"\n", `c.yaml:2:13: refresh.schedule: "0 25 * * *" is not a cron schedule`},
		{"refresh:\n  concurrency: many\n", `c.yaml:2:16: refresh.concurrency "many": want a whole number from 1 to 1024`},
		{"refresh:\n  concurrency: 0\n", `c.yaml:2:16: refresh.concurrency "0": want a whole number from 1 to 1024`},
		{"refresh:\n  fetch_timeout: 10\n", `c.yaml:2:18: refresh.fetch_timeout "10": want a positive duration such as 30s or 10m`},
		{"refresh:\n  on_start: yes\n", `c.yaml:2:13: refresh.on_start "yes": want true or false`},
		{"refresh:\n  clouds: [aws, ibm]\n", `c.yaml:2:17: refresh.clouds: unknown cloud "ibm"; want one of aws, gcp, azure`},
		{"refresh:\n  clouds: aws\n", `c.yaml:2:11: refresh.clouds must be a list`},
		{"refresh:\n  regions: [[us]]\n", `c.yaml:2:13: refresh.regions: each entry must be a non-empty string`},
		{"refresh: every day\n", `c.yaml:1:10: refresh must be a mapping of keys to values`},
		{"- db\n", `c.yaml:1:1: the top level must be a mapping of keys to values`},
		{"db: a\ndb: b\n", `c.yaml:2:1: key "db" appears twice in the top level`},
		{"db: [a]\n", `c.yaml:1:5: db must be a string`},
		{"db: a\n  b: c\n", `c.yaml:2:1: mapping values are not allowed in this context`},
		{"refresh: {schedule: \"0 * * * *\"\n", `c.yaml:1:1: did not find expected ',' or '}'`},
		{"x: &a 1\ndb: *a\n", `c.yaml:1:1: unknown key "x"`},
		{"refresh: &r {}\nshutdown_grace: *r\n", `c.yaml:2:17: shutdown_grace: aliases are not supported`},
	}
	for _, c := range cases {
		_, err := ParseConfig("c.yaml", []byte(c.yaml))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%q)\n got %v\nwant %q", c.yaml, err, c.want)
		}
	}
	if _, err := ParseConfig("big.yaml", make([]byte, maxConfigSize+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized file: %v", err)
	}
}

// FuzzParseConfig: any input gives a config or an ErrConfig error with a
// position, never a panic.
func FuzzParseConfig(f *testing.F) {
	seed, _ := os.ReadFile("testdata/full.good.yaml")
	f.Add(string(seed))
	f.Add("refresh:\n  schedule: \"@every 1h\"\n")
	f.Add("refresh: {schedule: \"0 */6 * * *\", clouds: [aws]}\n")
	f.Add("db: &a x\nrefresh: *a\n")
	f.Add("refresh:\n  schedule: \"TZ=Europe/Berlin 0 3 * * *\"\n")
	fleet, _ := os.ReadFile("testdata/fleet.good.yaml")
	f.Add(string(fleet))
	f.Add("fleet:\n  clouds:\n    aws:\n      image: a\n      subnet: s\n      user_data: |\n        {{.Tokn}\n")
	reports, _ := os.ReadFile("testdata/reports.good.yaml")
	f.Add(string(reports))
	f.Add("reports:\n  time_zone: \"Europe/Berlin 0\"\n  schedules: [{period: day, cron: \"0 9 * * *\"}]\n")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseConfig("f.yaml", []byte(s))
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), ErrConfig.Error()+": "), "f.yaml:") {
				t.Fatalf("error without ErrConfig or position: %v", err)
			}
			return
		}
		if err := ValidateSchedule(cfg.Refresh.Schedule); err != nil {
			t.Fatalf("accepted a schedule it cannot run: %v", err)
		}
		for _, sc := range cfg.Reports.Schedules {
			if err := ValidateSchedule(cfg.Reports.CronSpec(sc.Cron)); err != nil {
				t.Fatalf("accepted a report schedule it cannot run: %v", err)
			}
		}
		if cfg.Refresh.Concurrency < 1 {
			t.Fatalf("accepted concurrency %d", cfg.Refresh.Concurrency)
		}
	})
}

func TestParseConfigEndpoints(t *testing.T) {
	cfg, err := ParseConfig("e.yaml", []byte("endpoints:\n  gcp_compute: https://compute.proxy.internal\n  aws_spot_advisor: http://mirror.internal/advisor.json\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoints.GCPCompute != "https://compute.proxy.internal" || cfg.Endpoints.AWSSpotAdvisor != "http://mirror.internal/advisor.json" {
		t.Errorf("endpoints %+v", cfg.Endpoints)
	}
	for in, want := range map[string]string{
		"endpoints:\n  gcp_compute: compute.internal\n": "e.yaml:2:16: endpoints.gcp_compute: \"compute.internal\": want an absolute http(s) URL",
		"endpoints:\n  azure: https://x\n":              "e.yaml:2:3: unknown key \"azure\" in endpoints; known keys: aws_spot_advisor, azure_resource_manager",
	} {
		_, err := ParseConfig("e.yaml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}
