package fleet

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet/ledger"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// SpotOnlySource enforces the budget action spot-only: while a budget with
// that action over a workload has reached 100% this month, the workload is
// planned as spot_policy only (where its spot policy is prefer; never stays
// never), so every later stage and the reconciler see it spot-only until
// the month ends. A workload with no spot offer its limits admit stays as
// it is, and the log says so once a month. Policy is the policy as the
// user wrote it; Current is the one the chain plans with.
type SpotOnlySource struct {
	Inner   PlanSource
	Policy  func() *policy.Policy
	Catalog func() *pricing.Catalog
	// SpotOnly says a spot-only budget over w reached 100% this month.
	SpotOnly func(ctx context.Context, w policy.Workload, now time.Time) bool
	Now      func() time.Time
	Log      *slog.Logger

	mu      sync.Mutex
	base    *policy.Policy
	names   string // the workloads moved, comma-separated
	derived *policy.Policy
	current *policy.Policy
	said    map[string]time.Time // workload → month start it was logged in
}

// Current is the policy the chain plans with (Policy with the spot-only
// workloads moved); stages after this one read it.
func (s *SpotOnlySource) Current() *policy.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return s.Policy()
	}
	return s.current
}

// Plan refreshes Current and plans with it. When the inner source cannot
// plan the spot-only policy, it plans the user's policy instead, so a spent
// budget never leaves the fleet without a plan.
func (s *SpotOnlySource) Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error) {
	base := s.Policy()
	pol := s.refresh(ctx, base)
	plan, err := s.Inner.Plan(ctx, u)
	if err != nil && pol != base {
		s.log().Warn("budget spot-only: planning the moved workloads on spot failed; planning them as written", "workloads", s.names, "err", err)
		s.mu.Lock()
		s.current = base
		s.mu.Unlock()
		return s.Inner.Plan(ctx, u)
	}
	return plan, err
}

func (s *SpotOnlySource) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *SpotOnlySource) refresh(ctx context.Context, base *policy.Policy) *policy.Policy {
	if base == nil || s.SpotOnly == nil {
		s.mu.Lock()
		s.current = base
		s.mu.Unlock()
		return base
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	var cat *pricing.Catalog
	if s.Catalog != nil {
		cat = s.Catalog()
	}
	var moved []string
	for _, w := range base.Workloads {
		if w.Spot != policy.SpotPrefer || !s.SpotOnly(ctx, w, now) {
			continue
		}
		if !hasSpotOffer(cat, base, w) {
			s.sayOnce(w.Name, now, "budget spot-only reached, but no spot offer fits the workload; it stays as planned")
			continue
		}
		s.sayOnce(w.Name, now, "budget spot-only reached: planning the workload on spot only until the month ends")
		moved = append(moved, w.Name)
	}
	names := strings.Join(moved, ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(moved) == 0 {
		s.base, s.names, s.derived, s.current = base, "", nil, base
		return base
	}
	if base != s.base || names != s.names || s.derived == nil {
		// A new pointer only when something changed: SolverSource
		// re-solves when the policy pointer moves.
		d := *base
		d.Workloads = slices.Clone(base.Workloads)
		for i := range d.Workloads {
			if slices.Contains(moved, d.Workloads[i].Name) {
				d.Workloads[i].Spot = policy.SpotOnly
			}
		}
		s.base, s.names, s.derived = base, names, &d
	}
	s.current = s.derived
	return s.derived
}

// sayOnce logs msg for a workload once per month.
func (s *SpotOnlySource) sayOnce(workload string, now time.Time, msg string) {
	month := ledger.MonthStart(now)
	s.mu.Lock()
	if s.said == nil {
		s.said = map[string]time.Time{}
	}
	done := s.said[workload+"\x00"+msg].Equal(month)
	s.said[workload+"\x00"+msg] = month
	s.mu.Unlock()
	if !done {
		s.log().Warn(msg, "workload", workload, "month", month.Format("2006-01"))
	}
}

// hasSpotOffer says whether some spot offer fits w: a GPU model and count
// it accepts, in a place its limits admit.
func hasSpotOffer(cat *pricing.Catalog, p *policy.Policy, w policy.Workload) bool {
	if cat == nil {
		return false
	}
	count := max(1, w.GPU.Count)
	for _, o := range cat.Offers() {
		if o.SpotPrice <= 0 || !w.AllowsGPU(o.GPU, o.GPUMemoryGiB) || !policy.RegionAllowed(p, &w, o.Cloud, o.Region, o.Zone) {
			continue
		}
		if w.Kind == policy.Inference && o.GPUCount != count {
			continue
		}
		if w.Kind != policy.Inference && (o.GPUCount > count || count%o.GPUCount != 0) {
			continue
		}
		return true
	}
	return false
}
