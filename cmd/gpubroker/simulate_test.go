//go:build !agentonly

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testTraces = filepath.Join("..", "..", "fleet", "sim", "testdata", "traces")

func TestSimulateTraining(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "run.svg")
	code, out, stderr := runCLI(t, "simulate", "training",
		"--trace", filepath.Join(testTraces, "zone-a.json")+","+filepath.Join(testTraces, "zone-b.csv"),
		"--work", "20h", "--deadline", "26h", "--starts", "20", "--optimum", "--plot", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"uniform-progress", "adaptive", "exact optimum", "pool zone-b", "MISSES"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("zone-b")) {
		t.Fatalf("plot not written: %v", err)
	}
}

func TestSimulateTrainingJSON(t *testing.T) {
	code, out, stderr := runCLI(t, "simulate", "training", "--trace", filepath.Join(testTraces, "zone-c.json"),
		"--work", "20h", "--deadline", "26h", "--starts", "10", "--policy", "greedy,adaptive", "--output", "json",
		"--on-demand-price", "4", "--spot-price", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		OnDemandPrice float64 `json:"on_demand_usd_per_hour"`
		Policies      []struct {
			Policy string  `json:"policy"`
			Mean   float64 `json:"mean_cost_vs_on_demand"`
			Misses int     `json:"deadline_misses"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.OnDemandPrice != 4 || len(rep.Policies) != 2 || rep.Policies[1].Policy != "adaptive" || rep.Policies[1].Misses != 0 || rep.Policies[1].Mean <= 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestSimulateInference(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "frontier.svg")
	traces := filepath.Join(testTraces, "zone-a.json") + "," + filepath.Join(testTraces, "zone-b.json") + "," + filepath.Join(testTraces, "zone-c.json")
	code, out, stderr := runCLI(t, "simulate", "inference", "--trace", traces, "--target", "2", "--ready-delay", "10m", "--frontier-plot", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"spot-hedge", "AT TARGET", "frontier"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("Pareto front")) {
		t.Fatalf("frontier chart not written: %v", err)
	}
	tl := filepath.Join(t.TempDir(), "timeline.svg")
	code, out, _ = runCLI(t, "simulate", "inference", "--trace", traces, "--target", "2", "--policy", "adaptive", "-o", "json",
		"--plot", tl, "--start-tick", "100", "--duration", "24h")
	if code != 0 || !strings.Contains(out, `"at_target"`) || !strings.Contains(out, `"hours": 24`) {
		t.Fatalf("json: exit %d\n%s", code, out)
	}
	if b, err := os.ReadFile(tl); err != nil || !bytes.Contains(b, []byte("ready delay 10 min")) {
		t.Fatalf("timeline not written: %v", err)
	}
}

func TestSimulateMixedTicks(t *testing.T) {
	// A pool measured every 150 s beside zone-a's 300-s ticks: zone-a is
	// resampled to 150 s and says so.
	csv := filepath.Join(t.TempDir(), "fine.csv")
	var b strings.Builder
	b.WriteString("seconds,available\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "%d,%d\n", i*150, 1-i/40%2)
	}
	if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "inference", "--trace", filepath.Join(testTraces, "zone-a.json") + "," + csv, "--target", "2"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "zone zone-a") || !strings.Contains(out, "ticks of 150 s (resampled from 300 s)") {
		t.Errorf("output does not say zone-a was resampled:\n%s", out)
	}
	code, out, stderr = runCLI(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Traces []struct {
			Name     string `json:"name"`
			Gap      int    `json:"gap_seconds"`
			Measured int    `json:"measured_gap_seconds"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Traces) != 2 || rep.Traces[0].Gap != 150 || rep.Traces[0].Measured != 300 || rep.Traces[1].Measured != 0 {
		t.Errorf("traces %+v; want both on 150 s, zone-a measured at 300 s", rep.Traces)
	}
}

func TestSimulateTraceDirectory(t *testing.T) {
	// A directory adds every trace file under it, named by its path there.
	dir := t.TempDir()
	for _, name := range []string{"zone-a.json", "zone-c.json"} {
		b, err := os.ReadFile(filepath.Join(testTraces, name))
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, "east")
		if name == "zone-c.json" {
			sub = filepath.Join(dir, "west")
		}
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := runCLI(t, "simulate", "inference", "--trace", dir, "--target", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Traces []struct {
			Name string `json:"name"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Traces) != 2 || rep.Traces[0].Name != "east/zone-a" || rep.Traces[1].Name != "west/zone-c" {
		t.Errorf("traces %+v; want east/zone-a and west/zone-c", rep.Traces)
	}
	empty := t.TempDir()
	if code, _, stderr := runCLI(t, "simulate", "inference", "--trace", empty); code != exitUsageError || !strings.Contains(stderr, "no .json or .csv trace files") {
		t.Errorf("empty directory: exit %d, %q", code, stderr)
	}
}

func TestSimulateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"metadata\": {\"gap_seconds\": 60},\n \"data\": [1, -2]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.csv")
	if err := os.WriteFile(other, []byte("0,1\n60,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(testTraces, "zone-a.json")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no trace", []string{"simulate", "training"}, "--trace"},
		{"bad trace", []string{"simulate", "training", "--trace", bad}, "bad.json:2:14"},
		{"missing file", []string{"simulate", "training", "--trace", filepath.Join(dir, "nope.json")}, "no such file"},
		{"unknown policy", []string{"simulate", "training", "--trace", good, "--policy", "cheap"}, `unknown training policy "cheap"`},
		{"infeasible", []string{"simulate", "training", "--trace", good, "--work", "30h", "--deadline", "30h"}, "does not fit in the deadline"},
		{"deadline longer than trace", []string{"simulate", "training", "--trace", good, "--work", "100h", "--deadline", "200h"}, "the traces have 1500"},
		{"bad output", []string{"simulate", "training", "--trace", good, "-o", "xml"}, "want table or json"},
		{"mixed ticks, too short", []string{"simulate", "training", "--trace", good + "," + other}, "ticks of 60 s; the traces have 2"},
		{"bad target", []string{"simulate", "inference", "--trace", good, "--target", "0"}, "target must be at least 1"},
		{"bad goal", []string{"simulate", "inference", "--trace", good, "--goal", "99"}, "goal 99: want a share of time in (0, 1), e.g. 0.99, or 0 for none"},
		{"unknown instance", []string{"simulate", "training", "--trace", good, "--instance-type", "z9.huge"}, "no on-demand and spot price"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsageError || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

func TestSimulatePricesFromCatalog(t *testing.T) {
	code, out, stderr := runCLI(t, "simulate", "training", "--trace", filepath.Join(testTraces, "zone-a.json"),
		"--work", "20h", "--deadline", "26h", "--starts", "5", "--policy", "on-demand", "--instance-type", "p3.2xlarge", "--region", "us-east-1", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		OD   float64 `json:"on_demand_usd_per_hour"`
		Spot float64 `json:"spot_usd_per_hour"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.OD <= 0 || rep.Spot <= 0 || rep.Spot >= rep.OD {
		t.Fatalf("catalog prices: on-demand %.4f spot %.4f", rep.OD, rep.Spot)
	}
}

func TestWithProgress(t *testing.T) {
	var b bytes.Buffer
	err := withProgress(&b, 5*time.Millisecond, "3 starts × 1 policy", func() error { time.Sleep(30 * time.Millisecond); return nil })
	if err != nil || !strings.Contains(b.String(), "simulate: still working on 3 starts × 1 policy (") || !strings.Contains(b.String(), "done in") {
		t.Errorf("progress %q, %v", b.String(), err)
	}
	b.Reset()
	_ = withProgress(&b, time.Hour, "quick", func() error { return nil })
	if b.Len() != 0 {
		t.Errorf("a short run printed %q", b.String())
	}
}
