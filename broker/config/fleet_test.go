package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFleetGood(t *testing.T) {
	data, err := os.ReadFile("testdata/fleet.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig("fleet.good.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleet
	if !f.Enabled || f.Mode != "apply" || f.Name != "ml-platform" || f.Interval != 15*time.Second || f.MaxInstances != 40 ||
		f.LaunchesPerMinute != 10 || f.Commands["llm-finetune"] == "" || len(f.Clouds) != 3 ||
		f.Training.Tick != time.Minute || f.Training.MoveMargin != 0.2 || f.Training.PriceHalfLife != 6*time.Hour || f.Training.Boot != 4*time.Minute {
		t.Fatalf("%+v", f)
	}
	if !f.Hedge || f.HedgeTick != 30*time.Second || f.ReadyDelay != 8*time.Minute || f.HedgeMaxZones != 4 || !f.ReplaceSlowHosts {
		t.Fatalf("hedging keys: %+v", f)
	}
	aws := f.Clouds["aws"]
	if aws.Image != "ami-0abcdef1234567890" || aws.UserData == nil || aws.MaxInstances != 20 || len(aws.SecurityGroups) != 1 {
		t.Fatalf("aws %+v", aws)
	}
	var b strings.Builder
	if err := aws.UserData.Execute(&b, map[string]string{"Token": "T", "BrokerURL": "U", "Command": "C"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "echo 'T'") || !strings.Contains(b.String(), "exec C") {
		t.Fatalf("rendered:\n%s", b.String())
	}
	// No fleet section: disabled. A bare one: dry-run.
	if cfg, _ := ParseConfig("c.yaml", []byte("db: x\n")); cfg.Fleet.Enabled {
		t.Fatal("fleet enabled without a section")
	}
	if cfg, err := ParseConfig("c.yaml", []byte("fleet: {}\n")); err != nil || cfg.Fleet.Mode != "dry-run" || !cfg.Fleet.Hedge {
		t.Fatalf("default mode %q hedge %v %v", cfg.Fleet.Mode, cfg.Fleet.Hedge, err)
	}
	if cfg, err := ParseConfig("c.yaml", []byte("fleet: {hedge: false}\n")); err != nil || cfg.Fleet.Hedge {
		t.Fatalf("hedge: false kept hedging on (%v)", err)
	}
}

func TestParseFleetErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho ok\necho {{.Tokn}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ yaml, want string }{
		{"fleet:\n  mode: yolo\n", `c.yaml:2:9: fleet.mode "yolo": want dry-run (record what would be done) or apply`},
		{"fleet:\n  training:\n    move_margin: lots\n", `c.yaml:3:18: fleet.training.move_margin "lots": want a fraction above 0 and at most 10`},
		{"fleet:\n  training:\n    move_margin: -0.1\n", `c.yaml:3:18: fleet.training.move_margin "-0.1": want a fraction above 0`},
		{"fleet:\n  training:\n    tick: 2h\n", `c.yaml:3:11: fleet.training.tick`},
		{"fleet:\n  training:\n    tik: 1m\n", `c.yaml:3:5: unknown key "tik" in fleet.training; known keys: boot, move_margin, price_half_life, tick`},
		{"fleet:\n  training:\n    boot: 3h\n", `c.yaml:3:11: fleet.training.boot`},
		{"fleet:\n  mod: apply\n", `c.yaml:2:3: unknown key "mod" in fleet; known keys: boot_timeout, broker_url, clouds`},
		{"fleet:\n  name: My_Fleet\n", `c.yaml:2:9: fleet.name "My_Fleet": want 1-63 lower-case letters`},
		{"fleet:\n  max_instances: -1\n", `c.yaml:2:18: fleet.max_instances "-1": want a whole number from 1 to 1000000`},
		{"fleet:\n  broker_url: broker:8080\n", `c.yaml:2:15: fleet.broker_url "broker:8080": want an http:// or https:// URL`},
		{"fleet:\n  clouds:\n    ibm: {}\n", `c.yaml:3:5: fleet.clouds: unknown cloud "ibm"; want aws, gcp or azure`},
		{"fleet:\n  clouds:\n    aws:\n      image: ami-1\n", `c.yaml:4:7: fleet.clouds.aws: subnet is required`},
		{"fleet:\n  clouds:\n    gcp:\n      project: p\n      image: \"\"\n", `c.yaml:5:14: fleet.clouds.gcp.image is empty`},
		{"fleet:\n  clouds:\n    aws:\n      image: a\n      subnet: s\n      user_data: |\n        #!/bin/sh\n        echo {{.Token}\n",
			`c.yaml:8:9: fleet.clouds.aws.user_data: template error:`},
		{"fleet:\n  clouds:\n    aws:\n      image: a\n      subnet: s\n      user_data: |\n        #!/bin/sh\n        echo {{.Tokn}}\n",
			`c.yaml:8:14: fleet.clouds.aws.user_data: unknown field .Tokn; a user data template may use BrokerURL, Token`},
		{"fleet:\n  clouds:\n    aws:\n      image: a\n      subnet: s\n      user_data_file: " + bad + "\n",
			bad + `:3:6: user data: unknown field .Tokn`},
		{"fleet:\n  clouds:\n    aws:\n      image: a\n      subnet: s\n      user_data_file: /nonexistent/x.sh\n",
			`c.yaml:6:23: fleet.clouds.aws.user_data_file: open /nonexistent/x.sh: no such file or directory`},
		{"fleet:\n  hedge_tick: 0.5s\n", `c.yaml:2:15: fleet.hedge_tick 500ms: want a duration from 1s to 1h0m0s`},
		{"fleet:\n  hedge_tick: soon\n", `c.yaml:2:15: fleet.hedge_tick "soon": want a positive duration such as 30s or 10m`},
		{"fleet:\n  ready_delay: 48h\n", `c.yaml:2:16: fleet.ready_delay 48h0m0s: want a duration from 1s to 24h0m0s`},
		{"fleet:\n  replace_slow_hosts: maybe\n", `c.yaml:2:23: fleet.replace_slow_hosts`},
		{"fleet:\n  hedge_max_zones: 100\n", `c.yaml:2:20: fleet.hedge_max_zones 100: want 1 to 64 spot pools per service`},
		{"fleet:\n  hedge: maybe\n", `c.yaml:2:10: fleet.hedge`},
		{"fleet:\n  commands: [a]\n", `c.yaml:2:13: fleet.commands must map workload names to commands`},
		{"fleet:\n  clouds:\n    fake:\n      pretend: ibm\n", `c.yaml:4:7: fleet.clouds.fake.pretend "ibm": want aws, gcp or azure`},
	}
	for _, c := range cases {
		_, err := ParseConfig("c.yaml", []byte(c.yaml))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%q)\n got %v\nwant %q", c.yaml, err, c.want)
		}
	}
}
