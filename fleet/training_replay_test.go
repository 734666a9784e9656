package fleet

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/internal/shareddata"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// replayResult is one policy's outcome over the replayed starts.
type replayResult struct {
	live, simCost float64 // mean cost against on-demand only
	misses        int
}

// replayTrace drives TrainingSource in virtual time over a real
// availability trace (the paper's setting: 48 h of work due in 60 h,
// 12 min changeovers, p3.2xlarge at $3.06 on-demand and $0.97 spot), the
// driver playing reconciler and cloud, and the simulator over the same
// starts.
func replayTrace(t *testing.T, policyName string, n int, oracle bool) replayResult {
	t.Helper()
	dir := shareddata.Dir(t, "spot-traces", "availability", "1-node", "aws-10-26-2022")
	tr, err := sim.LoadTrace(filepath.Join(dir, "us-west-2a_v100_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	pools, err := sim.NewPools([]*sim.Trace{tr})
	if err != nil {
		t.Fatal(err)
	}
	setting := sim.Training{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: 12 * time.Minute,
		Prices: sim.DefaultPrices, History: sim.DefaultHistory}
	starts, err := sim.Starts(setting, pools, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	gap := time.Duration(pools.Gap) * time.Second
	// The simulator's setting saves progress continuously; a workload
	// without checkpoint_interval saves nothing, so checkpoint every tick.
	w := trainWorkload(policyName, setting.Work, setting.Deadline, setting.Changeover, time.Minute)
	offers := []pricing.Offer{p3("us-west-2a", setting.Prices.Spot)}
	plan := &optimizer.Plan{Placements: []optimizer.Placement{{Workload: "train", Kind: "training", Cloud: pricing.AWS, Region: "us-west-2",
		Zone: "us-west-2a", InstanceType: "p3.2xlarge", GPU: pricing.V100, Capacity: pricing.Spot, GPUs: 1, Instances: 1, RelativeSpeed: 1,
		Groups: []optimizer.Group{{Cloud: pricing.AWS, Region: "us-west-2", Zone: "us-west-2a", InstanceType: "p3.2xlarge", GPU: pricing.V100,
			GPUsPerInstance: 1, Instances: 1, Capacity: pricing.Spot, PricePerHour: setting.Prices.Spot}}}}}
	var res replayResult
	for _, start := range starts {
		pol, err := spotpolicy.NewTraining(policyName)
		if err != nil {
			t.Fatal(err)
		}
		run, err := sim.RunTraining(setting, pools, pol, start, false)
		if err != nil {
			t.Fatal(err)
		}
		res.simCost += run.Normalized
		avail := func(_ string, tick int) bool { return pools.Available(0, start+tick) }
		d := newDriver(t, w, plan, func(int) []pricing.Offer { return offers }, avail, TrainingConfig{Tick: gap})
		if oracle {
			d.oracle = []string{"us-west-2a"}
		}
		d.run(t, int(setting.Deadline/gap)+50)
		if d.finish == 0 || d.finish > setting.Deadline.Seconds()+1e-6 {
			res.misses++
		}
		res.live += d.cost / setting.OnDemandCost()
	}
	res.live /= float64(len(starts))
	res.simCost /= float64(len(starts))
	return res
}

// TestTrainingReplayRealTrace is the live stage against the simulator on
// a real trace (us-west-2a V100, 600 s ticks), over the same 20 starts:
//   - with every tick of the trace fed to its trackers, as the simulator's
//     see it, the stage must cost within 10% of the simulator: the live
//     State, Guard and the driver's accounting match the simulator's;
//   - with live signals only (its own instance running, preemptions and
//     refused launches through the unavailable cache) it must miss no
//     deadline and stay within 30%: it learns a pool only from its own
//     launches, so it pays for what it does not know (docs/BENCHMARKS.md).
func TestTrainingReplayRealTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 20 starts of 60 h")
	}
	for _, name := range []string{spotpolicy.PolicyAdaptive, spotpolicy.PolicyUniformProgress} {
		t.Run(name, func(t *testing.T) {
			o := replayTrace(t, name, 20, true)
			r := replayTrace(t, name, 20, false)
			t.Logf("%s: simulator %.3f of on-demand cost; live stage seeing every tick %.3f (%+.1f%%), on live signals %.3f (%+.1f%%); misses %d/%d",
				name, r.simCost, o.live, 100*(o.live/o.simCost-1), r.live, 100*(r.live/r.simCost-1), o.misses, r.misses)
			if o.misses+r.misses > 0 {
				t.Errorf("missed deadlines: %d seeing every tick, %d on live signals (of 20 each)", o.misses, r.misses)
			}
			if rel := o.live/o.simCost - 1; math.Abs(rel) > 0.10 {
				t.Errorf("seeing every tick, live cost %.3f is %+.1f%% off the simulator's %.3f; want within 10%%", o.live, 100*rel, o.simCost)
			}
			if rel := r.live/r.simCost - 1; math.Abs(rel) > 0.30 {
				t.Errorf("on live signals, cost %.3f is %+.1f%% off the simulator's %.3f; want within 30%%", r.live, 100*rel, r.simCost)
			}
		})
	}
}
