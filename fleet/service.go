package fleet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/store"
)

// Service answers the fleet API (status, diff, pause, resume) on any
// replica: status reads the store; diff runs a pass that writes nothing; the
// kill switch is a stored setting the leader reads every pass.
type Service struct {
	Store interface {
		Store
		SetPaused(ctx context.Context, paused bool, by string, now time.Time) error
		RequestReplace(ctx context.Context, r store.ReplaceRequest) error
	}
	Agents     Agents
	Reconciler *Reconciler
	Now        func() time.Time
	// Kick, when set, asks the leader's loop for a pass now (pause,
	// resume).
	Kick func()
}

// Status is the answer of GET /api/v1/fleet.
type Status struct {
	At       time.Time    `json:"at"`
	Mode     Mode         `json:"mode"`
	Paused   bool         `json:"paused"`
	PausedBy string       `json:"paused_by,omitempty"`
	Slots    []SlotStatus `json:"slots"`
	// Orphans are broker-tagged instances no slot owns.
	Orphans []store.FleetInstanceRecord `json:"orphans"`
	// Blocked are the pools in the unavailable-offerings cache (as this
	// replica knows them: the leader's view is the one that acts).
	Blocked []Entry       `json:"blocked"`
	ByState map[State]int `json:"by_state"`
	// Limited are the pools seen to hold fewer instances than a job asked
	// for (Unavailable.Limit): no job of more is planned there until Until.
	Limited []LimitEntry `json:"limited"`
	// LastPass is this replica's latest pass (empty on a follower).
	LastPass *Report `json:"last_pass,omitempty"`
	// Replacing are the replacement requests the leader has not acted on
	// yet (it does at its next acting pass; not in dry-run or paused).
	Replacing []store.ReplaceRequest `json:"replacing"`
}

// SlotStatus is one slot with its instance and agent health.
type SlotStatus struct {
	store.SlotRecord
	InstanceState string `json:"instance_state,omitempty"`
	// Age is how long the slot has been in its state.
	AgeSeconds float64 `json:"age_seconds"`
	// Agent is "healthy", "silent", "preempting", "draining", "drained" or
	// "none" (no registration yet).
	Agent         string    `json:"agent"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}

// Status reads the fleet as stored.
func (s *Service) Status(ctx context.Context) (Status, error) {
	now := s.now()
	st, err := s.Store.Load(ctx)
	if err != nil {
		return Status{}, err
	}
	pause, err := s.Store.Paused(ctx)
	if err != nil {
		return Status{}, err
	}
	agents := map[string]store.InstanceRecord{}
	if s.Agents != nil {
		recs, err := s.Agents.ListInstances(ctx, "", "")
		if err != nil {
			return Status{}, err
		}
		for _, a := range recs {
			agents[a.ID] = a
		}
	}
	insts := map[string]store.FleetInstanceRecord{}
	out := Status{At: now, Mode: DryRun, Paused: pause.Paused, PausedBy: pause.By, Slots: []SlotStatus{},
		Orphans: []store.FleetInstanceRecord{}, Blocked: []Entry{}, Limited: []LimitEntry{}, ByState: map[State]int{}}
	hbTimeout := 2 * time.Minute
	if r := s.Reconciler; r != nil {
		r.init()
		out.Mode = r.Options.Mode
		hbTimeout = r.Options.HeartbeatTimeout
		out.Blocked = append(out.Blocked, r.Unavailable.Entries(now)...)
		out.Limited = append(out.Limited, r.Unavailable.Limits(now)...)
		if last := r.Last(); !last.At.IsZero() {
			out.LastPass = &last
		}
	}
	reqs, err := s.Store.ReplaceRequests(ctx)
	if err != nil {
		return Status{}, err
	}
	out.Replacing = append([]store.ReplaceRequest{}, reqs...)
	for _, in := range st.Instances {
		insts[in.ID] = in
		if !in.OrphanSince.IsZero() && in.SlotID == "" {
			out.Orphans = append(out.Orphans, in)
		}
	}
	for _, sl := range st.Slots {
		ss := SlotStatus{SlotRecord: sl, AgeSeconds: now.Sub(sl.StateSince).Seconds(), Agent: "none"}
		if in, ok := insts[sl.InstanceID]; ok {
			ss.InstanceState = in.State
		}
		if a, ok := agents[sl.InstanceID]; ok && sl.InstanceID != "" {
			ss.LastHeartbeat = a.LastHeartbeat
			last := a.LastHeartbeat
			if last.IsZero() {
				last = a.RegisteredAt
			}
			switch {
			case a.State == store.StatePreempting || !a.PreemptAt.IsZero():
				ss.Agent = "preempting"
			case a.State == store.StateDraining:
				ss.Agent = "draining"
			case a.State == store.StateDrained:
				ss.Agent = "drained"
			case now.Sub(last) >= hbTimeout:
				ss.Agent = "silent"
			default:
				ss.Agent = "healthy"
			}
		}
		out.Slots = append(out.Slots, ss)
		out.ByState[State(sl.State)]++
	}
	sort.Slice(out.Blocked, func(i, j int) bool { return out.Blocked[i].Until.Before(out.Blocked[j].Until) })
	sort.Slice(out.Limited, func(i, j int) bool { return poolName(out.Limited[i].Pool) < poolName(out.Limited[j].Pool) })
	return out, nil
}

// Diff is what the next pass would do; nothing is written or launched.
func (s *Service) Diff(ctx context.Context) (Report, error) {
	if s.Reconciler == nil {
		return Report{}, fmt.Errorf("%w: the fleet is not configured on this broker", ErrNoPlan)
	}
	return s.Reconciler.Diff(ctx)
}

// SetPaused turns the kill switch on or off.
func (s *Service) SetPaused(ctx context.Context, paused bool, by string) (store.FleetPause, error) {
	if err := s.Store.SetPaused(ctx, paused, by, s.now()); err != nil {
		return store.FleetPause{}, err
	}
	if s.Kick != nil {
		s.Kick()
	}
	return s.Store.Paused(ctx)
}

// ErrNotInFleet: the instance is not a slot's current instance.
var ErrNotInFleet = errors.New("not an instance of the fleet")

// Replace asks the leader to replace instance id, one of the fleet's
// slots' current instances (launching, booting or running): its next
// acting pass launches a replacement for the slot in the plan's pool and
// terminates the instance (docs/fleet.md, "Replacing a host").
func (s *Service) Replace(ctx context.Context, id, reason, by string) (store.ReplaceRequest, error) {
	st, err := s.Store.Load(ctx)
	if err != nil {
		return store.ReplaceRequest{}, err
	}
	found := false
	for _, sl := range st.Slots {
		switch State(sl.State) {
		case Launching, Booting, Running:
			found = found || sl.InstanceID == id
		}
	}
	if !found {
		return store.ReplaceRequest{}, fmt.Errorf("instance %q: %w (see gpubroker fleet status)", id, ErrNotInFleet)
	}
	if reason == "" {
		reason = "asked for"
	}
	r := store.ReplaceRequest{Instance: id, Reason: reason, By: by, At: s.now()}
	if err := s.Store.RequestReplace(ctx, r); err != nil {
		return store.ReplaceRequest{}, err
	}
	if s.Kick != nil {
		s.Kick()
	}
	return r, nil
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}
