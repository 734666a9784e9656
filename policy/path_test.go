package policy

import (
	"errors"
	"testing"
)

// TestErrorPath checks that every error names the field it is about, so
// that tools building a policy from other input can point at their own
// fields.
func TestErrorPath(t *testing.T) {
	src := `horizon: soon
workloads:
  - name: a
    kind: training
    gpu: {models: [A100-80GB, H1000], count: 99999}
    work: {gpu_hours: 10}
  - name: b
    kind: inference
    gpu: {count: 1}
budgets:
  - {name: x, monthly_usd: -1}
`
	_, err := Parse("p.yaml", []byte(src))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("want an ErrorList, got %v", err)
	}
	got := map[string]bool{}
	for _, e := range list {
		got[e.Path] = true
	}
	for _, want := range []string{"horizon", "workloads[0].gpu.models[1]", "workloads[0].gpu.count", "workloads[1].replicas", "budgets[0].monthly_usd"} {
		if !got[want] {
			t.Errorf("no error with path %q; got %v", want, list)
		}
	}
}
