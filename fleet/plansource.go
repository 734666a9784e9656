package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// SolverSource plans the policy on the catalog with the optimizer, with
// the blocked pools ruled out. It re-plans only when the catalog, the
// policy or the blocked pools changed, or a block ran out, so a pass
// normally costs no solve.
type SolverSource struct {
	Catalog func() *pricing.Catalog
	Policy  func() *policy.Policy
	Now     func() time.Time

	mu      sync.Mutex
	plan    *optimizer.Plan
	cat     *pricing.Catalog
	pol     *policy.Policy
	version int
	u       *Unavailable
	expires time.Time
}

// Plan returns the current plan.
func (s *SolverSource) Plan(_ context.Context, u *Unavailable) (*optimizer.Plan, error) {
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
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: t, Unavailable: u.Func(t)})
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
	s.expires = time.Time{}
	for _, e := range blocked {
		if s.expires.IsZero() || e.Until.Before(s.expires) {
			s.expires = e.Until
		}
	}
	return plan, nil
}
