package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/agent/config"
)

func TestFullConfig(t *testing.T) {
	c, err := config.Load(filepath.Join("testdata", "full.good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cloud != "aws" || c.PollInterval != 500*time.Millisecond || c.SafetyMargin != 5*time.Second ||
		len(c.Drain) != 3 || c.Drain[0].Kind != "signal" || c.Drain[0].PIDFile != "/run/trainer.pid" || !c.Drain[0].KillOnTimeout ||
		c.Drain[1].Command != "/opt/train/checkpoint.sh --now" || c.Drain[2].URL != "http://127.0.0.1:8080/drain" ||
		len(c.EarlyDrain.On) != 2 || len(c.EarlyDrain.Steps) != 1 || c.Benchmark.OnStart == nil || *c.Benchmark.OnStart ||
		c.Benchmark.DType != "fp16" || c.Benchmark.Threshold != 0.6 || c.Benchmark.CUDALibDirs[0] != "/usr/local/cuda/lib64" ||
		c.Progress.File != "/run/trainer/progress.json" || c.Progress.Interval != 15*time.Second {
		t.Fatalf("%+v", c)
	}
}

func TestEmptyConfigIsDefaults(t *testing.T) {
	c, err := config.Parse("empty.yaml", nil)
	if err != nil || c.Cloud != "" || c.Drain != nil {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestBadConfigs(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown key", "cloud: aws\npoll_intervall: 1s\n", "bad.yaml:2:1: unknown key \"poll_intervall\"; known keys: benchmark, broker,"},
		{"progress interval range", "progress:\n  interval: 5h\n", "bad.yaml:2:13: 5h is out of range"},
		{"progress unknown key", "progress:\n  path: /x\n", "bad.yaml:2:3: unknown key \"path\"; known keys: file, interval"},
		{"bad cloud", "cloud: oracle\n", "bad.yaml:1:8: \"oracle\" is not allowed; want one of auto, aws, gcp, azure"},
		{"bad duration", "poll_interval: fast\n", "bad.yaml:1:16: \"fast\" is not a duration; want e.g. 500ms, 30s or 2m"},
		{"duration range", "poll_interval: 5m\n", "bad.yaml:1:16: 5m is out of range; want 10ms to 1m0s"},
		{"bad url", "broker: broker.example\n", "bad.yaml:1:9: \"broker.example\" is not an http(s) URL"},
		{"step two kinds", "drain:\n  - exec: x\n    http: http://a/\n", "bad.yaml:2:5: a drain step needs exactly one of signal, exec or http"},
		{"signal without pid", "drain:\n  - signal: TERM\n", "bad.yaml:2:5: a signal step needs pid_file"},
		{"bad signal", "drain:\n  - signal: SIGNOPE\n    pid_file: /x\n", "bad.yaml:2:13: unknown signal \"SIGNOPE\""},
		{"drain not list", "drain:\n  exec: x\n", "bad.yaml:2:3: got a mapping, want a list"},
		{"early kind", "early_drain:\n  on: [preempt]\n", "bad.yaml:2:8: \"preempt\" is not allowed; want one of rebalance, maintenance"},
		{"repeated", "cloud: aws\ncloud: gcp\n", "bad.yaml:2:1: key \"cloud\" repeated"},
		{"command missing", "benchmark:\n  method: command\n", "benchmark.method is command but benchmark.command is empty"},
		{"threshold", "benchmark:\n  threshold: 2\n", "bad.yaml:2:14: \"2\" is not a number from 0 to 1"},
		{"syntax", "cloud: [aws\n", "bad.yaml: "},
		{"top-level list", "- a\n", "bad.yaml:1:1: got a list, want a mapping"},
		{"pid on exec", "drain:\n  - exec: x\n    pid_file: /p\n", "pid_file belongs to signal steps only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.in))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := config.Parse("bad.yaml", []byte("cloud: x\npoll_interval: y\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:1:8") || !strings.Contains(err.Error(), "bad.yaml:2:16") {
		t.Fatalf("want both errors, got %v", err)
	}
}

func TestFlagParsers(t *testing.T) {
	s, err := config.ParseSignalFlag("SIGUSR1:/run/a.pid")
	if err != nil || s.Signal != "SIGUSR1" || s.PIDFile != "/run/a.pid" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"SIGTERM", "SIGTERM:", "FOO:/x"} {
		if _, err := config.ParseSignalFlag(bad); err == nil {
			t.Errorf("ParseSignalFlag(%q): want an error", bad)
		}
	}
	if _, err := config.ParseHTTPFlag("localhost:8080"); err == nil {
		t.Error("ParseHTTPFlag without scheme: want an error")
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "full.good.yaml"))
	f.Add(b)
	f.Add([]byte("drain:\n  - signal: TERM\n    pid_file: /x\n"))
	f.Add([]byte("early_drain: {on: [rebalance], steps: [{http: 'http://a'}]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse("fuzz.yaml", b)
		if err != nil {
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		for _, s := range c.Drain {
			if s.Kind == "" {
				t.Fatalf("accepted a step without a kind: %q", b)
			}
		}
	})
}

// TestExampleCloudInit keeps the agent.yaml embedded in the cloud-init
// example valid.
func TestExampleCloudInit(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "agent", "cloud-init.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		WriteFiles []struct {
			Path    string `yaml:"path"`
			Content string `yaml:"content"`
		} `yaml:"write_files"`
	}
	if err := yaml.Unmarshal(b, &ci); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range ci.WriteFiles {
		if f.Path == "/etc/gpubroker/agent.yaml" {
			found = true
			c, err := config.Parse(path+":agent.yaml", []byte(f.Content))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Drain) != 3 || c.Broker == "" {
				t.Fatalf("%+v", c)
			}
		}
	}
	if !found {
		t.Fatal("no agent.yaml in the cloud-init example")
	}
}
