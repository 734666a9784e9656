package fleet

import (
	"fmt"
	"strconv"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// State is a slot's state. A slot moves
//
//	pending → launching → booting → running → draining → (launching …) | gone
//
// and every move is recorded as an event of kind "fleet.slot".
type State string

// Slot states.
const (
	// Pending: the slot has no instance and no launch in flight.
	Pending State = "pending"
	// Launching: a launch intent is recorded; the cloud call is in flight
	// or will be retried with the same token.
	Launching State = "launching"
	// Booting: the cloud has the instance; its agent has not registered.
	Booting State = "booting"
	// Running: the agent registered and sends heartbeats.
	Running State = "running"
	// Draining: the instance is going away (preemption notice, drain
	// report, lost heartbeat, removed from the plan); a replacement follows
	// unless the slot is gone from the plan.
	Draining State = "draining"
	// Gone: the slot left the plan and its instance is terminated.
	Gone State = "gone"
)

// States lists the slot states in lifecycle order.
var States = []State{Pending, Launching, Booting, Running, Draining, Gone}

// transitions are the allowed moves; anything else is a bug.
var transitions = map[State][]State{
	Pending:   {Launching, Draining, Gone},
	Launching: {Pending, Booting, Draining, Gone},
	Booting:   {Running, Draining, Gone},
	Running:   {Draining, Gone},
	Draining:  {Pending, Launching, Gone},
	Gone:      {Pending},
}

// CanMove reports whether a slot may move from one state to another.
func CanMove(from, to State) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Spec is one desired slot: where the plan wants one instance.
type Spec struct {
	ID       string
	Workload string
	Kind     string
	Index    int
	// Offer is the planned pool (cloud, region, zone, instance type, GPU).
	Offer    pricing.Offer
	Capacity pricing.CapacityType
	// PricePerHour is the instance's price, USD.
	PricePerHour float64
	// Alternatives are further offers of the same cloud to try in the same
	// launch, best first (the plan's runner-up where it fits).
	Alternatives []pricing.Offer
	// Move asks for a running instance elsewhere to be replaced by one
	// here (optimizer.Group.Move, set by the live training stage).
	Move bool
}

// SlotID is the stable identity of the index-th instance of a workload.
func SlotID(workload string, index int) string { return workload + "/" + strconv.Itoa(index) }

// Desired turns a plan into slots: one per instance of a training or batch
// job, one per inference replica (hedge replicas included), numbered in
// the plan's group order so the same plan gives the same identities, or by
// the groups' pinned Slots where a live stage set them.
func Desired(plan *optimizer.Plan) []Spec { return desiredIn(nil, plan, nil) }

// slotIDs are SlotID's answers kept by workload and index (a pass's specs
// over the last pass's rename every slot after a placement that grew or
// shrank: a new string each, every pass).
type slotIDs map[string][]string

// id is SlotID(workload, index), from ids when kept (ids may be nil).
func (ids slotIDs) id(workload string, index int) string {
	if ids == nil || index < 0 || index > 4096 {
		return SlotID(workload, index)
	}
	l := ids[workload]
	if index < len(l) && l[index] != "" {
		return l[index]
	}
	if index >= len(l) {
		l = append(l, make([]string, index+1-len(l))...)
	}
	l[index] = SlotID(workload, index)
	ids[workload] = l
	return l[index]
}

// desiredIn is Desired in buf's memory, which may hold an earlier answer:
// a slot's id string is taken from the entry it replaces when that was the
// same slot (plans change little from pass to pass).
func desiredIn(buf []Spec, plan *optimizer.Plan, ids slotIDs) []Spec {
	if plan == nil {
		return nil
	}
	n := 0
	for i := range plan.Placements {
		// (By index: a placement and a group are large, and this runs for
		// every placement at every plan.)
		for j := range plan.Placements[i].Groups {
			n += max(0, plan.Placements[i].Groups[j].Instances)
		}
	}
	if n == 0 {
		return nil
	}
	out := buf[:0]
	if cap(out) < n {
		out = make([]Spec, 0, n) // sized once: a pass builds it and re-plans rebuild it
	}
	old := out[:cap(out)]
	for pi := range plan.Placements {
		p := &plan.Placements[pi]
		var alt []pricing.Offer
		gang := p.Kind != string(policy.Inference) && placementInstances(*p) > 1
		// A multi-instance job's instances must share a pool: one of them
		// launched in the runner-up's pool would leave the job split.
		if r := p.RunnerUp; r != nil && !gang && r.Capacity == p.Capacity && r.Cloud == p.Cloud && r.InstanceType != "" {
			alt = []pricing.Offer{{Cloud: r.Cloud, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, GPU: r.GPU}}
		}
		idx := 0
		for gi := range p.Groups {
			g := &p.Groups[gi]
			for j := range g.Instances {
				var a []pricing.Offer
				for _, o := range alt {
					if o.Zone != g.Zone || o.InstanceType != g.InstanceType {
						a = append(a, o)
					}
				}
				slot := idx
				if len(g.Slots) == g.Instances {
					slot = g.Slots[j] // pinned by a live stage (HedgedSource)
				}
				i := len(out)
				id := old[i].ID
				if old[i].Index != slot || old[i].Workload != p.Workload || id == "" {
					id = ids.id(p.Workload, slot)
				}
				out = append(out, Spec{ID: id, Workload: p.Workload, Kind: p.Kind, Index: slot,
					Offer: pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType,
						GPU: g.GPU, GPUCount: g.GPUsPerInstance},
					Capacity: g.Capacity, PricePerHour: g.PricePerHour, Alternatives: a, Move: g.Move})
				idx++
			}
		}
	}
	return out
}

// placementInstances is the instances of all of p's groups.
func placementInstances(p optimizer.Placement) int {
	n := 0
	for _, g := range p.Groups {
		n += max(0, g.Instances)
	}
	return n
}

func (s Spec) String() string {
	return fmt.Sprintf("%s %s/%s %s %s", s.ID, s.Offer.Cloud, zoneOf(s.Offer), s.Offer.InstanceType, s.Capacity)
}

func zoneOf(o pricing.Offer) string {
	if o.Zone != "" {
		return o.Zone
	}
	return o.Region
}
