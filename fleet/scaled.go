package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet/autoscale"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// LoadSource reads an inference service's live load: its ready replicas
// with their GPU utilisation (agents' heartbeats) and, where the policy names
// one, the Prometheus metric.
type LoadSource interface {
	Sample(ctx context.Context, w policy.Workload, now time.Time) (autoscale.Sample, error)
}

// ScaledSource is a PlanSource that sizes each inference placement of the
// inner plan to what its autoscaler asks for (fleet/autoscale: HPA rule on
// utilisation and Prometheus load, between replicas.min and replicas.max):
// replicas beyond the plan's are added to its first (cheapest) group, and
// removed from its last groups first, so slot identities stay stable.
type ScaledSource struct {
	Inner  PlanSource
	Policy func() *policy.Policy
	Load   LoadSource
	Now    func() time.Time
	Log    *slog.Logger
	// StopScaling, when set, says a budget with action stop-scaling over
	// this workload reached 100% this month: the service is held at
	// replicas.min until the month ends (docs/policy.md).
	StopScaling func(ctx context.Context, w policy.Workload, now time.Time) bool
	// Prefetch samples the services' load on another goroutine while the
	// inner stages plan, rather than one service after another once they
	// are done. A sample is used only when the plan's time is the one it
	// was taken at, so a clock that moves during the inner plan (a live
	// broker's) samples again; the fleet simulator, whose clock stands
	// still during a pass, sets it.
	Prefetch bool
	// preMu: one plan at a time samples into preGot.
	preMu  sync.Mutex
	preGot map[string]loadSample

	mu sync.Mutex
	// scaler are the services' autoscalers and last decisions (one map:
	// every service is looked up every plan).
	scaler map[string]*scaledService
	// The last plan in and out, and when: a re-plan inside a pass (InPass)
	// at the same instant on the same inner plan gets the same answer.
	lastIn, lastOut *optimizer.Plan
	lastAt          time.Time
	// reuse and bufs: ChainConfig.ReusePlanMemory.
	reuse bool
	bufs  placementBufs
	index indexCache
}

// Plan returns the inner plan with inference replicas resized.
func (s *ScaledSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	var pre *loadSamples
	if s.Prefetch {
		// (Also inside a pass: the last plan stands only when the inner
		// plan is the same one, which a training stage below never
		// hands back; then the sampling was for nothing, off the path.)
		s.preMu.Lock()
		defer s.preMu.Unlock()
		pre = s.prefetch(ctx)
	}
	plan, _, byName, now, ok, err := stageInput(ctx, s.Inner, u, s.Policy, s.Now, &s.index)
	if pre != nil {
		<-pre.done
	}
	if !ok {
		return plan, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if inPass(ctx) && plan == s.lastIn && now.Equal(s.lastAt) && s.lastOut != nil {
		// Asked again in the pass after a refused launch: the load was
		// sampled at this instant already.
		return s.lastOut, nil
	}
	if s.scaler == nil {
		s.scaler = map[string]*scaledService{}
	}
	// The inner plan's placements are shared until one is resized: most
	// passes resize none, and copying every placement of a thousand-workload
	// fleet per plan was a good part of the fleet simulator's garbage.
	out := *plan
	copied := false
	for i := range plan.Placements {
		// (The placement and the workload are copied only for the
		// services: a plan holds a thousand placements.)
		wp := byName[plan.Placements[i].Workload]
		if wp == nil || wp.Kind != policy.Inference || len(plan.Placements[i].Groups) == 0 {
			continue
		}
		p, w := plan.Placements[i], *wp
		planned := 0
		for _, g := range p.Groups {
			planned += g.Instances
		}
		sv := s.scaler[w.Name]
		if sv == nil {
			sv = &scaledService{a: autoscale.New(autoscale.FromPolicy(w), planned)}
			s.scaler[w.Name] = sv
		} else {
			sv.a.Reconfigure(autoscale.FromPolicy(w)) // the policy may have been edited
		}
		got, hit := pre.get(w, now)
		sample, err := got.sample, got.err
		if !hit {
			sample, err = s.Load.Sample(ctx, w, now)
		}
		if err != nil && s.Log != nil {
			s.Log.Warn("autoscale: load unavailable; deciding on what is known", "workload", w.Name, "err", err)
		}
		sample.At = now
		d := sv.a.Observe(sample)
		if s.StopScaling != nil && d.Desired > w.Replicas.Min && s.StopScaling(ctx, w, now) {
			d.Desired, d.Reason = w.Replicas.Min, d.Reason+"; budget reached: held at replicas.min (stop-scaling)"
		}
		sv.last = d
		if d.Desired != planned {
			if !copied {
				out.Placements = s.bufs.copyOf(plan.Placements, s.reuse)
				copied = true
			}
			out.Placements[i] = sv.resize(p, d.Desired)
		}
	}
	// A service that left the policy takes its scaler and decision with it.
	for name := range s.scaler {
		if w := byName[name]; w == nil || w.Kind != policy.Inference {
			delete(s.scaler, name)
		}
	}
	s.lastIn, s.lastOut, s.lastAt = plan, &out, now
	return &out, nil
}

// loadSamples are the services' load samples taken at one time, by
// workload name; done is closed once they all are.
type loadSamples struct {
	at   time.Time
	done chan struct{}
	got  map[string]loadSample
}

type loadSample struct {
	prom   *policy.PrometheusMetric // the query it was taken with
	sample autoscale.Sample
	err    error
}

// prefetch starts sampling every inference service of the policy at the
// current time; nil without a policy.
func (s *ScaledSource) prefetch(ctx context.Context) *loadSamples {
	pol := s.Policy()
	if pol == nil {
		return nil
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	// The samples go into the last plan's map, emptied: Plan holds
	// s.preMu until it is done with them.
	if s.preGot == nil {
		s.preGot = make(map[string]loadSample, len(pol.Workloads))
	}
	clear(s.preGot)
	pre := &loadSamples{at: now, done: make(chan struct{}), got: s.preGot}
	go func() {
		defer close(pre.done)
		for i := range pol.Workloads {
			w := &pol.Workloads[i]
			if w.Kind != policy.Inference {
				continue
			}
			smp, err := s.Load.Sample(ctx, *w, now)
			pre.got[w.Name] = loadSample{prom: w.Autoscale.Prometheus, sample: smp, err: err}
		}
	}()
	return pre
}

// get is w's sample at now, if it was taken (hit false: sample it now).
func (l *loadSamples) get(w policy.Workload, now time.Time) (loadSample, bool) {
	if l == nil || !l.at.Equal(now) {
		return loadSample{}, false
	}
	x, ok := l.got[w.Name]
	if !ok || x.prom != w.Autoscale.Prometheus {
		return loadSample{}, false
	}
	return x, true
}

// Decisions returns each inference service's last decision.
func (s *ScaledSource) Decisions() map[string]autoscale.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]autoscale.Decision, len(s.scaler))
	for k, v := range s.scaler {
		out[k] = v.last
	}
	return out
}

// scaledService is a service's autoscaler and its last decision, and the
// groups its placement was last resized to (never changed after: the plans
// share them) with the scratch the next are built in.
type scaledService struct {
	a            *autoscale.Autoscaler
	last         autoscale.Decision
	out, scratch []optimizer.Group
}

// resize is resizeIn with the last groups handed out again when equal
// (every service is resized every plan, mostly to the same).
func (sv *scaledService) resize(p optimizer.Placement, n int) optimizer.Placement {
	r := resizeIn(sv.scratch, p, n)
	sv.scratch = r.Groups[:0]
	if !equalGroups(r.Groups, sv.out) {
		sv.out = cloneGroups(r.Groups)
	}
	r.Groups = sv.out
	return r
}

// resizeIn returns p with n replicas: extra ones in the first group, fewer
// taken from the last groups.
// The groups are built in buf's memory.
func resizeIn(buf []optimizer.Group, p optimizer.Placement, n int) optimizer.Placement {
	groups := append(buf[:0], p.Groups...)
	total := 0
	for _, g := range groups {
		total += g.Instances
	}
	if n > total {
		groups[0].Instances += n - total
	}
	for i := len(groups) - 1; i >= 0 && total > n; i-- {
		take := min(groups[i].Instances, total-n)
		groups[i].Instances -= take
		total -= take
	}
	kept := groups[:0]
	for _, g := range groups {
		if g.Instances > 0 {
			kept = append(kept, g)
		}
	}
	p.Groups = kept
	p.Instances = n
	return p
}

// AgentLoad samples a service from its agents' heartbeats and, where the
// policy gives one, a Prometheus query.
type AgentLoad struct {
	Agents interface {
		ListInstances(ctx context.Context, workload, state string) ([]store.InstanceRecord, error)
	}
	// Fresh is how recent a heartbeat must be for a replica to count as
	// ready (default 2 minutes).
	Fresh time.Duration
}

// Sample implements LoadSource.
func (a AgentLoad) Sample(ctx context.Context, w policy.Workload, now time.Time) (autoscale.Sample, error) {
	fresh := a.Fresh
	if fresh <= 0 {
		fresh = 2 * time.Minute
	}
	var s autoscale.Sample
	insts, err := a.Agents.ListInstances(ctx, w.Name, store.StateRunning)
	if err != nil {
		return s, err
	}
	for _, in := range insts {
		if in.LastHeartbeat.IsZero() || now.Sub(in.LastHeartbeat) > fresh {
			continue
		}
		s.Ready++
		s.Utilization = append(s.Utilization, in.Utilization)
	}
	if m := w.Autoscale.Prometheus; m != nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := autoscale.Prometheus{URL: m.URL, Query: m.Query, Now: func() time.Time { return now }}.Value(qctx)
		if err != nil {
			return s, err
		}
		s.Load = &v
	}
	return s, nil
}
