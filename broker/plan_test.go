package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestAPIPlanMatchesOptimizer plans every example policy and checks that
// the wire form (apiv1.Plan) carries exactly the optimizer's JSON: no field
// lost, none added.
func TestAPIPlanMatchesOptimizer(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../examples/*.yaml")
	planned := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Parse(f, data)
		if err != nil {
			continue // not a policy file (broker config, ...)
		}
		plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			continue
		}
		ap, err := APIPlan(plan)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var want, got any
		wb, _ := json.Marshal(plan)
		gb, _ := json.Marshal(ap)
		_ = json.Unmarshal(wb, &want)
		_ = json.Unmarshal(gb, &got)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: apiv1.Plan JSON differs from the optimizer's:\n%s\n%s", f, wb, gb)
		}
		planned++
	}
	if planned == 0 {
		t.Fatal("no example policy planned")
	}
	if _, err := OptimizerPlan(context.Background(), "x.yaml", []byte("workloads: [}"), nil, cat, time.Now()); err == nil {
		t.Fatal("a broken policy planned")
	}
}
