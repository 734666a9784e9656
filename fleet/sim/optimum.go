package sim

import (
	"errors"
	"fmt"
	"math"
)

// ErrTooLarge says the exact optimum would need more states than allowed.
var ErrTooLarge = errors.New("setting too large for the exact optimum")

// MaxOptimumStates bounds the dynamic programme of Optimum.
const MaxOptimumStates = 2_000_000_000

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Optimum is the cheapest cost of the job started at tick start with full
// knowledge of the traces: the best any policy could do. It is a dynamic
// programme over (tick, time lost, capacity running). Time lost (elapsed
// time not spent progressing: waiting and changeovers) is counted in units
// of gcd(tick, changeover), which makes it exact for the simulator's model;
// a changeover is booked as lost when the instance starts, which only
// overstates the loss of an instance stopped before its changeover is paid,
// and such a run is never better than waiting. Changeover must be a whole
// number of seconds. With checkpoints that are not continuous the work a
// preemption loses is not modelled, so the result is a lower bound.
func Optimum(c Training, p *Pools, start int) (float64, error) {
	ticks, err := c.validate(p)
	if err != nil {
		return 0, err
	}
	if start < 0 || start+ticks >= p.Len {
		return 0, fmt.Errorf("%w: start tick %d: want 0 to %d", ErrSetting, start, p.Len-ticks-1)
	}
	d := int(c.Changeover.Seconds())
	if float64(d) != c.Changeover.Seconds() {
		return 0, fmt.Errorf("%w: changeover %v is not a whole number of seconds", ErrTooLarge, c.Changeover)
	}
	gap := p.Gap
	unit := gcd(gap, d)
	work, deadline := c.Work.Seconds(), c.Deadline.Seconds()
	lmax := int(math.Floor((deadline - work) / float64(unit)))
	k := len(p.Traces)
	m := k + 2 // none, on-demand, spot 0..k-1
	if states := float64(ticks) * float64(lmax+1) * float64(m); states > MaxOptimumStates {
		return 0, fmt.Errorf("%w: %.3g states (ticks %d × lost-time steps %d × capacities %d); limit %d", ErrTooLarge, states, ticks, lmax+1, m, int64(MaxOptimumStates))
	}
	gapU, dU := gap/unit, d/unit
	inf := math.Inf(1)
	next := make([]float64, (lmax+1)*m)
	cur := make([]float64, (lmax+1)*m)
	for i := range next {
		next[i] = inf
	}
	price := func(a int) float64 {
		if a == 1 {
			return c.Prices.OnDemand
		}
		return c.Prices.Spot
	}
	sw := make([]float64, m)
	cont := make([]float64, m)
	for t := ticks - 1; t >= 0; t-- {
		tick := start + t
		for l := 0; l <= lmax; l++ {
			// run a with time lost l1 before the tick: finish in it, or go on.
			runVal := func(a, l1 int) float64 {
				if l1 > lmax {
					return inf
				}
				p1 := float64(t*gap - l1*unit)
				if p1+float64(gap) >= work-1e-9 {
					return price(a) * (work - p1) / 3600
				}
				return price(a)*float64(gap)/3600 + next[l1*m+a]
			}
			noneVal := inf
			if l+gapU <= lmax {
				noneVal = next[(l+gapU)*m]
			}
			best1, best2, bestA := inf, inf, -1
			for a := 1; a < m; a++ {
				if a >= 2 && !p.Available(a-2, tick) {
					sw[a], cont[a] = inf, inf
					continue
				}
				sw[a] = runVal(a, l+dU)
				cont[a] = runVal(a, l)
				if sw[a] < best1 {
					best2, best1, bestA = best1, sw[a], a
				} else if sw[a] < best2 {
					best2 = sw[a]
				}
			}
			row := cur[l*m : (l+1)*m]
			row[0] = math.Min(noneVal, best1)
			for a := 1; a < m; a++ {
				other := best1
				if a == bestA {
					other = best2
				}
				row[a] = math.Min(noneVal, math.Min(cont[a], other))
			}
		}
		next, cur = cur, next
	}
	best := next[0] // tick 0, nothing lost, nothing running
	if math.IsInf(best, 1) {
		return 0, fmt.Errorf("%w: no plan finishes by the deadline", ErrSetting)
	}
	return best, nil
}
