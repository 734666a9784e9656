package sim

import (
	"fmt"
	"sort"
)

// InferenceCostBound is a lower bound on the cost, as a fraction of
// all-on-demand, of any policy that keeps Target replicas ready for at
// least atTarget of the ticks: at a tick at target at least Target
// replicas run, of which at most the zones' summed capacity on spot and the
// rest on-demand; the other ticks may cost nothing, so the bound drops the
// dearest (1-atTarget) of ticks. Ready delays are ignored, which only makes
// the bound lower. Where it exceeds a cost goal, no policy reaches the goal
// at that availability on these traces.
func InferenceCostBound(c Inference, p *Pools, atTarget float64) (float64, error) {
	if c.Target < 1 || c.Prices.OnDemand <= 0 || atTarget < 0 || atTarget > 1 {
		return 0, fmt.Errorf("%w: target, on-demand price and availability must be positive (availability at most 1)", ErrSetting)
	}
	costs := make([]float64, p.Len)
	for i := range p.Len {
		capacity := 0
		for _, t := range p.Traces {
			capacity += t.Avail[i]
		}
		spot := min(capacity, c.Target)
		costs[i] = float64(spot)*c.Prices.Spot + float64(c.Target-spot)*c.Prices.OnDemand
	}
	sort.Float64s(costs)
	keep := int(float64(p.Len)*atTarget + 0.999999)
	total := 0.0
	for _, x := range costs[:min(keep, p.Len)] {
		total += x
	}
	return total / (float64(p.Len) * float64(c.Target) * c.Prices.OnDemand), nil
}
