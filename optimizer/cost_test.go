package optimizer

import (
	"math"
	"testing"
)

func TestEstimateRun(t *testing.T) {
	tests := []struct {
		name                         string
		compute, rate, ckpt, restart float64
		wantTotal                    float64
		wantFinish                   bool
	}{
		{"on-demand", 100, 0, 1, 0.1, 100, true},
		// each preemption costs 0.5+0.1=0.6 h; progress per hour 1-0.02*0.6=0.988
		{"checkpointed", 100, 0.02, 1, 0.1, 100 / 0.988, true},
		// restart from scratch: (1/λ + R)(e^{λH}-1) = (50+0.1)(e^2-1)
		{"no checkpoint", 100, 0.02, 0, 0.1, 50.1 * math.Expm1(2), true},
		{"interval longer than job", 10, 0.02, 20, 0, 50 * math.Expm1(0.2), true},
		{"preempted faster than saved", 100, 1, 4, 0, math.Inf(1), false},
		{"never finishes without checkpoints", 5000, 0.02, 0, 0, math.Inf(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := estimateRun(tt.compute, tt.rate, tt.ckpt, tt.restart)
			if e.Finishes != tt.wantFinish {
				t.Fatalf("Finishes = %v, want %v", e.Finishes, tt.wantFinish)
			}
			if !tt.wantFinish {
				return
			}
			if math.Abs(e.Total-tt.wantTotal) > 1e-9*tt.wantTotal {
				t.Errorf("Total = %v, want %v", e.Total, tt.wantTotal)
			}
			if sum := e.Compute + e.PreemptionLoss + e.Restart; math.Abs(sum-e.Total) > 1e-9*e.Total {
				t.Errorf("parts sum to %v, total %v", sum, e.Total)
			}
		})
	}
}

func TestScalingEfficiency(t *testing.T) {
	if got := ScalingEfficiency(1, 1); got != 1 {
		t.Errorf("1 GPU: %v", got)
	}
	if got, want := ScalingEfficiency(8, 1), 0.95*0.95*0.95; math.Abs(got-want) > 1e-12 {
		t.Errorf("8 GPUs in one instance: %v, want %v", got, want)
	}
	if ScalingEfficiency(8, 1) <= ScalingEfficiency(1, 8) {
		t.Errorf("8 GPUs in one instance should scale better than 8 instances of 1")
	}
}
