package fleet

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// SolverSource plans the policy on the catalog with the optimizer, with
// the blocked pools ruled out. It re-plans only when the catalog, the
// policy or the blocked pools changed, or a block ran out, so a pass
// normally costs no solve.
type SolverSource struct {
	Catalog func() *pricing.Catalog
	Policy  func() *policy.Policy
	Now     func() time.Time
	// Incremental re-plans only what a change touches instead of solving
	// the whole fleet again: when pools are blocked or a block runs out,
	// the workloads placed in a blocked pool (and those an earlier
	// incremental re-plan moved) are solved alone and merged into the last
	// plan; when the policy only lost workloads, their placements are
	// dropped. Fleet-wide couplings (shared spot capacity rows, quotas,
	// budgets) are honoured only at full solves (a new catalog or any other
	// policy change), and the plan's totals are those of the last full
	// solve. The fleet simulator sets it (a re-solve per pool block does
	// not scale to a thousand workloads over a month); the broker does not.
	Incremental bool
	// KeepInPass keeps the last solve for a re-plan inside a reconcile
	// pass (after a refused launch, see InPass): the live stages after
	// the solver re-decide on it with the new blocks at once, and the
	// solver catches up with them at the next pass's plan. The fleet
	// simulator sets it: a solve per refused launch was a third of a
	// thousand-workload month.
	KeepInPass bool

	mu      sync.Mutex
	plan    *optimizer.Plan
	cat     *pricing.Catalog
	pol     *policy.Policy
	version int
	u       *Unavailable
	expires time.Time
	// moved are the workloads incremental re-plans moved out of blocked
	// pools since the last full solve, with those pools.
	moved map[string]map[providers.PoolKey]bool
	// reuse and bufs: ChainConfig.ReusePlanMemory (an incremental re-plan
	// builds its placements over the plan before the last).
	reuse bool
	bufs  placementBufs
	// byName is replan's index, kept emptied between re-plans.
	byName map[string]*optimizer.Placement
}

// Plan returns the current plan.
func (s *SolverSource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now()
	version := u.Version()
	blocked := u.Entries(t)
	cat, pol := s.Catalog(), s.Policy()
	if pol == nil {
		return nil, fmt.Errorf("no policy loaded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plan != nil && cat == s.cat && pol == s.pol && u == s.u && version == s.version && (s.expires.IsZero() || t.Before(s.expires)) {
		return s.plan, nil
	}
	if s.KeepInPass && s.plan != nil && cat == s.cat && pol == s.pol && u == s.u && inPass(ctx) {
		// s.version stays behind, so the next plan outside a pass
		// re-plans for these blocks.
		return s.plan, nil
	}
	if s.Incremental && s.plan != nil && cat == s.cat && u == s.u && (pol == s.pol || onlyRemoved(s.pol, pol)) {
		return s.replan(pol, u, t, version, blocked), nil
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: t, Unavailable: u.Func(t), PoolLimit: u.LimitFunc(t), Replan: true})
	if err != nil {
		if s.plan != nil && len(blocked) > 0 {
			// Blocking left a workload nowhere to go: keep the last plan
			// (its slots wait in pending) until a block runs out.
			s.version = version
			return s.plan, nil
		}
		return nil, fmt.Errorf("planning with %d blocked pools: %w", len(blocked), err)
	}
	s.plan, s.cat, s.pol, s.version, s.u = plan, cat, pol, version, u
	s.moved = nil
	s.setExpiry(blocked)
	return plan, nil
}

// inPassKey marks the context of a re-plan inside a reconcile pass.
type inPassKey struct{}

// InPass marks ctx as a re-plan inside a reconcile pass: the reconciler
// asks again after a refused launch blocked pools, for the slot it is
// launching. A plan source may answer it more cheaply than a full re-plan
// (SolverSource.KeepInPass).
func InPass(ctx context.Context) context.Context { return context.WithValue(ctx, inPassKey{}, true) }

func inPass(ctx context.Context) bool { v, _ := ctx.Value(inPassKey{}).(bool); return v }

func (s *SolverSource) setExpiry(blocked []Entry) {
	s.expires = time.Time{}
	for _, e := range blocked {
		if s.expires.IsZero() || e.Until.Before(s.expires) {
			s.expires = e.Until
		}
	}
}

// replan is the incremental re-plan (see Incremental); s.mu is held. It
// re-solves the workloads placed in a pool blocked since the last plan, and
// those moved out of a pool whose block has run out.
func (s *SolverSource) replan(pol *policy.Policy, u *Unavailable, t time.Time, version int, blocked []Entry) *optimizer.Plan {
	// Pointers into the last plan and the part solve, not copies: a
	// placement is large and this runs at every block.
	// (The index is kept between re-plans, emptied: one per block.)
	if s.byName == nil {
		s.byName = make(map[string]*optimizer.Placement, len(s.plan.Placements))
	}
	byName := s.byName
	clear(byName)
	defer clear(byName) // (no pointers into the plans kept)
	for i := range s.plan.Placements {
		byName[s.plan.Placements[i].Workload] = &s.plan.Placements[i]
	}
	isBlocked := map[providers.PoolKey]bool{}
	for _, e := range blocked {
		isBlocked[e.Pool] = true
	}
	var affected []policy.Workload
	hits := map[string][]providers.PoolKey{}
	for _, w := range pol.Workloads {
		p, ok := byName[w.Name]
		hit := !ok
		for k := range s.moved[w.Name] {
			if !isBlocked[k] {
				hit = true // its block ran out: the pool may be its best again
				delete(s.moved[w.Name], k)
			}
		}
		if p == nil {
			affected = append(affected, w)
			continue
		}
		for _, g := range p.Groups {
			k := PoolOf(pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType}, g.Capacity)
			if isBlocked[k] {
				hit = true
				hits[w.Name] = append(hits[w.Name], k)
			}
		}
		if hit {
			affected = append(affected, w)
		}
	}
	if len(affected) > 0 {
		sub := *pol
		sub.Workloads = affected
		if part, err := optimizer.Solve(optimizer.Input{Catalog: s.cat, Policy: &sub, Now: t, Unavailable: u.Func(t), PoolLimit: u.LimitFunc(t), Replan: true}); err == nil {
			for i := range part.Placements {
				byName[part.Placements[i].Workload] = &part.Placements[i]
			}
			for w, ks := range hits {
				if s.moved == nil {
					s.moved = map[string]map[providers.PoolKey]bool{}
				}
				if s.moved[w] == nil {
					s.moved[w] = map[providers.PoolKey]bool{}
				}
				for _, k := range ks {
					s.moved[w][k] = true
				}
			}
		}
		// A failed solve (blocking left a workload nowhere to go) keeps the
		// last placements until a block runs out, as a full solve does.
	}
	for w, ks := range s.moved {
		if len(ks) == 0 {
			delete(s.moved, w)
		}
	}
	plan := *s.plan
	plan.Placements = s.bufs.empty(len(pol.Workloads), s.reuse)
	for _, w := range pol.Workloads {
		if p := byName[w.Name]; p != nil {
			plan.Placements = append(plan.Placements, *p)
		}
	}
	s.plan, s.pol, s.version = &plan, pol, version
	s.setExpiry(blocked)
	return &plan
}

// onlyRemoved reports whether next is prev with some workloads taken out
// and nothing else changed.
func onlyRemoved(prev, next *policy.Policy) bool {
	if prev == nil || next == nil || len(next.Workloads) > len(prev.Workloads) {
		return false
	}
	a, b := *prev, *next
	a.Workloads, b.Workloads = nil, nil
	if !reflect.DeepEqual(&a, &b) {
		return false
	}
	i := 0
	for k := range next.Workloads {
		w := &next.Workloads[k]
		for i < len(prev.Workloads) && prev.Workloads[i].Name != w.Name {
			i++
		}
		// Pointers: DeepEqual on the structs boxed two copies of each.
		if i == len(prev.Workloads) || !reflect.DeepEqual(&prev.Workloads[i], w) {
			return false
		}
		i++
	}
	return true
}
