package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWorkloadFromJSON(t *testing.T) {
	w, err := WorkloadFromJSON("workload ft", "ft", "ml", "training",
		[]byte(`{"gpu":{"models":["A100-80GB"],"count":8},"work":{"gpu_hours":800},"deadline":"72h","spot":"prefer"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "ft" || w.Team != "ml" || w.Kind != Training || w.GPU.Count != 8 || w.WorkGPUHours != 800 ||
		w.Deadline != 72*time.Hour || w.RestartOverhead != DefaultRestartOverhead || w.ReferenceGPU != "A100-80GB" {
		t.Fatalf("workload %+v", w)
	}
	bad := []struct{ name, kind, spec, want string }{
		{"x", "training", `{"gpu":{"count":0},"work":{"gpu_hours":1}}`, "gpu.count"},
		{"x", "training", `{"gpu":{"count":1}}`, "gpu_hours"},
		{"x", "inference", `{"replicas":{"min":2,"max":1}}`, "replicas"},
		{"x", "training", `{"name":"y","work":{"gpu_hours":1}}`, "beside spec"},
		{"x", "training", `[1,2]`, "JSON object"},
		{"x", "training", `{"wrok":{"gpu_hours":1}}`, "wrok"},
	}
	for _, b := range bad {
		_, err := WorkloadFromJSON("workload x", b.name, "", b.kind, []byte(b.spec))
		var el ErrorList
		if !errors.As(err, &el) || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "workload x:") {
			t.Errorf("spec %s: error %v; want an ErrorList at \"workload x\" mentioning %q", b.spec, err, b.want)
		}
	}
}

func TestWithWorkloads(t *testing.T) {
	p, err := Parse("p.yaml", []byte("workloads:\n  - name: a\n    kind: training\n    work: {gpu_hours: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := WorkloadFromJSON("api", "b", "", "training", []byte(`{"work":{"gpu_hours":5}}`))
	a2, _ := WorkloadFromJSON("api", "a", "", "training", []byte(`{"work":{"gpu_hours":99}}`))
	out, skipped := p.WithWorkloads([]Workload{b, a2})
	if len(out.Workloads) != 2 || out.Workloads[1].Name != "b" || len(skipped) != 1 || skipped[0] != "a" {
		t.Fatalf("workloads %v, skipped %v", out.Workloads, skipped)
	}
	if len(p.Workloads) != 1 {
		t.Fatal("WithWorkloads changed the policy it was called on")
	}
}
