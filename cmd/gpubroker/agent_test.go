//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAgentFlagsEnvAndConfig(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "agent.yaml")
	_ = os.WriteFile(cfgFile, []byte("cloud: gcp\nbroker: http://from-file:1\npoll_interval: 2s\ndrain:\n  - exec: from-file\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"file only", []string{"--config", cfgFile}, nil},
		{"env overrides file, flag overrides env", []string{"--config", cfgFile, "--cloud", "aws"},
			map[string]string{"GPUBROKER_AGENT_CLOUD": "azure", "GPUBROKER_AGENT_BROKER": "http://from-env:2",
				"GPUBROKER_AGENT_DRAIN_EXEC": "one\ntwo", "GPUBROKER_AGENT_DRAIN_SIGNAL": "TERM:/run/x.pid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newAgentCmd()
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			if err := applyAgentEnv(cmd.Flags(), lookup); err != nil {
				t.Fatal(err)
			}
			get := func(n string) string { v, _ := cmd.Flags().GetString(n); return v }
			cfgPath := get("config")
			if cfgPath != cfgFile {
				t.Fatalf("config %q", cfgPath)
			}
			if tc.env == nil {
				return
			}
			if get("cloud") != "aws" || get("broker") != "http://from-env:2" {
				t.Fatalf("cloud %q broker %q", get("cloud"), get("broker"))
			}
			execs, _ := cmd.Flags().GetStringArray("drain-exec")
			if strings.Join(execs, "|") != "one|two" {
				t.Fatalf("drain-exec %v", execs)
			}
		})
	}
}

func TestAgentConfigMerge(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "agent.yaml")
	_ = os.WriteFile(cfgFile, []byte("cloud: gcp\nbroker: http://from-file:1\npoll_interval: 2s\ndrain:\n  - exec: from-file\n"), 0o644)
	cmd := newAgentCmd()
	_ = cmd.Flags().Parse([]string{"--config", cfgFile, "--broker", "http://flag:3", "--drain-http", "http://127.0.0.1:9/d",
		"--drain-signal", "SIGINT:/run/w.pid", "--drain-step-timeout", "7s"})
	o := agentOptions{}
	o.configFile, _ = cmd.Flags().GetString("config")
	o.broker, _ = cmd.Flags().GetString("broker")
	o.drainHTTP, _ = cmd.Flags().GetStringArray("drain-http")
	o.drainSignal, _ = cmd.Flags().GetStringArray("drain-signal")
	o.stepTimeout, _ = cmd.Flags().GetDuration("drain-step-timeout")
	c, err := o.config(cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if c.Cloud != "gcp" || c.Broker != "http://flag:3" || c.PollInterval != 2*time.Second || len(c.Drain) != 2 ||
		c.Drain[0].Kind != "signal" || c.Drain[1].Kind != "http" || c.Drain[1].Timeout != 7*time.Second {
		t.Fatalf("%+v", c)
	}
}

func TestAgentUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("drain:\n  - signal: TERM\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--config", bad}, "bad.yaml:2:5: a signal step needs pid_file"},
		{[]string{"agent", "--cloud", "oracle"}, `--cloud "oracle"`},
		{[]string{"agent", "--drain-signal", "TERM"}, "want SIGNAL:PIDFILE"},
		{[]string{"agent", "--drain-http", "localhost:1"}, "want an http(s) URL"},
		{[]string{"agent", "--broker", "http://127.0.0.1:1"}, "no token file"},
		{[]string{"agent", "--metadata-url", "169.254.169.254"}, `--metadata-url: "169.254.169.254" is not an http(s) URL`},
		{[]string{"agent", "--broker", "ftp://broker"}, `--broker: "ftp://broker" is not an http(s) URL`},
		{[]string{"agent", "--poll-interval", "1ms"}, "--poll-interval: 1ms is out of range; want 10ms to 1m0s"},
		{[]string{"agent", "--poll-interval", "-5s"}, "--poll-interval: -5s is out of range"},
		{[]string{"agent", "--poll-interval", "2h"}, "--poll-interval: 2h0m0s is out of range"},
		{[]string{"agent", "--safety-margin", "1h"}, "--safety-margin: 1h0m0s is out of range"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != exitUsageError || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

func TestAgentRunsAndStops(t *testing.T) {
	// Without a cloud to find, the agent keeps trying and stops cleanly.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"agent", "--metadata-url", "http://127.0.0.1:1", "--state-dir", t.TempDir()}, &out, &errb)
	if code != exitOK || !strings.Contains(errb.String(), "cloud detection failed") {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
}

func TestAgentBenchmarkCommand(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bench.sh")
	_ = os.WriteFile(script, []byte("#!/bin/sh\necho '{\"schema\":\"gpubroker.benchmark/v1\",\"gpus\":[{\"index\":0,\"name\":\"NVIDIA H200\",\"dtype\":\"bf16\",\"tflops\":750,\"bandwidth_gbs\":4200}]}'\n"), 0o755)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"agent", "benchmark", "--command", script}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{`"model": "H200"`, `"tflops_ratio": 0.758`, `"bandwidth_ratio": 0.875`, `"method": "command"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s:\n%s", want, out.String())
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "benchmark", "--method", "magic"}, exitUsageError, `--method "magic"`},
		{[]string{"agent", "benchmark", "--method", "command"}, exitUsageError, "needs --command"},
		{[]string{"agent", "benchmark", "--command", "exit 3"}, exitFailure, "benchmark command failed"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
