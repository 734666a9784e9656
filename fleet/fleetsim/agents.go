package fleetsim

import (
	"context"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// agents are the simulated agents: an instance's agent registers a ready
// delay after the instance runs, heartbeats until the instance goes (every
// listing says it beat just now), reports a preemption notice, and carries
// its service's GPU utilisation. It implements fleet.Agents and the agents
// side of fleet.AgentLoad.
type agents struct {
	now  func() time.Time
	recs map[string]*store.InstanceRecord
	byWL map[string]map[string]*store.InstanceRecord
	// all is recs sorted by id, rebuilt after an agent comes or goes: the
	// reconciler lists every agent every pass.
	all []*store.InstanceRecord
	// util is each inference service's per-replica utilisation (0..1).
	util map[string]float64
}

func newAgents(now func() time.Time) *agents {
	return &agents{now: now, recs: map[string]*store.InstanceRecord{}, byWL: map[string]map[string]*store.InstanceRecord{}, util: map[string]float64{}}
}

// ListInstances implements fleet.Agents: every registered agent, or those of
// one workload and state, sorted by id.
func (a *agents) ListInstances(_ context.Context, workload, state string) ([]store.InstanceRecord, error) {
	now := a.now()
	var recs []*store.InstanceRecord
	if workload != "" {
		// The autoscaler samples one service at a time.
		for _, r := range a.byWL[workload] {
			recs = append(recs, r)
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	} else {
		if a.all == nil {
			a.all = make([]*store.InstanceRecord, 0, len(a.recs))
			for _, r := range a.recs {
				a.all = append(a.all, r)
			}
			sort.Slice(a.all, func(i, j int) bool { return a.all[i].ID < a.all[j].ID })
		}
		recs = a.all
	}
	out := make([]store.InstanceRecord, 0, len(recs))
	for _, r := range recs {
		if state != "" && r.State != state {
			continue
		}
		x := *r
		x.LastHeartbeat = now
		x.Utilization = a.util[r.Workload]
		out = append(out, x)
	}
	return out, nil
}

func (a *agents) add(r *store.InstanceRecord) {
	a.all = nil
	a.recs[r.ID] = r
	if a.byWL[r.Workload] == nil {
		a.byWL[r.Workload] = map[string]*store.InstanceRecord{}
	}
	a.byWL[r.Workload][r.ID] = r
}

func (a *agents) remove(id string) {
	if r := a.recs[id]; r != nil {
		a.all = nil
		delete(a.byWL[r.Workload], id)
		delete(a.recs, id)
	}
}
