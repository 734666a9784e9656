package optimizer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
)

// TestDeadlineRestartReason: a spot job that does not checkpoint restarts
// from the start at each interruption, and its expected run time grows
// exponentially with the run (estimateRun). A blocked job's reason quoted
// the figure ("needs 101741841145.6h > deadline 71h", differential seed
// 4806); past ten times the deadline it now says what drives it and what
// would fix it, and whether the job is late even uninterrupted. 8×A100 on
// gcp (0.03 interruptions an hour) is the fastest option of tinyCatalog.
func TestDeadlineRestartReason(t *testing.T) {
	noCkpt := func(gpuHours float64, deadline time.Duration, ckpt time.Duration) policy.Workload {
		w := a100Only(job("j", gpuHours, deadline, policy.SpotOnly))
		w.CheckpointInterval = ckpt
		return w
	}
	tests := []struct {
		name      string
		w         policy.Workload
		want, not []string
	}{
		{
			// 400h of compute: (1/0.03+0.25)(e^12−1) ≈ 5.5 million hours.
			name: "unbounded by restarts", w: noCkpt(3200, 450*time.Hour, 0),
			want: []string{"needs 400.0h of compute, but without checkpoints each spot interruption (0.03 an hour) restarts it",
				"more than 1000× the deadline 450h", "checkpoint_interval well under the run, or on-demand capacity (spot: prefer or never), would fix it"},
			not: []string{"even without interruptions"},
		},
		{
			// 200h: ≈ 13,515h, 54 times the deadline.
			name: "tens of times the deadline", w: noCkpt(1600, 250*time.Hour, 0),
			want: []string{"needs 200.0h of compute", "54× the deadline 250h"},
			not:  []string{"13515"},
		},
		{
			// 300h: ≈ 272,000h, over 1000 times the deadline.
			name: "late even uninterrupted", w: noCkpt(2400, 250*time.Hour, 0),
			want: []string{"needs 300.0h of compute > deadline 250h even without interruptions", "more than 1000× the deadline"},
			not:  []string{"would fix it"},
		},
		{
			name: "checkpoint no sooner than the run ends", w: noCkpt(2400, 350*time.Hour, 400*time.Hour),
			want: []string{"checkpointing every 400.0h, no sooner than it ends, each spot interruption"},
		},
		{
			// Checkpoints every hour: the figure is close to the compute
			// and says what it should.
			name: "checkpointed: the figure", w: noCkpt(2400, 250*time.Hour, time.Hour),
			want: []string{"needs 30", "h > deadline 250h"},
			not:  []string{"interruption"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &policy.Policy{File: "restart.yaml", Horizon: 720 * time.Hour, Workloads: []policy.Workload{tt.w}}
			plan, err := Solve(Input{Catalog: tinyCatalog(), Policy: p, Now: testNow})
			if !errors.Is(err, ErrInfeasible) || plan == nil || len(plan.Blocked) != 1 {
				t.Fatalf("want the job blocked, got %v", err)
			}
			b := plan.Blocked[0]
			if b.Constraint != "deadline" {
				t.Errorf("constraint %q, want deadline (%s)", b.Constraint, b.Reason)
			}
			for _, s := range tt.want {
				if !strings.Contains(b.Reason, s) {
					t.Errorf("reason %q lacks %q", b.Reason, s)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(b.Reason, s) {
					t.Errorf("reason %q has %q", b.Reason, s)
				}
			}
		})
	}
}
