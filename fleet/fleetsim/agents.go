package fleetsim

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/fleet/autoscale"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// agents are the simulated agents: an instance's agent registers a ready
// delay after the instance runs, heartbeats until the instance goes (every
// listing says it beat just now), reports a preemption notice, and carries
// its service's GPU utilisation. It implements fleet.Agents and the agents
// side of fleet.AgentLoad.
type agents struct {
	// mu guards everything below: the reconciler lists the agents while
	// its plan chain (autoscaling, hedging) lists them on another
	// goroutine.
	mu   sync.Mutex
	now  func() time.Time
	recs map[string]*store.InstanceRecord
	byWL map[string]map[string]*store.InstanceRecord
	// all is recs sorted by id, rebuilt after an agent comes or goes: the
	// reconciler lists every agent every pass. sorted is the same per
	// workload, rebuilt after one of the workload's agents comes or goes:
	// the autoscaler lists each service's agents every pass.
	all    []*store.InstanceRecord
	sorted map[string][]*store.InstanceRecord
	// running counts each workload's agents in state running (runningOf).
	running map[string]int
	// util is each inference service's per-replica utilisation (0..1).
	util map[string]float64
	// lists caches ListInstances' answers, by workload and state, until an
	// agent comes, goes or changes, a utilisation changes (gen moves) or
	// the clock moves: the reconciler, the autoscaler and hedging list the
	// same agents several times a pass. Every caller shares an answer and
	// only reads it.
	lists map[[2]string]*agentList
	gen   int
}

// agentList is one cached answer: taken at at, for the agents' gen. An
// answer of an earlier instant lends its memory to the next: a simulated
// pass reads, plans and acts at one instant, and nothing keeps an answer
// across passes (the reconciler's pass, the hedging stage and the
// autoscaler's samples read it within the pass), so by the time the clock
// moves every reader is done with it. An answer dropped within an instant
// (the agents changed) may still be read in that pass and is never reused.
type agentList struct {
	out []store.InstanceRecord
	at  time.Time
	gen int
}

func newAgents(now func() time.Time) *agents {
	return &agents{now: now, recs: map[string]*store.InstanceRecord{}, byWL: map[string]map[string]*store.InstanceRecord{}, util: map[string]float64{},
		running: map[string]int{}}
}

// ListInstances implements fleet.Agents: every registered agent, or those of
// one workload and state, sorted by id. The answer is shared with every
// caller until the agents change (see lists): the fleet's readers only
// read it.
func (a *agents) ListInstances(_ context.Context, workload, state string) ([]store.InstanceRecord, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	key := [2]string{workload, state}
	e := a.lists[key]
	if e != nil && e.at.Equal(now) && e.gen == a.gen {
		return e.out, nil
	}
	var recs []*store.InstanceRecord
	if workload != "" {
		recs = a.sortedOf(workload)
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
	var out []store.InstanceRecord
	if e != nil && !e.at.Equal(now) && e.out != nil && cap(e.out) >= len(recs) {
		out = e.out[:0] // an earlier instant's: its readers are done
	} else {
		out = make([]store.InstanceRecord, 0, len(recs))
	}
	for _, r := range recs {
		if state != "" && r.State != state {
			continue
		}
		x := *r
		x.LastHeartbeat = now
		x.Utilization = a.util[r.Workload]
		out = append(out, x)
	}
	if e == nil {
		if a.lists == nil {
			a.lists = map[[2]string]*agentList{}
		}
		e = &agentList{}
		a.lists[key] = e
	}
	e.out, e.at, e.gen = out, now, a.gen
	return out, nil
}

// sortedOf is the workload's agents sorted by id (a.mu held).
func (a *agents) sortedOf(workload string) []*store.InstanceRecord {
	recs, ok := a.sorted[workload]
	if !ok {
		for _, r := range a.byWL[workload] {
			recs = append(recs, r)
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
		if a.sorted == nil {
			a.sorted = map[string][]*store.InstanceRecord{}
		}
		a.sorted[workload] = recs
	}
	return recs
}

// agentLoad is the autoscaling stage's load source in the simulator:
// fleet.AgentLoad's samples, read from the agents without listing them.
// AgentLoad lists a service's running agents (a copy of each record, every
// service, every pass) for their heartbeats and utilisations; a simulated
// agent beats at every instant and carries its service's utilisation, so
// the sample is the same counted in place.
type agentLoad struct{ a *agents }

// Sample implements fleet.LoadSource as fleet.AgentLoad{Agents: a} does
// (its default freshness; a Prometheus metric is read by AgentLoad).
func (l agentLoad) Sample(ctx context.Context, w policy.Workload, now time.Time) (autoscale.Sample, error) {
	if w.Autoscale.Prometheus != nil {
		return fleet.AgentLoad{Agents: l.a}.Sample(ctx, w, now)
	}
	var s autoscale.Sample
	a := l.a
	beat := a.now() // every listed agent's LastHeartbeat
	if beat.IsZero() || now.Sub(beat) > agentLoadFresh {
		return s, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.sortedOf(w.Name) {
		if r.State != store.StateRunning {
			continue
		}
		s.Ready++
		s.Utilization = append(s.Utilization, a.util[r.Workload])
	}
	return s, nil
}

// agentLoadFresh is fleet.AgentLoad's default Fresh.
const agentLoadFresh = 2 * time.Minute

// changed drops the cached lists (a.mu held).
func (a *agents) changed() { a.gen++ }

// setUtil sets a service's per-replica utilisation.
func (a *agents) setUtil(workload string, u float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.util[workload]; !ok || old != u {
		a.util[workload] = u
		a.changed()
	}
}

// preempting marks an agent as reporting a preemption notice.
func (a *agents) preempting(id string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.recs[id]; r != nil {
		a.countRunning(r, -1)
		r.State, r.PreemptAt = store.StatePreempting, at
		a.changed()
	}
}

func (a *agents) add(r *store.InstanceRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs[r.ID] != nil {
		// Registered again: the lists are rebuilt.
		a.all = nil
		clear(a.sorted)
	} else {
		// The sorted lists take the agent in place (sorting thousands
		// after every agent that came was a hundredth of a month's CPU).
		if a.all != nil { // (nil: not built)
			a.all = insertByID(a.all, r)
		}
		if l, ok := a.sorted[r.Workload]; ok { // (built, perhaps empty)
			a.sorted[r.Workload] = insertByID(l, r)
		}
	}
	a.changed()
	a.recs[r.ID] = r
	a.countRunning(r, 1)
	if a.byWL[r.Workload] == nil {
		a.byWL[r.Workload] = map[string]*store.InstanceRecord{}
	}
	a.byWL[r.Workload][r.ID] = r
}

func (a *agents) remove(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.recs[id]; r != nil {
		a.all = deleteByID(a.all, id)
		if l, ok := a.sorted[r.Workload]; ok {
			a.sorted[r.Workload] = deleteByID(l, id)
		}
		a.changed()
		delete(a.byWL[r.Workload], id)
		delete(a.recs, id)
		a.countRunning(r, -1)
	}
}

// insertByID adds r to recs sorted by id.
func insertByID(recs []*store.InstanceRecord, r *store.InstanceRecord) []*store.InstanceRecord {
	i, _ := slices.BinarySearchFunc(recs, r.ID, byID)
	return slices.Insert(recs, i, r)
}

// deleteByID takes the record id out of recs sorted by id.
func deleteByID(recs []*store.InstanceRecord, id string) []*store.InstanceRecord {
	if i, found := slices.BinarySearchFunc(recs, id, byID); found {
		return slices.Delete(recs, i, i+1)
	}
	return recs
}

func byID(r *store.InstanceRecord, id string) int { return strings.Compare(r.ID, id) }

// countRunning adds d to r's workload's running count if r is running
// (a.mu held).
func (a *agents) countRunning(r *store.InstanceRecord, d int) {
	if r.State != store.StateRunning {
		return
	}
	if n := a.running[r.Workload] + d; n > 0 {
		a.running[r.Workload] = n
	} else {
		delete(a.running, r.Workload)
	}
}

// runningOf is the workload's count of running agents (registered, not
// preempting). The simulator asks per workload: a copy of every count, three
// times an instant, was a hundredth of a month's CPU on its goroutine.
func (a *agents) runningOf(workload string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running[workload]
}
