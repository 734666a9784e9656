package apiv1

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Fleet routes (docs/fleet.md).
const (
	PathFleet       = Prefix + "/fleet"
	PathFleetDiff   = Prefix + "/fleet/diff"
	PathFleetPause  = Prefix + "/fleet/pause"
	PathFleetResume = Prefix + "/fleet/resume"
	// PathFleetReplace is POST …/fleet/instances/{id}/replace (FleetReplaceRequest
	// body, optional): the leader replaces the instance at its next pass.
	PathFleetReplace = Prefix + "/fleet/instances/{id}/replace"
)

// Fleet modes.
const (
	FleetDryRun = "dry-run"
	FleetApply  = "apply"
)

// FleetStatus is GET /api/v1/fleet: every slot with its instance and
// agent health, the orphans, the blocked pools and the kill switch.
type FleetStatus struct {
	At       time.Time      `json:"at"`
	Mode     string         `json:"mode"`
	Paused   bool           `json:"paused"`
	PausedBy string         `json:"paused_by,omitempty"`
	ByState  map[string]int `json:"by_state"`
	Slots    []FleetSlot    `json:"slots"`
	// Orphans are broker-tagged instances no slot owns; they are
	// terminated after the grace period.
	Orphans []FleetInstance `json:"orphans"`
	// Blocked are the pools in the unavailable-offerings cache, as the
	// answering replica knows them (the leader's view is the one that acts).
	Blocked []BlockedPool `json:"blocked"`
	// Limited are the pools seen to hold fewer instances than a job asked
	// for (a launch refused beside the job's own instances there): no job
	// of more instances of that type is planned there until Until. As the
	// answering replica knows them, like Blocked.
	Limited []LimitedPool `json:"limited"`
	// LastPass is the answering replica's latest pass; absent on followers.
	LastPass *FleetReport `json:"last_pass,omitempty"`
	// Decisions are the live spot policies' latest decisions, one per
	// deadline job (training stage) and hedged service (inference stage).
	// They live in the leader's memory: DecisionsFrom says whether this
	// replica has them (DecisionsFromLeader) or not (DecisionsNone: a
	// follower; ask the leader). Empty on the leader until a stage ran.
	Decisions     []FleetDecision `json:"decisions"`
	DecisionsFrom string          `json:"decisions_from"`
	// Replacing are the replacement requests not acted on yet (the
	// leader's next acting pass does; dry-run and pause keep them).
	Replacing []FleetReplace `json:"replacing"`
}

// FleetStatus.DecisionsFrom values.
const (
	DecisionsFromLeader = "leader"
	DecisionsNone       = "none on this replica"
)

// FleetDecision is one workload's latest live spot decision.
type FleetDecision struct {
	Workload string `json:"workload"`
	// Stage is "training" (a deadline job's spot policy) or "inference"
	// (a service's spot hedging).
	Stage  string `json:"stage"`
	Policy string `json:"policy"`
	// Action is "spot <cloud>/<zone>/<instance type>", "on-demand" or
	// "wait" for a job; for a service its spot replicas per pool and its
	// on-demand replicas ("spot aws/us-east-1a/g4dn.xlarge×2 + on-demand×1").
	Action string    `json:"action"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	// Tick is the policy's decision tick since the workload started.
	Tick int `json:"tick"`
	// Progress is a job's (training stage only).
	Progress *FleetProgress `json:"progress,omitempty"`
	// Replicas are a service's (inference stage only).
	Replicas *FleetReplicas `json:"replicas,omitempty"`
}

// FleetProgress is a training job's progress as its policy saw it.
type FleetProgress struct {
	// Done is the fraction of the work done, 0 to 1: reported by the job
	// through its agent when Reported, else estimated from its running
	// time.
	Done     float64 `json:"done"`
	Reported bool    `json:"reported"`
	// Deadline is the job's start plus its deadline; TimeLeftSeconds is
	// from the status's At to it (negative once past).
	Deadline        time.Time `json:"deadline"`
	TimeLeftSeconds float64   `json:"time_left_seconds"`
}

// FleetReplicas is a hedged service's decision in replicas.
type FleetReplicas struct {
	// Spot is replicas per spot pool ("cloud/zone/instance type").
	Spot     map[string]int `json:"spot"`
	OnDemand int            `json:"on_demand"`
	// Target is the replicas the service needs, Ready those serving.
	Target int `json:"target"`
	Ready  int `json:"ready"`
	// Availability is the service's availability goal and its error
	// budget, as the hedge last saw it (absent: no goal).
	Availability *FleetAvailability `json:"availability,omitempty"`
}

// FleetAvailability is a service's availability goal (the policy's
// availability: goal, window) and its error budget: the time below target
// the goal allows over the window, and what is left of it, negative once
// spent. The leader keeps the time below target in the store, so the
// budget carries over a leader change.
type FleetAvailability struct {
	Goal              float64 `json:"goal"`
	WindowSeconds     float64 `json:"window_seconds"`
	BudgetSeconds     float64 `json:"budget_seconds"`
	BudgetLeftSeconds float64 `json:"budget_left_seconds"`
}

// FleetSlot is one slot: where one instance of a workload must run.
type FleetSlot struct {
	// ID is "<workload>/<index>", stable across re-plans.
	ID           string  `json:"id"`
	Workload     string  `json:"workload"`
	Kind         string  `json:"kind"`
	Index        int     `json:"index"`
	Cloud        string  `json:"cloud"`
	Region       string  `json:"region"`
	Zone         string  `json:"zone"`
	InstanceType string  `json:"instance_type"`
	GPU          string  `json:"gpu"`
	Capacity     string  `json:"capacity"`
	PricePerHour float64 `json:"price_per_hour"`
	// State is pending, launching, booting, running, draining or gone.
	State string `json:"state"`
	// Generation counts the slot's launches.
	Generation    int       `json:"generation"`
	InstanceID    string    `json:"instance_id,omitempty"`
	InstanceState string    `json:"instance_state,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	StateSince    time.Time `json:"state_since"`
	AgeSeconds    float64   `json:"age_seconds"`
	LaunchedAt    time.Time `json:"launched_at,omitzero"`
	RunningAt     time.Time `json:"running_at,omitzero"`
	// Agent is healthy, silent, preempting, draining, drained or none.
	Agent         string    `json:"agent"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}

// FleetInstance is a broker-tagged instance as the fleet last listed it.
type FleetInstance struct {
	ID           string    `json:"id"`
	Cloud        string    `json:"cloud"`
	Region       string    `json:"region"`
	Zone         string    `json:"zone"`
	InstanceType string    `json:"instance_type"`
	Capacity     string    `json:"capacity"`
	State        string    `json:"state"`
	OrphanSince  time.Time `json:"orphan_since,omitzero"`
}

// LimitedPool is a pool with a learned instance limit.
type LimitedPool struct {
	Cloud        string    `json:"cloud"`
	Zone         string    `json:"zone"`
	InstanceType string    `json:"instance_type"`
	Capacity     string    `json:"capacity"`
	Instances    int       `json:"instances"`
	Until        time.Time `json:"until"`
}

// BlockedPool is one pool in the unavailable-offerings cache.
type BlockedPool struct {
	Cloud        string    `json:"cloud"`
	Zone         string    `json:"zone"`
	InstanceType string    `json:"instance_type"`
	Capacity     string    `json:"capacity"`
	Until        time.Time `json:"until"`
	Reason       string    `json:"reason"`
}

// FleetReport is one reconcile pass (GET /api/v1/fleet/diff computes one
// that writes and launches nothing).
type FleetReport struct {
	At        time.Time      `json:"at"`
	Mode      string         `json:"mode"`
	Paused    bool           `json:"paused"`
	Epoch     int64          `json:"epoch,omitempty"`
	TookNS    int64          `json:"took_ns"`
	Slots     int            `json:"slots"`
	ByState   map[string]int `json:"by_state"`
	Instances int            `json:"instances"`
	Actions   []FleetAction  `json:"actions"`
	Errors    []string       `json:"errors,omitempty"`
}

// FleetAction is one thing a pass does or would do.
type FleetAction struct {
	// Kind is launch, retry, adopt, terminate, block, wait or orphan.
	Kind         string `json:"kind"`
	Slot         string `json:"slot,omitempty"`
	Workload     string `json:"workload,omitempty"`
	Instance     string `json:"instance,omitempty"`
	Cloud        string `json:"cloud,omitempty"`
	Zone         string `json:"zone,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	Capacity     string `json:"capacity,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Done is false in dry-run, while paused, when a cap held it back or
	// when it failed (Error).
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// FleetPause is the kill switch as stored.
type FleetPause struct {
	Paused bool      `json:"paused"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// FleetStatus reads the fleet.
func (c *Client) FleetStatus(ctx context.Context) (FleetStatus, error) {
	var out FleetStatus
	err := c.get(ctx, PathFleet, nil, &out)
	return out, err
}

// FleetDiff is what the next reconcile pass would do.
func (c *Client) FleetDiff(ctx context.Context) (FleetReport, error) {
	var out FleetReport
	err := c.get(ctx, PathFleetDiff, nil, &out)
	return out, err
}

// SetFleetPaused turns the kill switch on (pause) or off (resume).
func (c *Client) SetFleetPaused(ctx context.Context, paused bool) (FleetPause, error) {
	path := PathFleetResume
	if paused {
		path = PathFleetPause
	}
	var out FleetPause
	err := c.send(ctx, http.MethodPost, path, nil, &out)
	return out, err
}

// FleetReplaceRequest is the optional body of a replacement request.
type FleetReplaceRequest struct {
	// Reason is recorded with the request and in the slot's events
	// (at most 500 characters).
	Reason string `json:"reason,omitempty"`
}

// FleetReplace is an accepted replacement request (202): the leader's next
// acting pass launches a replacement for the instance's slot and terminates
// the instance.
type FleetReplace struct {
	Instance string    `json:"instance"`
	Reason   string    `json:"reason"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// ReplaceFleetInstance asks the broker to replace one of the fleet's
// instances (a slow host, one you distrust).
func (c *Client) ReplaceFleetInstance(ctx context.Context, id, reason string) (FleetReplace, error) {
	var out FleetReplace
	path := strings.Replace(PathFleetReplace, "{id}", url.PathEscape(id), 1)
	err := c.send(ctx, http.MethodPost, path, FleetReplaceRequest{Reason: reason}, &out)
	return out, err
}
