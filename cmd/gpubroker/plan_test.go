//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
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
