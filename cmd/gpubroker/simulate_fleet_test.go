//go:build !agentonly

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	fleetPolicy = filepath.Join("testdata", "fleetsim", "policy.yaml")
	fleetTraces = filepath.Join("testdata", "fleetsim", "traces")
)

func TestSimulateFleetGolden(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "spend.svg")
	code, out, stderr := runCLI(t, "simulate", "fleet", "-f", fleetPolicy, "--traces", fleetTraces, "--days", "3", "--seed", "2", "--chart", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "fleetsim/report.txt", []byte(out))
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("polyline")) {
		t.Fatalf("chart not written: %v", err)
	}
}

func TestSimulateFleetJSON(t *testing.T) {
	code, out, stderr := runCLI(t, "simulate", "fleet", "-f", fleetPolicy, "--traces", fleetTraces, "--days", "3", "--seed", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Workloads []struct {
			Name     string  `json:"name"`
			Cost     float64 `json:"cost_usd"`
			OnDemand float64 `json:"on_demand_usd"`
			Finished bool    `json:"finished"`
			Launches int     `json:"launches"`
		} `json:"workloads"`
		Total struct {
			Cost     float64 `json:"cost_usd"`
			Misses   int     `json:"deadline_misses"`
			APICalls int     `json:"api_calls"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Workloads) != 3 || rep.Total.Cost <= 0 || rep.Total.APICalls == 0 {
		t.Fatalf("report %+v", rep)
	}
	sum := 0.0
	for _, w := range rep.Workloads {
		if w.Launches == 0 || w.Cost <= 0 || w.OnDemand <= 0 {
			t.Errorf("workload %+v ran nothing", w)
		}
		sum += w.Cost
	}
	if d := sum - rep.Total.Cost; d > 0.05 || d < -0.05 {
		t.Errorf("workloads add up to %.2f, total says %.2f", sum, rep.Total.Cost)
	}
}

func TestSimulateFleetErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no policy", []string{"--traces", fleetTraces}, "-f/--file"},
		{"no traces", []string{"-f", fleetPolicy}, "--traces"},
		{"empty trace dir", []string{"-f", fleetPolicy, "--traces", empty}, "no .json or .csv trace files"},
		{"missing trace dir", []string{"-f", fleetPolicy, "--traces", filepath.Join(empty, "nope")}, "reading trace directory"},
		{"bad days", []string{"-f", fleetPolicy, "--traces", fleetTraces, "--days", "0"}, "--days 0"},
		{"bad output", []string{"-f", fleetPolicy, "--traces", fleetTraces, "-o", "yaml"}, `--output "yaml"`},
		{"bad ready delay", []string{"-f", fleetPolicy, "--traces", fleetTraces, "--ready-delay", "20m"}, "--ready-delay 20m0s"},
		{"missing policy", []string{"-f", filepath.Join(empty, "p.yaml"), "--traces", fleetTraces}, "p.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"simulate", "fleet"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestSimulateFleetInfeasiblePolicy(t *testing.T) {
	code, _, stderr := runCLI(t, "simulate", "fleet", "-f", filepath.Join("testdata", "fleetsim", "infeasible.yaml"), "--traces", fleetTraces, "--days", "1")
	if code != 1 || !strings.Contains(stderr, "cannot be planned") || !strings.Contains(stderr, "infeasible.yaml:4:5") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming the workload's line", code, stderr)
	}
}
