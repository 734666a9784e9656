//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("workloads:\n  - name: a\n    kind: training\n    gpu: {models: [A100-80]}\n    work: {gpu_hours: -1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recurring := filepath.Join(dir, "recurring.yaml")
	if err := os.WriteFile(recurring, []byte(`workloads:
  - {name: nightly, kind: training, schedule: "0 2 * * *", gpu: {models: [H100], count: 8}, work: {gpu_hours: 64}}
  - name: search
    kind: inference
    replicas: {min: 1, max: 20}
    load: {replicas_by_hour: [1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6, 4, 2, 2, 1, 1, 1]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"fleet example", []string{"policy", "check", "-f", "../../examples/fleet.yaml"}, 0,
			[]string{"../../examples/fleet.yaml: OK. 3 workloads (1 training, 1 inference, 1 batch) on [aws, gcp, azure]; 3 quotas, 3 budgets"}, nil},
		{"eu example", []string{"policy", "check", "--file", "../../examples/eu-residency.yaml"}, 0,
			[]string{"data kept in eu"}, nil},
		{"scheduled job and load-profiled service", []string{"policy", "check", "-f", recurring}, 0,
			[]string{"2 workloads (1 training, 1 inference), 1 scheduled (nightly 30 runs/month), 1 load-profiled (search 101 replica-hours/day, peak 8) on "}, nil},
		{"minimal example", []string{"policy", "check", "-f", "../../examples/minimal.yaml"}, 0,
			[]string{"1 workload (1 training)"}, nil},
		{"errors, one per line", []string{"policy", "check", "-f", bad}, 2, nil,
			[]string{
				bad + `:4:20: unknown GPU "A100-80"; did you mean "A100-80GB"?` + "\n" +
					bad + ":5:23: work.gpu_hours -1: want a positive number of GPU-hours\n",
				"2 error(s)",
			}},
		{"missing file", []string{"policy", "check", "-f", filepath.Join(dir, "nope.yaml")}, 2, nil,
			[]string{"no such file"}},
		{"no -f", []string{"policy", "check"}, 2, nil, []string{"-f FILE is required"}},
		{"stray argument", []string{"policy", "check", "-f", bad, "extra"}, 2, nil, []string{"unknown command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout %q lacks %q", stdout.String(), w)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
			if tt.wantCode == 0 && stderr.Len() > 0 {
				t.Errorf("stderr on success: %s", stderr.String())
			}
		})
	}
}
