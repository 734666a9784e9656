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
		{name: "infeasible", args: []string{"plan", "-f", "testdata/infeasible.yaml"}, wantCode: 1,
			wantStderr: []string{"no feasible placement", "infeasible.yaml:3:5: too-big", "(deadline)"}},
		{name: "partly infeasible: the rest is planned", args: []string{"plan", "-f", "testdata/partly.yaml"}, wantCode: 1,
			wantStdout: []string{"fits", "Blocked (not placed):", "partly.yaml:8:5: too-big", "(deadline)", "proof: no option meets"},
			wantStderr: []string{"no feasible placement for 1 workload(s)", "too-big"}},
		{name: "exact solver", args: []string{"plan", "-f", "../../examples/fleet.yaml", "--solver", "auto"}, wantCode: 0,
			wantStdout: []string{"Total: expected"}},
		{name: "bad solver", args: []string{"plan", "-f", "../../examples/fleet.yaml", "--solver", "magic"}, wantCode: 2, wantStderr: []string{"want heuristic, exact or auto"}},
		{name: "partly infeasible json", args: []string{"plan", "-f", "testdata/partly.yaml", "-o", "json"}, wantCode: 1,
			wantStdout: []string{`"blocked": [`, `"workload": "too-big"`, `"constraint": "deadline"`, `"workload": "fits"`}},
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
