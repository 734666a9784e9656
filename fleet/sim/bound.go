package sim

import (
	"fmt"
	"math"
	"sort"
)

// InferenceCostBound is a lower bound on the cost, as a fraction of
// all-on-demand, of any policy that keeps Target replicas ready for at
// least atTarget of the ticks: at a tick at target (even for part of it) at
// least Target replicas serve, of which at most the zones' summed capacity
// on spot and the rest on-demand; the other ticks may cost nothing, so the
// bound drops the dearest (1-atTarget) of ticks. A replica serving in tick
// i was launched at least floor(ReadyDelay/gap) ticks before, and a spot
// one has stayed in its zone since, so a zone's capacity counts as its
// least over those ticks (a zone that comes back for less than a ready
// delay serves nothing). Everything else about ready delays is ignored
// (replicas started early, the first ticks), which only makes the bound
// lower. Where it exceeds a cost goal, no policy reaches the goal at that
// availability on these traces.
func InferenceCostBound(c Inference, p *Pools, atTarget float64) (float64, error) {
	if c.Target < 1 || c.Prices.OnDemand <= 0 || atTarget < 0 || atTarget > 1 {
		return 0, fmt.Errorf("%w: target, on-demand price and availability must be positive (availability at most 1)", ErrSetting)
	}
	// A replica serving in tick i became ready before tick i+1, so it was
	// launched at tick i-d or earlier (d = floor(ReadyDelay/gap)); a spot
	// one has been in its zone at every tick since, whose capacity each
	// time bounded how many such replicas the zone kept.
	d := 0
	if gap := float64(p.Gap); gap > 0 {
		d = int(math.Floor(c.ReadyDelay.Seconds() / gap))
	}
	costs := make([]float64, p.Len)
	for i := range p.Len {
		capacity := 0
		for _, t := range p.Traces {
			least := t.Avail[i]
			for j := max(0, i-d); j < i; j++ {
				least = min(least, t.Avail[j])
			}
			capacity += least
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
