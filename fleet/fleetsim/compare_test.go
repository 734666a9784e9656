package fleetsim

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
)

const compareJob = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 48, reference_gpu: V100}
    deadline: 72h
    checkpoint_interval: 10m
    restart_overhead: 6m
    spot: prefer
`

// TestTrainingAgainstPerJobSimulator runs one training job in the fleet
// simulation on a real trace and the same job in fleet/sim.RunTraining
// (the default live policy, adaptive) from the same trace tick, and
// compares cost and deadlines. Where the fleet saw no preemption both run
// the same instance-hours at the same prices and must cost the same (the
// billing and the work model agree). The fleet runs the live training
// stage (fleet.TrainingSource, the same adaptive policy) on what a live
// controller can know: its own launches, preemptions and pool blocks, not
// the trace. On these 12 starts it costs 1.050 × the per-job simulator
// (docs/BENCHMARKS.md) with no missed deadline; the bound is the issue's
// 10%.
func TestTrainingAgainstPerJobSimulator(t *testing.T) {
	path := filepath.Join(sharedTraces(t, "availability/1-node/aws-10-26-2022"), "us-west-2a_v100_1.json")
	st, err := sim.LoadTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	setting := sim.Training{Work: 48 * time.Hour, Deadline: 72 * time.Hour, Changeover: 12 * time.Minute, Checkpoint: 10 * time.Minute,
		Prices: sim.Prices{OnDemand: 3.06, Spot: 0.97}, History: sim.DefaultHistory}
	ratio := comparePerJob(t, perJobCase{job: compareJob, name: "us-west-2a_v100_1", zone: "us-west-2a", trace: st, setting: setting, days: 4, starts: 12, seeds: 100},
		func(seed uint64, w WorkloadReport, run sim.Run) {
			if w.Preemptions == 0 && run.Preemptions == 0 && (w.CostUSD < 0.99*run.Cost || w.CostUSD > 1.01*run.Cost) {
				t.Errorf("seed %d: no preemption in either, yet the fleet costs $%.2f and the per-job simulator $%.2f", seed, w.CostUSD, run.Cost)
			}
		})
	if ratio > 1.10 {
		t.Errorf("the fleet costs %.3f × the per-job simulator; want at most 1.10", ratio)
	}
}

// perJobCase is one training job run both in the fleet simulation (one
// spot pool replaying trace in zone) and in sim.RunTraining.
type perJobCase struct {
	job, name, zone string
	trace           *sim.Trace
	setting         sim.Training
	days            float64
	starts, seeds   int // compare up to starts runs, trying seeds 1..seeds-1
}

// comparePerJob runs c from each seed's trace offset that the per-job
// simulator can replay (it does not wrap around the trace), fails on a
// missed deadline in either, calls check on each pair, and returns the
// fleet's cost over the per-job simulator's, summed over the runs.
func comparePerJob(t *testing.T, c perJobCase, check func(seed uint64, w WorkloadReport, run sim.Run)) float64 {
	t.Helper()
	st := c.trace
	ft := fake.Trace{Name: c.name, Gap: time.Duration(st.Gap) * time.Second, Avail: st.Avail}
	cat := pricing.NewCatalog([]pricing.Offer{p3(c.zone, 0.97)}, DefaultStart, "test")
	pools, err := sim.NewPools([]*sim.Trace{st})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := spotpolicy.NewTraining(spotpolicy.DefaultTraining)
	if err != nil {
		t.Fatal(err)
	}
	const ready = 5*time.Minute + 30*time.Second // + 30 s launch + 6 m restart = the per-job 12 m changeover
	deadlineTicks := int(c.setting.Deadline.Seconds())/st.Gap + 1
	var fleetCost, jobCost float64
	runs := 0
	for seed := uint64(1); runs < c.starts && seed < uint64(c.seeds); seed++ {
		s, err := New(Config{Policy: mustPolicy(t, c.job), Catalog: cat, Traces: []fake.Trace{ft}, Seed: seed,
			Duration: time.Duration(c.days * 24 * float64(time.Hour)), ReadyDelay: ready})
		if err != nil {
			t.Fatal(err)
		}
		_, off := s.computes[pricing.AWS].TraceOf(providers.PoolKey{Cloud: pricing.AWS, Zone: c.zone, InstanceType: "p3.2xlarge", Capacity: pricing.Spot})
		if off+deadlineTicks >= len(st.Avail) || off < int(c.setting.History.Seconds())/st.Gap {
			continue // the per-job simulator does not wrap around the trace
		}
		rep, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		run, err := sim.RunTraining(c.setting, pools, pol, off, false)
		if err != nil {
			t.Fatal(err)
		}
		w := rep.Workloads[0]
		t.Logf("seed %d, start tick %d: fleet $%.2f (finish %.1f h, %d preemptions, %d launches), per-job $%.2f (finish %.1f h, %d preemptions), ratio %.3f",
			seed, off, w.CostUSD, w.FinishHours, w.Preemptions, w.Launches, run.Cost, run.FinishHours, run.Preemptions, w.CostUSD/run.Cost)
		if !w.Finished || w.Missed {
			t.Errorf("seed %d: the fleet missed the deadline: %+v", seed, w)
		}
		if run.Missed {
			t.Errorf("seed %d: the per-job simulator missed the deadline", seed)
		}
		if check != nil {
			check(seed, w, run)
		}
		fleetCost += w.CostUSD
		jobCost += run.Cost
		runs++
	}
	if runs < 3 {
		t.Fatalf("only %d seeds gave a start the per-job simulator can replay", runs)
	}
	ratio := fleetCost / jobCost
	t.Logf("%d runs: fleet $%.2f, per-job $%.2f, ratio %.3f", runs, fleetCost, jobCost, ratio)
	return ratio
}
