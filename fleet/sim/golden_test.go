package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func loadTestPools(t testing.TB, names ...string) *Pools {
	t.Helper()
	var trs []*Trace
	for _, n := range names {
		tr, err := LoadTrace(filepath.Join("testdata", "traces", n))
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	return mustPools(t, trs...)
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if the change is intended run go test ./fleet/sim -run Golden -update\n--- got ---\n%s", path, got)
	}
}

func TestGoldenTraining(t *testing.T) {
	p := loadTestPools(t, "zone-a.json", "zone-b.csv", "zone-c.json")
	c := Training{Work: 20 * time.Hour, Deadline: 26 * time.Hour, Changeover: 12 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	for _, tc := range []struct {
		name  string
		pools *Pools
	}{
		{"training-3-pools", p},
		{"training-zone-c", loadTestPools(t, "zone-c.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := BuildTrainingReport(c, tc.pools, spotpolicy.TrainingPolicies(), 40, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.MarshalIndent(rep, "", "  ")
			golden(t, tc.name+".json", append(js, '\n'))
			var tab bytes.Buffer
			if err := rep.WriteTable(&tab); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".txt", tab.Bytes())
		})
	}
}

func TestGoldenInference(t *testing.T) {
	p := loadTestPools(t, "zone-a.json", "zone-b.json", "zone-c.json")
	c := Inference{Target: 2, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	rep, err := BuildInferenceReport(c, p, spotpolicy.InferencePolicies())
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Frontier(c, p, FrontierConfigs()[:6])
	if err != nil {
		t.Fatal(err)
	}
	rep.Frontier = ParetoFront(pts)
	js, _ := json.MarshalIndent(rep, "", "  ")
	golden(t, "inference.json", append(js, '\n'))
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	golden(t, "inference.txt", tab.Bytes())
}

func TestGoldenTimelineSVG(t *testing.T) {
	p := loadTestPools(t, "zone-a.json", "zone-b.json", "zone-c.json")
	c := Training{Work: 20 * time.Hour, Deadline: 26 * time.Hour, Changeover: 12 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	run, err := RunTraining(c, p, spotpolicy.NewAdaptive(spotpolicy.DefaultAdaptiveConfig()), 600, true)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTrainingSVG(&b, c, p, run, "adaptive"); err != nil {
		t.Fatal(err)
	}
	golden(t, "timeline.svg", b.Bytes())

	ic := Inference{Target: 2, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices, Start: 100, Duration: 24 * time.Hour}
	res, err := RunInference(ic, p, spotpolicy.NewAdaptiveInference(spotpolicy.DefaultAdaptiveInferenceConfig()), true)
	if err != nil {
		t.Fatal(err)
	}
	var ib bytes.Buffer
	if err := WriteInferenceSVG(&ib, ic, p, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "inference-timeline.svg", ib.Bytes())
	if err := WriteInferenceSVG(&ib, ic, p, InferenceResult{}); err == nil {
		t.Fatal("an inference run without a timeline was drawn")
	}
	if err := WriteTrainingSVG(&b, c, p, Run{}, "adaptive"); err == nil {
		t.Fatal("a run without a timeline was drawn")
	}
}
