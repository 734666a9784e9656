// Package instance holds the domain rules about GPU instances that the
// broker's API, the agent and the fleet controller share: the states an
// instance goes through, which notice kinds end it, which event kinds
// exist, and what a notice or a drain report does to an instance.
// Handlers call these functions; they never decide such rules themselves.
//
//	          terminal notice            drain ok
//	running ───────────────► preempting ─────────► drained
//	   │                         │ drain failed         ▲
//	   │ drain failed            ▼                      │ drain ok
//	   └──────────────────► draining ───────────────────┘
//
// A warning notice (rebalance, maintenance) records an event and leaves
// the state alone. Drained is final: a late notice or a repeated report
// does not bring an instance back.
package instance

import (
	"errors"
	"fmt"
	"slices"
)

// State is where an instance is in its life.
type State string

// States.
const (
	Running    State = "running"
	Preempting State = "preempting"
	Draining   State = "draining"
	Drained    State = "drained"
)

// States lists every state, in life order.
func States() []State { return []State{Running, Preempting, Draining, Drained} }

// ParseState checks s.
func ParseState(s string) (State, error) {
	if slices.Contains(States(), State(s)) {
		return State(s), nil
	}
	return "", unknown(fmt.Sprintf("state %q is not valid; use running, preempting, draining or drained", s))
}

// ErrUnknown means a state or kind is not one of the known values.
var ErrUnknown = errors.New("unknown value")

// unknownError is an ErrUnknown whose text is only its message (shown to
// API clients as is).
type unknownError string

func unknown(msg string) error              { return unknownError(msg) }
func (e unknownError) Error() string        { return string(e) }
func (e unknownError) Is(target error) bool { return target == ErrUnknown }

// ErrTransition means a state change is not allowed.
var ErrTransition = errors.New("state change not allowed")

var allowed = map[State][]State{
	Running:    {Preempting, Draining, Drained},
	Preempting: {Draining, Drained},
	Draining:   {Draining, Drained},
	Drained:    {},
}

// Transition checks that an instance in state from may move to state to.
// Staying in the same state is always allowed.
func Transition(from, to State) error {
	if from == to || slices.Contains(allowed[from], to) {
		return nil
	}
	return fmt.Errorf("%w: %s → %s", ErrTransition, from, to)
}

// NoticeKind says what the platform is about to do to a VM.
type NoticeKind string

// Notice kinds.
const (
	NoticePreempt     NoticeKind = "preempt"     // spot capacity reclaimed
	NoticeTerminate   NoticeKind = "terminate"   // the VM is deleted
	NoticeStop        NoticeKind = "stop"        // AWS spot stop
	NoticeHibernate   NoticeKind = "hibernate"   // AWS spot hibernate
	NoticeReboot      NoticeKind = "reboot"      // Azure Reboot: the workload's processes die
	NoticeRedeploy    NoticeKind = "redeploy"    // Azure Redeploy: moved to another host, local disk lost
	NoticeRebalance   NoticeKind = "rebalance"   // AWS rebalance recommendation
	NoticeMaintenance NoticeKind = "maintenance" // live migration, freeze: the workload survives
)

// NoticeKinds lists every notice kind.
func NoticeKinds() []NoticeKind {
	return []NoticeKind{NoticePreempt, NoticeTerminate, NoticeStop, NoticeHibernate, NoticeReboot, NoticeRedeploy,
		NoticeRebalance, NoticeMaintenance}
}

// ParseNoticeKind checks s.
func ParseNoticeKind(s string) (NoticeKind, error) {
	if slices.Contains(NoticeKinds(), NoticeKind(s)) {
		return NoticeKind(s), nil
	}
	return "", unknown(fmt.Sprintf("kind %q is not a notice kind; use preempt, terminate, stop, hibernate, reboot, redeploy, rebalance or maintenance", s))
}

// Terminal reports whether the workload is gone at the notice's deadline,
// so the full drain must run. Reboot and redeploy are terminal for the
// workload even though the VM survives.
func (k NoticeKind) Terminal() bool {
	switch k {
	case NoticePreempt, NoticeTerminate, NoticeStop, NoticeHibernate, NoticeReboot, NoticeRedeploy:
		return true
	}
	return false
}

// EventKind names a recorded event.
type EventKind string

// Event kinds.
const (
	EventRegistered       EventKind = "registered"
	EventLaunched         EventKind = "launched"
	EventPreemptionNotice EventKind = "preemption_notice"
	EventNotice           EventKind = "notice"
	EventDrained          EventKind = "drained"
	EventDrainFailed      EventKind = "drain_failed"
	EventTerminated       EventKind = "terminated"
	EventPriceChange      EventKind = "price_change"
	EventBudgetAlert      EventKind = "budget_alert"
	EventBenchmark        EventKind = "benchmark"
	// EventSlowHost: a host benchmarked far below its instance type's
	// median (broker/speeds.go); a candidate for replacement.
	EventSlowHost EventKind = "slow_host"
	// The fleet reconciler's (docs/fleet.md): slot transitions, orphans,
	// terminations, failed launches, dry-run actions and the kill switch.
	EventFleetSlot         EventKind = "fleet.slot"
	EventFleetOrphan       EventKind = "fleet.orphan"
	EventFleetTerminate    EventKind = "fleet.terminate"
	EventFleetLaunchFailed EventKind = "fleet.launch_failed"
	EventFleetDryRun       EventKind = "fleet.dry_run"
	EventFleetPaused       EventKind = "fleet.paused"
	EventFleetResumed      EventKind = "fleet.resumed"
)

// EventKinds lists every event kind.
func EventKinds() []EventKind {
	return []EventKind{EventRegistered, EventLaunched, EventPreemptionNotice, EventNotice, EventDrained, EventDrainFailed,
		EventTerminated, EventPriceChange, EventBudgetAlert, EventBenchmark, EventSlowHost,
		EventFleetSlot, EventFleetOrphan, EventFleetTerminate, EventFleetLaunchFailed, EventFleetDryRun, EventFleetPaused, EventFleetResumed}
}

// ParseEventKind checks s.
func ParseEventKind(s string) (EventKind, error) {
	if slices.Contains(EventKinds(), EventKind(s)) {
		return EventKind(s), nil
	}
	return "", unknown(fmt.Sprintf("kind %q is not an event kind; see docs/api.md for the list", s))
}

// Change is what a report does to an instance: the event to record and,
// when State is set, the instance's new state.
type Change struct {
	Event EventKind
	// State is empty when the state stays.
	State State
	// DrainState is "completed" or "failed" after a drain report.
	DrainState string
	// SetsPreemptAt: the notice's deadline becomes the instance's
	// preempt_at.
	SetsPreemptAt bool
}

// OnNotice is the change a notice of kind k makes.
func OnNotice(k NoticeKind) Change {
	if k.Terminal() {
		return Change{Event: EventPreemptionNotice, State: Preempting, SetsPreemptAt: true}
	}
	return Change{Event: EventNotice}
}

// OnDrain is the change a drain report makes; ok means every step
// succeeded.
func OnDrain(ok bool) Change {
	if ok {
		return Change{Event: EventDrained, State: Drained, DrainState: "completed"}
	}
	return Change{Event: EventDrainFailed, State: Draining, DrainState: "failed"}
}

// Next applies c to an instance in state from: the state to store, or
// from itself when c changes nothing or the change is not allowed (a late
// notice for a drained instance).
func Next(from State, c Change) State {
	if c.State == "" || Transition(from, c.State) != nil {
		return from
	}
	return c.State
}
