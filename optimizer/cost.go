package optimizer

import "math"

// runEstimate is the expected wall-clock time of a job on one placement,
// split into its parts. All figures are hours.
type runEstimate struct {
	Compute        float64 // uninterrupted run time: work ÷ speed
	PreemptionLoss float64 // progress redone after preemptions
	Restart        float64 // restart overhead of all preemptions
	Total          float64 // expected finish: the sum of the three
	Preemptions    float64 // expected number of preemptions
	// Finishes is false when preemptions arrive faster than progress can be
	// saved: the job is not expected to finish at all.
	Finishes bool
}

// maxExponent bounds λ·H in the no-checkpoint formula: beyond it the expected
// time is astronomically larger than the work (e^30 ≈ 10^13), so we report
// the job as not finishing rather than overflow.
const maxExponent = 30

// estimateRun is the expected time to do compute hours of uninterrupted work
// when preemptions arrive at rate per hour (a Poisson process), each costing
// restart hours of overhead plus the progress since the last checkpoint.
//
// With checkpoints every c hours a preemption loses on average c/2 of work,
// so each hour of running makes 1 − rate·(c/2 + restart) hours of progress:
// T = H / (1 − rate·(c/2 + restart)). Without checkpoints (or an interval
// longer than the job) a preemption loses everything since the start; the
// classic result for restart-from-scratch is T = (1/rate + restart)·(e^{rate·H} − 1).
func estimateRun(compute, rate, checkpoint, restart float64) runEstimate {
	e := runEstimate{Compute: compute, Total: compute, Finishes: true}
	if rate <= 0 || compute <= 0 {
		return e
	}
	if checkpoint > 0 && checkpoint < compute {
		perLoss := checkpoint/2 + restart
		if rate*perLoss >= 0.95 {
			e.Finishes = false
			e.Total = math.Inf(1)
			return e
		}
		e.Total = compute / (1 - rate*perLoss)
		e.Preemptions = rate * e.Total
		e.Restart = e.Preemptions * restart
		e.PreemptionLoss = e.Preemptions * checkpoint / 2
		return e
	}
	if rate*compute > maxExponent {
		e.Finishes = false
		e.Total = math.Inf(1)
		return e
	}
	n := math.Expm1(rate * compute)
	e.Preemptions = n
	e.Total = (1/rate + restart) * n
	e.Restart = n * restart
	e.PreemptionLoss = max(0, e.Total-compute-e.Restart)
	return e
}
