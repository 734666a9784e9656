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
	// Unavailable is consulted for when blocks run out.
	Unavailable *Unavailable

	mu      sync.Mutex
	plan    *optimizer.Plan
	cat     *pricing.Catalog
	pol     *policy.Policy
	version int
	expires time.Time
}

// Plan returns the current plan.
func (s *SolverSource) Plan(_ context.Context, unavailable func(o *pricing.Offer, ct pricing.CapacityType) bool, version int) (*optimizer.Plan, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now()
	cat, pol := s.Catalog(), s.Policy()
	if pol == nil {
		return nil, fmt.Errorf("no policy loaded")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plan != nil && cat == s.cat && pol == s.pol && version == s.version && (s.expires.IsZero() || t.Before(s.expires)) {
		return s.plan, nil
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: t, Unavailable: unavailable})
	if err != nil {
		if s.plan != nil && s.blockedCount(t) > 0 {
			// Blocking left a workload nowhere to go: keep the last plan
			// (its slots wait in pending) until a block runs out.
			s.version = version
			return s.plan, nil
		}
		return nil, fmt.Errorf("planning with %d blocked pools: %w", s.blockedCount(t), err)
	}
	s.plan, s.cat, s.pol, s.version = plan, cat, pol, version
	s.expires = time.Time{}
	if s.Unavailable != nil {
		for _, e := range s.Unavailable.Entries(t) {
			if s.expires.IsZero() || e.Until.Before(s.expires) {
				s.expires = e.Until
			}
		}
	}
	return plan, nil
}

func (s *SolverSource) blockedCount(t time.Time) int {
	if s.Unavailable == nil {
		return 0
	}
	return len(s.Unavailable.Entries(t))
}
