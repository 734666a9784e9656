// Package autoscale decides how many replicas an inference service should
// run, from the load it sees: the GPU utilisation its agents report with
// their heartbeats (against the policy's replicas.target_utilization) and,
// where the policy names one, a Prometheus query of the service's total
// load (against autoscale.prometheus.target_per_replica).
//
// The rule is Kubernetes' Horizontal Pod Autoscaler's, which platform teams
// already know: desired = ceil(ready × observed ÷ target) per metric, the
// largest of the metrics wins, nothing changes within a 10% tolerance, and
// stabilisation windows make scale-up fast and scale-down slow (a scale down
// takes the highest recommendation of the last ScaleDownWindow). The result
// is clamped to [min, max]. Pure functions and a small stateful Autoscaler;
// the fleet controller feeds it samples and turns the answer into slots.
package autoscale

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gpubroker/gpubroker/policy"
)

// Config is one service's scaling rule.
type Config struct {
	Min, Max int
	// TargetUtilization is the mean GPU utilisation to aim for (0..1); 0
	// turns the utilisation metric off.
	TargetUtilization float64
	// TargetPerReplica is the load metric per replica to aim for; 0 turns
	// the load metric off.
	TargetPerReplica float64
	// Tolerance: no change while observed/target is within 1 ± Tolerance
	// (default 0.1, as HPA).
	Tolerance float64
	// ScaleUpWindow and ScaleDownWindow stabilise (defaults 0 and 5m).
	ScaleUpWindow   time.Duration
	ScaleDownWindow time.Duration
	// MaxScaleUpStep bounds one scale up to this many replicas or doubling,
	// whichever is more (default 4, as HPA's default policy).
	MaxScaleUpStep int
}

// FromPolicy builds the rule of an inference workload.
func FromPolicy(w policy.Workload) Config {
	c := Config{Min: w.Replicas.Min, Max: w.Replicas.Max, TargetUtilization: w.Replicas.TargetUtilization,
		ScaleUpWindow: w.Autoscale.ScaleUpWindow, ScaleDownWindow: w.Autoscale.ScaleDownWindow}
	if w.Autoscale.ScaleDownWindow == 0 {
		c.ScaleDownWindow = DefaultScaleDownWindow
	}
	if m := w.Autoscale.Prometheus; m != nil {
		c.TargetPerReplica = m.TargetPerReplica
	}
	return c
}

// DefaultScaleDownWindow is HPA's default: five minutes of lower
// recommendations before replicas are removed.
const DefaultScaleDownWindow = 5 * time.Minute

func (c Config) withDefaults() Config {
	if c.Tolerance <= 0 {
		c.Tolerance = 0.1
	}
	if c.MaxScaleUpStep <= 0 {
		c.MaxScaleUpStep = 4
	}
	if c.Min < 1 {
		c.Min = 1
	}
	if c.Max < c.Min {
		c.Max = c.Min
	}
	return c
}

// Sample is what the service looks like at one moment.
type Sample struct {
	At time.Time
	// Ready is the number of replicas serving now (running, heartbeating).
	Ready int
	// Utilization is each ready replica's mean GPU utilisation (0..1), from
	// its agent's last heartbeat. Replicas without a figure are left out.
	Utilization []float64
	// Load is the Prometheus load metric; nil when there is none or the
	// query failed (the utilisation metric still decides).
	Load *float64
}

// Decision is a recommendation with its reason.
type Decision struct {
	Desired int
	// Raw is the recommendation before stabilisation and clamping.
	Raw    int
	Reason string
}

// Recommend is the stateless rule: the replicas one sample asks for, before
// stabilisation, clamped to [Min, Max].
func Recommend(c Config, s Sample) Decision {
	var buf [128]byte
	d, reason := recommend(c, s, buf[:0])
	d.Reason = string(reason)
	return d
}

// recommend is Recommend with its reason appended to buf, not in the
// decision: the reasons joined by "; ", built without fmt (every service
// is sized every plan).
func recommend(c Config, s Sample, buf []byte) (Decision, []byte) {
	c = c.withDefaults()
	current := s.Ready
	reason := buf
	next := func() {
		if len(reason) > 0 {
			reason = append(reason, "; "...)
		}
	}
	desired := -1
	consider := func(name string, observed, target float64) {
		if target <= 0 || current <= 0 {
			return
		}
		ratio := observed / target
		d := current
		if math.Abs(ratio-1) > c.Tolerance {
			d = int(math.Ceil(float64(current) * ratio))
		}
		// "%s %.3g vs target %.3g → %d"
		next()
		reason = append(reason, name...)
		reason = append(reason, ' ')
		reason = strconv.AppendFloat(reason, observed, 'g', 3, 64)
		reason = append(reason, " vs target "...)
		reason = strconv.AppendFloat(reason, target, 'g', 3, 64)
		reason = append(reason, " → "...)
		reason = strconv.AppendInt(reason, int64(d), 10)
		desired = max(desired, d)
	}
	if c.TargetUtilization > 0 && len(s.Utilization) > 0 {
		sum := 0.0
		for _, u := range s.Utilization {
			sum += u
		}
		consider("GPU utilisation", sum/float64(len(s.Utilization)), c.TargetUtilization)
	}
	if c.TargetPerReplica > 0 && s.Load != nil {
		if current <= 0 {
			// Nothing ready yet: size straight from the load.
			d := int(math.Ceil(*s.Load / c.TargetPerReplica))
			next()
			reason = fmt.Appendf(reason, "load %.3g with no ready replica → %d", *s.Load, d)
			desired = max(desired, d)
		} else {
			consider("load per replica", *s.Load/float64(current), c.TargetPerReplica)
		}
	}
	if desired < 0 {
		desired = max(current, c.Min)
		next()
		reason = append(reason, "no load figures: keep"...)
	}
	raw := desired
	if up := max(c.MaxScaleUpStep, current); current > 0 && desired > current+up {
		desired = current + up
		next()
		reason = fmt.Appendf(reason, "scale up limited to +%d", up)
	}
	desired = min(max(desired, c.Min), c.Max)
	return Decision{Desired: desired, Raw: raw}, reason
}

// Autoscaler keeps a service's recent recommendations for the
// stabilisation windows. Not safe for concurrent use; the leader's loop
// owns one per service.
type Autoscaler struct {
	cfg     Config
	history []rec
	current int
	// reason is the last decision's reason, buf the memory the next is
	// built in: a service's reason changes with its load, not every plan,
	// and is then handed out again.
	reason string
	buf    []byte
}

type rec struct {
	at      time.Time
	desired int
}

// New returns an autoscaler that starts at replicas (the plan's count).
func New(c Config, replicas int) *Autoscaler {
	c = c.withDefaults()
	return &Autoscaler{cfg: c, current: min(max(replicas, c.Min), c.Max)}
}

// Reconfigure applies an edited rule (the policy changed the service's
// bounds, targets or windows): the replica count is brought within the new
// bounds and the stabilisation history, decided under the old rule, is
// dropped. An unchanged rule changes nothing.
func (a *Autoscaler) Reconfigure(c Config) {
	c = c.withDefaults()
	if c == a.cfg {
		return
	}
	a.cfg, a.history = c, nil
	a.current = min(max(a.current, c.Min), c.Max)
}

// Current is the replica count last decided.
func (a *Autoscaler) Current() int { return a.current }

// Observe takes a sample and returns the replica count to run now.
func (a *Autoscaler) Observe(s Sample) Decision {
	d, reason := recommend(a.cfg, s, a.buf[:0])
	a.history = append(a.history, rec{at: s.At, desired: d.Desired})
	keep := max(a.cfg.ScaleDownWindow, a.cfg.ScaleUpWindow)
	i := 0
	for i < len(a.history) && s.At.Sub(a.history[i].at) > keep {
		i++
	}
	a.history = a.history[i:]
	next := a.current
	switch {
	case d.Desired > a.current:
		// Scale up to the lowest recommendation within the up window, so a
		// single spike within it does not add replicas.
		lo := d.Desired
		for _, r := range a.history {
			if s.At.Sub(r.at) <= a.cfg.ScaleUpWindow {
				lo = min(lo, r.desired)
			}
		}
		next = max(a.current, lo)
	case d.Desired < a.current:
		// Scale down only to the highest recommendation within the down
		// window: load must stay low for the whole window.
		hi := d.Desired
		for _, r := range a.history {
			if s.At.Sub(r.at) <= a.cfg.ScaleDownWindow {
				hi = max(hi, r.desired)
			}
		}
		next = min(a.current, hi)
	}
	if next != d.Desired {
		// + fmt.Sprintf("; stabilised at %d", next)
		reason = strconv.AppendInt(append(reason, "; stabilised at "...), int64(next), 10)
	}
	a.buf = reason
	if string(reason) != a.reason {
		a.reason = string(reason)
	}
	d.Reason = a.reason
	a.current = next
	d.Desired = next
	return d
}
