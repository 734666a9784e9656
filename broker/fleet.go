package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gpubroker/gpubroker/dashboard"
	"log/slog"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// FleetSetup turns the fleet reconciler on in `gpubroker serve`: the leader
// runs a pass every Interval (and at once after a pause or resume); every
// replica answers the fleet routes.
type FleetSetup struct {
	Options fleet.Options
	// Interval between passes (default 10s).
	Interval time.Duration
	// Computes are the clouds to manage.
	Computes map[pricing.Cloud]providers.Compute
	// Tokens mints the registration tokens that go into user data; nil
	// uses StoreMinter (bootstrap tokens in the store).
	Tokens fleet.TokenMinter
	// Hedge, when set, turns on live spot hedging of inference services
	// (fleet.HedgedSource) with these settings.
	Hedge *fleet.HedgeOptions
	// Training configures the live training stage (fleet.training).
	Training fleet.TrainingConfig
	// ReplaceSlowHosts: the slow-host check asks for the replacement of
	// each host it flags (fleet.replace_slow_hosts).
	ReplaceSlowHosts bool
}

// fleetParts is the wired fleet of one broker process.
type fleetParts struct {
	loop *fleet.Loop
	api  httpapi.Fleet
	svc  *fleet.Service
}

// dashFleetSource is the dashboard's view of the fleet: the reconciler's
// slots when a fleet is configured, an honest empty state otherwise.
func dashFleetSource(fp *fleetParts) dashboard.FleetInstances {
	if fp == nil {
		return dashboard.NoFleet{}
	}
	return dashFleet{fp.svc}
}

func newFleet(ctx context.Context, cfg *Config, b *store.Broker, cat *catalogHolder, policyData []byte,
	metrics *httpapi.Metrics, elector *Elector, log *slog.Logger) (*fleetParts, error) {
	fs := cfg.Fleet
	fst, err := b.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	var pol *policy.Policy
	if policyData != nil {
		if pol, err = policy.Parse(cfg.PolicyPath, policyData); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
	}
	fm, err := fleet.NewMetrics(metrics.Registerer())
	if err != nil {
		return nil, fmt.Errorf("fleet metrics: %w", err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	tokens := fs.Tokens
	if tokens == nil {
		tokens = &StoreMinter{Broker: b, Fleet: fst}
	}
	chain := fleet.ChainConfig{
		Catalog: cat.Load, Policy: func() *policy.Policy { return pol }, Now: cfg.Now, Log: log,
		Load: fleet.AgentLoad{Agents: b},
		StopScaling: func(ctx context.Context, w policy.Workload, now time.Time) bool {
			return budgetReached(ctx, b, pol, w, now, policy.BudgetStopScaling, log)
		},
		SpotOnly: func(ctx context.Context, w policy.Workload, now time.Time) bool {
			return budgetReached(ctx, b, pol, w, now, policy.BudgetSpotOnly, log)
		},
		Fleet: fst, Progress: storeProgress{b}, Training: fs.Training,
		SpeedRatio: (&speedRatios{b: b, catalog: cat.Load, now: now, log: log, refresh: 10 * time.Minute}).Ratio,
		Hedge:      fs.Hedge, Agents: b, Decisions: &fleet.DecisionBoard{}}
	if fs.Options.Mode == fleet.Apply {
		// The services' time below target is kept for the next leader.
		// Not in dry-run: nothing runs there, so every service is always
		// short, and a budget spent on that would follow the fleet into
		// apply.
		chain.Shortfall = fst
	}
	rec := &fleet.Reconciler{Store: fst, Computes: fs.Computes, Agents: b,
		Plans:  fleet.NewPlanChain(chain),
		Tokens: tokens, Metrics: fm, Log: log.With("part", "fleet"), Now: cfg.Now, Options: fs.Options}
	loop := &fleet.Loop{Reconciler: rec, Leading: elector.Leading, Lease: LeaseName, Holder: cfg.ReplicaID, Interval: fs.Interval}
	loop.Init()
	svc := &fleet.Service{Store: fst, Agents: b, Reconciler: rec, Now: cfg.Now, Kick: loop.Kick}
	leading := func() bool { _, _, ok := elector.Leading(); return ok }
	return &fleetParts{loop: loop, api: fleetAPI{s: svc, decisions: chain.Decisions, leading: leading}, svc: svc}, nil
}

// fleetAPI adapts fleet.Service to the API: domain values in, apiv1 out.
type fleetAPI struct {
	s *fleet.Service
	// decisions are the live stages' (nil: none); leading says whether
	// this replica is the leader, the only one whose stages decide.
	decisions *fleet.DecisionBoard
	leading   func() bool
}

func (f fleetAPI) Status(ctx context.Context) (apiv1.FleetStatus, error) {
	st, err := f.s.Status(ctx)
	if err != nil {
		return apiv1.FleetStatus{}, err
	}
	out := apiv1.FleetStatus{At: st.At, Mode: string(st.Mode), Paused: st.Paused, PausedBy: st.PausedBy, ByState: byState(st.ByState),
		Slots: make([]apiv1.FleetSlot, 0, len(st.Slots)), Orphans: make([]apiv1.FleetInstance, 0, len(st.Orphans)),
		Blocked: make([]apiv1.BlockedPool, 0, len(st.Blocked)), Limited: make([]apiv1.LimitedPool, 0, len(st.Limited))}
	for _, s := range st.Slots {
		out.Slots = append(out.Slots, apiv1.FleetSlot{ID: s.ID, Workload: s.Workload, Kind: s.Kind, Index: s.Index, Cloud: s.Cloud,
			Region: s.Region, Zone: s.Zone, InstanceType: s.InstanceType, GPU: s.GPU, Capacity: s.Capacity, PricePerHour: s.PricePerHour,
			State: s.State, Generation: s.Generation, InstanceID: s.InstanceID, InstanceState: s.InstanceState, Reason: s.Reason,
			StateSince: s.StateSince, AgeSeconds: s.AgeSeconds, LaunchedAt: s.LaunchedAt, RunningAt: s.RunningAt, Agent: s.Agent,
			LastHeartbeat: s.LastHeartbeat})
	}
	for _, o := range st.Orphans {
		out.Orphans = append(out.Orphans, apiv1.FleetInstance{ID: o.ID, Cloud: o.Cloud, Region: o.Region, Zone: o.Zone,
			InstanceType: o.InstanceType, Capacity: o.Capacity, State: o.State, OrphanSince: o.OrphanSince})
	}
	for _, b := range st.Blocked {
		out.Blocked = append(out.Blocked, apiv1.BlockedPool{Cloud: string(b.Pool.Cloud), Zone: b.Pool.Zone, InstanceType: b.Pool.InstanceType,
			Capacity: string(b.Pool.Capacity), Until: b.Until, Reason: b.Reason})
	}
	for _, l := range st.Limited {
		out.Limited = append(out.Limited, apiv1.LimitedPool{Cloud: string(l.Pool.Cloud), Zone: l.Pool.Zone, InstanceType: l.Pool.InstanceType,
			Capacity: string(l.Pool.Capacity), Instances: l.Instances, Until: l.Until})
	}
	if st.LastPass != nil {
		r := reportAPI(*st.LastPass)
		out.LastPass = &r
	}
	out.Decisions, out.DecisionsFrom = f.liveDecisions(st.At)
	out.Replacing = make([]apiv1.FleetReplace, 0, len(st.Replacing))
	for _, q := range st.Replacing {
		out.Replacing = append(out.Replacing, apiv1.FleetReplace{Instance: q.Instance, Reason: q.Reason, By: q.By, At: q.At})
	}
	return out, nil
}

// liveDecisions are the live stages' latest decisions. Only the leader's
// are acted on: a follower's stages run only for `fleet diff`, whose
// decisions nobody carries out, so a follower reports none rather than
// those.
func (f fleetAPI) liveDecisions(now time.Time) ([]apiv1.FleetDecision, string) {
	out := []apiv1.FleetDecision{}
	if f.leading == nil || !f.leading() {
		return out, apiv1.DecisionsNone
	}
	for _, d := range f.decisions.List() {
		a := apiv1.FleetDecision{Workload: d.Workload, Stage: d.Stage, Policy: d.Policy, Action: d.Action, Reason: d.Reason, At: d.At, Tick: d.Tick}
		switch d.Stage {
		case fleet.StageTraining:
			a.Progress = &apiv1.FleetProgress{Done: d.Done, Reported: d.Reported, Deadline: d.Deadline,
				TimeLeftSeconds: d.TimeLeft(now).Seconds()}
		case fleet.StageInference:
			spot := d.Spot
			if spot == nil {
				spot = map[string]int{}
			}
			a.Replicas = &apiv1.FleetReplicas{Spot: spot, OnDemand: d.OnDemand, Target: d.Target, Ready: d.Ready}
			if d.Goal > 0 {
				a.Replicas.Availability = &apiv1.FleetAvailability{Goal: d.Goal, WindowSeconds: d.Window.Seconds(),
					BudgetSeconds: d.Budget.Seconds(), BudgetLeftSeconds: d.BudgetLeft.Seconds()}
			}
		}
		out = append(out, a)
	}
	return out, apiv1.DecisionsFromLeader
}

func byState(m map[fleet.State]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

func reportAPI(r fleet.Report) apiv1.FleetReport {
	out := apiv1.FleetReport{At: r.At, Mode: string(r.Mode), Paused: r.Paused, Epoch: r.Epoch, TookNS: int64(r.Took), Slots: r.Slots,
		ByState: byState(r.ByState), Instances: r.Instances, Actions: make([]apiv1.FleetAction, 0, len(r.Actions)), Errors: r.Errors}
	for _, a := range r.Actions {
		out.Actions = append(out.Actions, apiv1.FleetAction(a))
	}
	return out
}

func (f fleetAPI) Diff(ctx context.Context) (apiv1.FleetReport, error) {
	r, err := f.s.Diff(ctx)
	if errors.Is(err, fleet.ErrNoPlan) {
		return apiv1.FleetReport{}, fmt.Errorf("%w: %v", policy.ErrNoPolicy, err)
	}
	if err != nil {
		return apiv1.FleetReport{}, err
	}
	return reportAPI(r), nil
}

func (f fleetAPI) SetPaused(ctx context.Context, paused bool, by string) (apiv1.FleetPause, error) {
	p, err := f.s.SetPaused(ctx, paused, by)
	return apiv1.FleetPause{Paused: p.Paused, By: p.By, At: p.At}, err
}

func (f fleetAPI) Replace(ctx context.Context, id, reason, by string) (apiv1.FleetReplace, error) {
	q, err := f.s.Replace(ctx, id, reason, by)
	if errors.Is(err, fleet.ErrNotInFleet) {
		return apiv1.FleetReplace{}, fmt.Errorf("%w: %v", store.ErrNotFound, err)
	}
	if err != nil {
		return apiv1.FleetReplace{}, err
	}
	return apiv1.FleetReplace{Instance: q.Instance, Reason: q.Reason, By: q.By, At: q.At}, nil
}

// StoreMinter mints registration tokens as bootstrap tokens in the store.
// The token of a launch is HMAC-SHA256(key, client token) under a random
// key kept in the fleet settings, so a retried launch renders the same user
// data, and only its hash is stored, as a bootstrap token named after the
// slot that expires with the launch's boot timeout. (A registration token
// bound to one instance id needs the id before the launch, which EC2 does
// not give; see docs/fleet.md.)
type StoreMinter struct {
	Broker *store.Broker
	Fleet  *store.Fleet
}

// Mint implements fleet.TokenMinter.
func (m *StoreMinter) Mint(ctx context.Context, r fleet.MintRequest) (string, error) {
	key, err := m.Fleet.FleetSecret(ctx, "registration-token-key", func() (string, error) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return hex.EncodeToString(b[:]), nil
	})
	if err != nil {
		return "", err
	}
	k, err := hex.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("fleet registration key is damaged: %w", err)
	}
	h := hmac.New(sha256.New, k)
	h.Write([]byte(r.ClientToken))
	tok := "gpb_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	err = m.Broker.AddToken(ctx, store.TokenRecord{Hash: httpapi.HashToken(tok), Kind: store.TokenBootstrap, Subject: r.Slot, CreatedAt: time.Now().UTC(), ExpiresAt: r.Expires.UTC()})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return "", err
	}
	return tok, nil
}
