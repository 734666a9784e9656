//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

func TestPlanCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{name: "table", args: []string{"plan", "-f", "../../examples/fleet.yaml"}, wantCode: 0,
			wantStdout: []string{"WORKLOAD", "llm-finetune", "chat-serving", "doc-embeddings", "runner-up:", "Total: expected", "Lower bound"}},
		{name: "json", args: []string{"plan", "-f", "../../examples/fleet.yaml", "--output", "json"}, wantCode: 0,
			wantStdout: []string{`"placements"`, `"runner_up"`, `"on_demand_baseline"`}},
		{name: "missing -f", args: []string{"plan"}, wantCode: 2, wantStderr: []string{"-f FILE is required"}},
		{name: "bad output", args: []string{"plan", "-f", "../../examples/fleet.yaml", "-o", "yaml"}, wantCode: 2, wantStderr: []string{"want table or json"}},
		{name: "bad policy", args: []string{"plan", "-f", "../../policy/testdata/keys.bad.yaml"}, wantCode: 2, wantStderr: []string{"keys.bad.yaml:"}},
		{name: "missing file", args: []string{"plan", "-f", "testdata/nope.yaml"}, wantCode: 2, wantStderr: []string{"nope.yaml"}},
		{name: "no offers where allowed", args: []string{"plan", "-f", "testdata/azure-europe.yaml"}, wantCode: 1,
			wantStderr: []string{"note: the catalog has no Azure offers in Europe", "prices of unknown date"}},
		{name: "unknown date warned", args: []string{"plan", "-f", "../../examples/fleet.yaml"}, wantCode: 0,
			wantStdout: []string{"of unknown date (embedded snapshot", "catalog refresh"}},
		{name: "infeasible", args: []string{"plan", "-f", "testdata/infeasible.yaml"}, wantCode: 1,
			wantStderr: []string{"no feasible placement", "infeasible.yaml:3:5: too-big", "(deadline)"}},
		{name: "partly infeasible: the rest is planned", args: []string{"plan", "-f", "testdata/partly.yaml"}, wantCode: 1,
			wantStdout: []string{"fits", "Blocked (not placed):", "partly.yaml:8:5: too-big", "(deadline)", "proof: no option meets"},
			wantStderr: []string{"no feasible placement for 1 workload:", "too-big"}},
		{name: "exact solver", args: []string{"plan", "-f", "../../examples/fleet.yaml", "--solver", "auto"}, wantCode: 0,
			wantStdout: []string{"Total: expected"}},
		{name: "bad solver", args: []string{"plan", "-f", "../../examples/fleet.yaml", "--solver", "magic"}, wantCode: 2, wantStderr: []string{"want heuristic, exact or auto"}},
		{name: "partly infeasible json", args: []string{"plan", "-f", "testdata/partly.yaml", "-o", "json"}, wantCode: 1,
			wantStdout: []string{`"blocked": [`, `"workload": "too-big"`, `"constraint": "deadline"`, `"workload": "fits"`}},
		// Blocked by the fleet's quota, not by its own needs: the two that
		// fit are planned, the third is in blocked with the search's proof.
		{name: "quota leaves one out json", args: []string{"plan", "-f", "testdata/quota-partly.yaml", "-o", "json"}, wantCode: 1,
			wantStdout: []string{`"workload": "nightly-eval"`, `"workload": "embed"`, `"blocked": [`, `"workload": "finetune"`, `"constraint": "quota"`, `"proof": "exhaustive search`},
			wantStderr: []string{"no feasible placement for 1 workload:", "quota-partly.yaml:10:5: finetune"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestPlanJSONParses(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"plan", "-f", "../../examples/fleet.yaml", "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var v struct {
		Placements []struct {
			Workload string `json:"workload"`
		} `json:"placements"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Placements) != 3 {
		t.Errorf("%d placements, want 3", len(v.Placements))
	}
}

func TestPlanReadsStdin(t *testing.T) {
	root := newRootCmd()
	var stdout, stderr bytes.Buffer
	root.SetArgs([]string{"plan", "-f", "-", "-o", "json"})
	root.SetIn(strings.NewReader("workloads:\n  - name: w\n    kind: training\n    work: {gpu_hours: 10}\n"))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"policy": "<stdin>"`) {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	root = newRootCmd()
	stderr.Reset()
	root.SetArgs([]string{"policy", "check", "-f", "-"})
	root.SetIn(strings.NewReader("workloads:\n  - name: w\n    kind: trainig\n"))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(stderr.String(), "<stdin>:3:11") {
		t.Errorf("err %v, stderr %q", err, stderr.String())
	}
}

// TestPlanCoverageGolden pins the notes and the plan for a policy allowing
// a cloud and a place the catalog does not cover.
func TestPlanCoverageGolden(t *testing.T) {
	code, _, errOut := runCLI(t, "plan", "-f", "testdata/azure-europe.yaml")
	if code != exitFailure {
		t.Fatalf("exit %d", code)
	}
	golden(t, "plan-azure-europe.stderr.txt", []byte(errOut))
}

// TestPlanWithStore: plan --db reads the catalog prices and serve use, so
// a cheap price saved in the store changes the placement.
func TestPlanWithStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "g.db")
	st, err := store.Open(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	cheap := pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
		GPU: pricing.H100, GPUCount: 8, GPUMemoryGiB: 80, VCPUs: 192, MemoryGiB: 2048, OnDemandPrice: 3.21, ObservedAt: now, Source: "test"}
	if _, err := st.SaveOffers(t.Context(), pricing.AWS, "us-east-1", []pricing.Offer{cheap}, now); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	policy := filepath.Join(t.TempDir(), "p.yaml")
	_ = os.WriteFile(policy, []byte("clouds: [aws]\nworkloads:\n  - name: train\n    kind: training\n    gpu: {models: [H100], count: 8}\n    work: {gpu_hours: 80}\n    spot: never\n"), 0o600)
	code, out, errOut := runCLI(t, "plan", "-f", policy, "--db", db, "-o", "json")
	if code != 0 {
		t.Fatalf("plan --db: exit %d\n%s%s", code, out, errOut)
	}
	var p struct {
		Placements []struct {
			Region       string  `json:"region"`
			PricePerHour float64 `json:"price_per_hour"`
		} `json:"placements"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Placements) != 1 {
		t.Fatalf("plan output %s: %v", out, err)
	}
	if p.Placements[0].Region != "us-east-1" || p.Placements[0].PricePerHour != 3.21 {
		t.Fatalf("placement %+v; want the stored us-east-1 offer at 3.21/h", p.Placements[0])
	}
	// Without --db (and no default database) the snapshot decides.
	code, out, _ = runCLI(t, "plan", "-f", policy, "-o", "json")
	if code != 0 || strings.Contains(out, `"price_per_hour": 3.21`) {
		t.Fatalf("plan without a store: exit %d, output uses the stored price:\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "plan", "-f", policy, "--db", "mysql://x"); code == 0 || !strings.Contains(errOut, "unsupported scheme") {
		t.Fatalf("plan --db mysql://: exit %d %s", code, errOut)
	}
}
