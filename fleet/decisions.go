package fleet

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/policy"
)

// Stage names of a Decision.
const (
	StageTraining  = "training"
	StageInference = "inference"
)

// Decision is one workload's latest live spot decision, for status
// (GET /api/v1/fleet, `gpubroker fleet status`).
type Decision struct {
	Workload string
	// Stage is StageTraining (TrainingSource) or StageInference
	// (HedgedSource).
	Stage  string
	Policy string
	// Action is what the stage asked for: "spot <cloud>/<zone>/<instance
	// type>", "on-demand" or "wait" for a job; for a service its spot
	// replicas per pool and on-demand replicas, as in "spot
	// aws/us-east-1a/g5.xlarge×2 + on-demand×1".
	Action string
	Reason string
	At     time.Time
	Tick   int

	// Training only. Done is the fraction of the work done (reported by
	// the job when Reported, else estimated); Deadline is the job's start
	// plus its deadline.
	Done     float64
	Reported bool
	Deadline time.Time

	// Inference only: spot replicas per pool ("cloud/zone/instance type"),
	// on-demand replicas, and the replicas the service needs and has ready.
	Spot     map[string]int
	OnDemand int
	Target   int
	Ready    int
	// The service's availability goal (0: none) over Window, and its
	// error budget: the time below target the goal allows, and what is
	// left (negative once spent).
	Goal       float64
	Window     time.Duration
	Budget     time.Duration
	BudgetLeft time.Duration
}

// TimeLeft is the time from now to the job's deadline (negative past it);
// 0 for a service.
func (d Decision) TimeLeft(now time.Time) time.Duration {
	if d.Deadline.IsZero() {
		return 0
	}
	return d.Deadline.Sub(now)
}

// trainingDecisions and hedgeDecisions are what DecisionBoard reads of the
// live stages (*TrainingSource, *HedgedSource).
type trainingDecisions interface {
	Decisions() map[string]TrainingDecision
}

type hedgeDecisions interface {
	Decisions() map[string]HedgeDecision
}

// DecisionBoard collects the live spot stages' latest decisions. Give one
// to ChainConfig.Decisions and NewPlanChain wires the stages it builds to
// it; the board lives as long as the chain and holds nothing of its own:
// the decisions are the stages' in-memory state, so only the process that
// runs the chain (the leader) has any.
type DecisionBoard struct {
	training trainingDecisions
	hedged   hedgeDecisions
}

// List returns every live workload's latest decision, training jobs then
// services, each by name. Workloads the stages know but have not decided
// for yet are left out.
func (b *DecisionBoard) List() []Decision {
	if b == nil {
		return nil
	}
	var out []Decision
	if b.training != nil {
		out = appendDecided(out, b.training.Decisions(), func(d TrainingDecision) time.Time { return d.At }, trainingDecision)
	}
	if b.hedged != nil {
		out = appendDecided(out, b.hedged.Decisions(), func(d HedgeDecision) time.Time { return d.At }, hedgeDecision)
	}
	return out
}

// appendDecided appends the stage's decisions by workload name, leaving out
// those not taken yet (zero time).
func appendDecided[D any](out []Decision, ds map[string]D, at func(D) time.Time, conv func(string, D) Decision) []Decision {
	for _, name := range slices.Sorted(maps.Keys(ds)) {
		if d := ds[name]; !at(d).IsZero() {
			out = append(out, conv(name, d))
		}
	}
	return out
}

// spotPoolOf names the spot pool of a decision for status
// ("cloud/zone/instance type"), "" when it is not spot.
func spotPoolOf(pools []livePool, a spotpolicy.Action) string {
	if a.Capacity != spotpolicy.Spot || a.Pool >= len(pools) {
		return ""
	}
	o := *pools[a.Pool].offer
	return string(o.Cloud) + "/" + zoneOf(o) + "/" + o.InstanceType
}

// setPool sets j.pool to spotPoolOf(pools, a), made anew only when the
// pool is not the one it names (every job, every plan).
func (j *liveJob) setPool(pools []livePool, a spotpolicy.Action) {
	if a.Capacity != spotpolicy.Spot || a.Pool >= len(pools) {
		j.pool = ""
		return
	}
	o := pools[a.Pool].offer
	k := [3]string{string(o.Cloud), o.Zone, o.InstanceType}
	if k[1] == "" {
		k[1] = o.Region // (zoneOf)
	}
	if j.pool == "" || j.poolFor != k {
		j.pool, j.poolFor = spotPoolOf(pools, a), k
	}
}

func trainingDecision(name string, d TrainingDecision) Decision {
	action := d.Action
	switch action {
	case "spot":
		if d.Pool != "" {
			action += " " + d.Pool
		}
	case "none":
		action = "wait"
	}
	done := 0.0
	if d.Work > 0 {
		done = min(1, max(0, d.Done/d.Work))
	}
	return Decision{Workload: name, Stage: StageTraining, Policy: d.Policy, Action: action, Reason: d.Reason, At: d.At, Tick: d.Tick,
		Done: done, Reported: d.Reported, Deadline: d.Deadline}
}

func hedgeDecision(name string, d HedgeDecision) Decision {
	pools := make([]string, 0, len(d.Spot))
	for p, n := range d.Spot {
		if n > 0 {
			pools = append(pools, p)
		}
	}
	sort.Strings(pools)
	var parts []string
	for _, p := range pools {
		parts = append(parts, fmt.Sprintf("spot %s×%d", p, d.Spot[p]))
	}
	if d.OnDemand > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("on-demand×%d", d.OnDemand))
	}
	reason := fmt.Sprintf("%d replicas needed, %d ready", d.Target, d.Ready)
	out := Decision{Workload: name, Stage: StageInference, Policy: d.Policy, Action: strings.Join(parts, " + "),
		At: d.At, Tick: d.Tick, Spot: maps.Clone(d.Spot), OnDemand: d.OnDemand, Target: d.Target, Ready: d.Ready}
	if d.Goal > 0 {
		out.Goal, out.Window = d.Goal, d.Window
		out.Budget = time.Duration(d.BudgetSeconds * float64(time.Second)).Round(time.Second)
		out.BudgetLeft = time.Duration(d.BudgetLeftSeconds * float64(time.Second)).Round(time.Second)
		// What the hedge is sized against: with little left it insures
		// harder (docs/fleet.md).
		budget := fmt.Sprintf("error budget of %s spent", out.Budget)
		if out.BudgetLeft > 0 {
			budget = fmt.Sprintf("error budget %s of %s left", out.BudgetLeft, out.Budget)
		}
		reason += fmt.Sprintf("; %s (%.4g%% over %s)", budget, 100*d.Goal, policy.FormatDuration(d.Window))
	}
	out.Reason = reason
	return out
}
