package fleetsim

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/sim"
)

// TestTrainingAgainstPerJobSimulatorOtherFolders is
// TestTrainingAgainstPerJobSimulator on one trace of other folders (traces
// the live stage was not tuned on), with and without checkpoints: one job,
// the fleet simulation with the live training stage against
// sim.RunTraining (adaptive) from the same tick, same prices, changeover
// and checkpoints (none: one checkpoint of the whole work). The fleet must
// miss no deadline on any start. With checkpoints its cost is held to the
// issue's 10% (1.00-1.04 since a move launches before it stops: a refused
// move from on-demand used to cost a changeover and unsaved work, and 1.13
// to 1.18 here; docs/BENCHMARKS.md "Training in the fleet simulation vs the
// per-job simulator"). Without checkpoints the
// ratio is not compared: the per-job model checkpoints on every voluntary
// switch (it leaves spot for on demand for one tick and returns with all
// its work saved), which a job without checkpoints cannot do.
func TestTrainingAgainstPerJobSimulatorOtherFolders(t *testing.T) {
	for _, tc := range []struct {
		trace          string // folder/file under spot-traces
		work, deadline time.Duration
		ckpt           time.Duration // 0: none
		days           float64
		maxRatio       float64 // 0: not compared
	}{
		{"availability/1-node/aws-02-15-2023/us-east-1a_v100_1.json", 48 * time.Hour, 72 * time.Hour, 10 * time.Minute, 4, 1.10},
		{"availability/1-node/aws-02-15-2023/us-west-2b_v100_1.json", 24 * time.Hour, 36 * time.Hour, 0, 2, 0},
		{"availability/16-node/aws-08-27-2023/us-west-2c_v100_1.json", 48 * time.Hour, 72 * time.Hour, 10 * time.Minute, 4, 1.10},
		{"preemption/1-node/aws-04-22-2023/us-east-1c_v100_1.json", 24 * time.Hour, 36 * time.Hour, 10 * time.Minute, 2, 1.10},
		{"preemption/4-node/aws-08-03-2023/us-east-2a_v100_1.json", 48 * time.Hour, 72 * time.Hour, 30 * time.Minute, 4, 1.10},
		{"preemption/4-node/aws-08-03-2023/us-west-2c_v100_1.json", 24 * time.Hour, 30 * time.Hour, 0, 2, 0},
	} {
		t.Run(fmt.Sprintf("%s/ckpt=%s", tc.trace, tc.ckpt), func(t *testing.T) {
			dir, file := filepath.Split(tc.trace)
			st, err := sim.LoadTrace(filepath.Join(sharedTraces(t, strings.TrimSuffix(dir, "/")), file))
			if err != nil {
				t.Fatal(err)
			}
			ckptYAML, ckpt := "", tc.work // the per-job simulator's "no checkpoint" is one of the whole work
			if tc.ckpt > 0 {
				ckptYAML, ckpt = fmt.Sprintf("\n    checkpoint_interval: %s", tc.ckpt), tc.ckpt
			}
			job := fmt.Sprintf(`
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: %g, reference_gpu: V100}
    deadline: %s%s
    restart_overhead: 6m
    spot: prefer
`, tc.work.Hours(), tc.deadline, ckptYAML)
			zone := strings.SplitN(file, "_", 2)[0]
			setting := sim.Training{Work: tc.work, Deadline: tc.deadline, Changeover: 12 * time.Minute, Checkpoint: ckpt,
				Prices: sim.Prices{OnDemand: 3.06, Spot: 0.97}, History: sim.DefaultHistory}
			ratio := comparePerJob(t, perJobCase{job: job, name: file, zone: zone, trace: st, setting: setting, days: tc.days, starts: 8, seeds: 200}, nil)
			if tc.maxRatio > 0 && ratio > tc.maxRatio {
				t.Errorf("the fleet costs %.3f × the per-job simulator; want at most %.2f", ratio, tc.maxRatio)
			}
		})
	}
}
