package fleetsim

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"
)

// TestSameReportWhateverTheCores: the simulation's concurrent parts (the
// hedging stage's per-service decisions, the reconciler's reads beside the
// plan, the load sampled beside the inner stages) leave the report the
// same on one processor as on four: every figure, byte for byte.
func TestSameReportWhateverTheCores(t *testing.T) {
	traces, err := LoadTraceDir(sharedTraces(t, "availability/1-node/aws-02-15-2023"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(procs int) []byte {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		n := 80 // ~24 services: the hedging stage splits them over 3 goroutines
		rep, _ := runSim(t, Config{Policy: mustPolicy(t, benchPolicy(n, 3)), Catalog: benchCatalog(), Traces: traces, Seed: 3,
			SpotScale: n / 10, Duration: 24 * time.Hour})
		buf, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	one, four := run(1), run(4)
	if string(one) != string(four) {
		t.Fatalf("reports differ between GOMAXPROCS 1 and 4:\n%s\n%s", one, four)
	}
}

// TestSameReportSplitOrNot: the simulation's report is the same, byte for
// byte, whether the chain plans the training stage beside the autoscaling
// and hedging stages (fleet.ChainConfig.SplitStages, the simulator's way)
// or below them (the broker's).
func TestSameReportSplitOrNot(t *testing.T) {
	traces, err := LoadTraceDir(sharedTraces(t, "availability/1-node/aws-02-15-2023"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(sequential bool) []byte {
		n := 80
		rep, _ := runSim(t, Config{Policy: mustPolicy(t, benchPolicy(n, 3)), Catalog: benchCatalog(), Traces: traces, Seed: 5,
			SpotScale: n / 10, Duration: 24 * time.Hour, sequential: sequential})
		buf, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	split, sequential := run(false), run(true)
	if string(split) != string(sequential) {
		t.Fatalf("reports differ between the split chain and the sequential one:\n%s\n%s", split, sequential)
	}
}
