package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// fakeFleet is a FleetReader over slots the test owns.
type fakeFleet struct{ slots []store.SlotRecord }

func (f *fakeFleet) Load(context.Context) (store.FleetState, error) {
	return store.FleetState{Slots: append([]store.SlotRecord(nil), f.slots...)}, nil
}

// fakeProgress is a ProgressSource.
type fakeProgress map[string]JobProgress

func (f fakeProgress) JobProgress(_ context.Context, w string) (JobProgress, bool, error) {
	p, ok := f[w]
	return p, ok, nil
}

func trainPlacement(instances int, groups ...int) *optimizer.Plan {
	p := optimizer.Placement{Workload: "train", Kind: "training", Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p3.2xlarge", GPU: pricing.V100, Capacity: pricing.Spot, GPUs: instances, Instances: instances, RelativeSpeed: 1}
	if len(groups) == 0 {
		groups = []int{instances}
	}
	for i, n := range groups {
		p.Groups = append(p.Groups, optimizer.Group{Cloud: pricing.AWS, Region: "us-east-1", Zone: fmt.Sprintf("us-east-1%c", 'a'+i),
			InstanceType: "p3.2xlarge", GPU: pricing.V100, GPUsPerInstance: 1, Instances: n, Capacity: pricing.Spot, PricePerHour: 0.9 * float64(n)})
	}
	return &optimizer.Plan{Placements: []optimizer.Placement{p}}
}

func trainWorkload(decider string, work, deadline, changeover, ckpt time.Duration) policy.Workload {
	return policy.Workload{Name: "train", Kind: policy.Training, WorkGPUHours: work.Hours(), Deadline: deadline,
		RestartOverhead: changeover, CheckpointInterval: ckpt, Spot: policy.SpotPrefer, SpotDecider: decider}
}

// driver plays the reconciler and the cloud for one single-instance job in
// virtual time: it launches where the plan says, preempts spot instances
// whose pool lost capacity, blocks pools like the reconciler does, and
// keeps the job's true progress and cost.
type driver struct {
	src      *TrainingSource
	fleet    *fakeFleet
	u        *Unavailable
	now      time.Time
	gap      time.Duration
	avail    func(zone string, tick int) bool
	work     float64 // seconds
	ckpt     float64
	changeov float64

	done, saved, overhead, cost float64
	finish                      float64 // seconds after start, 0 until done
	moves, preemptions, gen     int
	onDemand                    float64 // seconds run on on-demand
	// oracle feeds the trackers every pool's true capacity each tick, as
	// the simulator's trackers see it (for measuring what live signals
	// cost, not how the broker runs).
	oracle []string
}

func newDriver(t *testing.T, w policy.Workload, plan *optimizer.Plan, offers func(tick int) []pricing.Offer, avail func(string, int) bool, cfg TrainingConfig) *driver {
	t.Helper()
	d := &driver{fleet: &fakeFleet{}, u: &Unavailable{}, now: t0, gap: cfg.tick(), avail: avail,
		changeov: w.RestartOverhead.Seconds(), ckpt: w.CheckpointInterval.Seconds(), work: w.WorkGPUHours * 3600}
	pol := &policy.Policy{Workloads: []policy.Workload{w}}
	d.fleet.slots = []store.SlotRecord{{ID: "train/0", Workload: "train", Kind: "training", State: string(Pending), CreatedAt: t0}}
	d.src = &TrainingSource{Inner: staticPlan{plan}, Policy: func() *policy.Policy { return pol },
		Catalog: func() *pricing.Catalog {
			return pricing.NewCatalog(offers(d.tick()), t0, "test")
		},
		Fleet: d.fleet, Tracker: &spotpolicy.LiveTracker{Gap: cfg.tick()}, Now: func() time.Time { return d.now }, Config: cfg}
	return d
}

func (d *driver) tick() int { return int(d.now.Sub(t0) / d.gap) }

// step runs one tick: preemption, a plan pass, the launches it asks for,
// and the tick's progress.
func (d *driver) step(t *testing.T) {
	t.Helper()
	i := d.tick()
	s := &d.fleet.slots[0]
	if State(s.State) == Running && s.Capacity == string(pricing.Spot) && !d.avail(s.Zone, i) {
		d.preemptions++
		d.done, d.overhead = d.saved, 0
		d.u.Block(poolKey(s), "preempted", d.now)
		s.State, s.InstanceID = string(Draining), ""
	}
	for _, z := range d.oracle {
		o := p3(z, 0)
		d.src.Tracker.Observe(poolName(PoolOf(o, pricing.Spot)), d.now, d.avail(z, i))
		if !d.avail(z, i) {
			d.u.Block(PoolOf(o, pricing.Spot), "capacity", d.now)
		} else {
			d.u.Clear(PoolOf(o, pricing.Spot), d.now)
		}
	}
	plan, err := d.src.Plan(context.Background(), d.u)
	if err != nil {
		t.Fatal(err)
	}
	g := plan.Placements[0].Groups[0]
	spec := Desired(plan)[0]
	if State(s.State) != Running || (g.Move && elsewhere(s, &spec)) {
		if State(s.State) == Running {
			d.moves++
			if d.ckpt > 0 {
				d.saved = d.done // a voluntary stop checkpoints first
			} // without checkpoints there is nothing to save to: all is lost
		}
		if g.Capacity == pricing.Spot && (!d.avail(g.Zone, i) || d.u.Blocked(PoolOf(spec.Offer, pricing.Spot), d.now)) {
			if !d.avail(g.Zone, i) {
				d.u.Block(PoolOf(spec.Offer, pricing.Spot), "capacity", d.now)
			}
			s.State, s.InstanceID = string(Pending), ""
		} else {
			d.gen++
			s.State, s.Zone, s.Cloud, s.InstanceType, s.Capacity = string(Running), g.Zone, string(g.Cloud), g.InstanceType, string(g.Capacity)
			s.InstanceID, s.RunningAt, s.PricePerHour = fmt.Sprintf("i-%d", d.gen), d.now, g.PricePerHour
			d.done, d.overhead = d.saved, d.changeov
		}
	}
	if State(s.State) == Running {
		gap := d.gap.Seconds()
		d.cost += s.PricePerHour * gap / 3600
		if s.Capacity == string(pricing.OnDemand) {
			d.onDemand += gap
		}
		ov := math.Min(gap, d.overhead)
		d.overhead -= ov
		prog := gap - ov
		if d.done+prog >= d.work && d.finish == 0 {
			d.finish = float64(i)*gap + ov + (d.work - d.done)
		}
		d.done = math.Min(d.work, d.done+prog)
		switch {
		case d.done >= d.work:
			d.saved = d.done
		case d.ckpt > 0:
			d.saved = math.Floor(d.done/d.ckpt) * d.ckpt
		default:
			d.saved = 0 // no checkpoints: a preemption loses all work since the start (docs/policy.md)
		}
	}
	d.now = d.now.Add(d.gap)
}

func poolKey(s *store.SlotRecord) providers.PoolKey {
	return providers.PoolKey{Cloud: pricing.Cloud(s.Cloud), Zone: s.Zone, InstanceType: s.InstanceType, Capacity: pricing.CapacityType(s.Capacity)}
}

func (d *driver) run(t *testing.T, maxTicks int) {
	t.Helper()
	for range maxTicks {
		if d.finish > 0 {
			return
		}
		d.step(t)
	}
}

func p3Offers(prices ...float64) []pricing.Offer {
	var out []pricing.Offer
	for i, p := range prices {
		out = append(out, p3(fmt.Sprintf("us-east-1%c", 'a'+i), p))
	}
	return out
}

func TestTrainingSafetyNet(t *testing.T) {
	const work, deadline, changeover = 4 * time.Hour, 6 * time.Hour, 6 * time.Minute
	for _, decider := range spotpolicy.TrainingPolicies() {
		for _, tc := range []struct {
			name string
			dies time.Duration // all spot capacity gone from then on
		}{
			{"never", 100 * time.Hour},
			{"at start", 0},
			{"half way", 3 * time.Hour},
			{"near the deadline", 5*time.Hour + 30*time.Minute},
			{"just before the slack runs out", deadline - work - changeover + time.Hour},
		} {
			for _, ckpt := range []time.Duration{0, 30 * time.Minute} {
				t.Run(fmt.Sprintf("%s/%s/ckpt=%s", decider, tc.name, ckpt), func(t *testing.T) {
					w := trainWorkload(decider, work, deadline, changeover, ckpt)
					dieTick := int(tc.dies / time.Minute)
					avail := func(zone string, tick int) bool {
						return tick < dieTick && (zone != "us-east-1b" || tick%90 < 60)
					}
					d := newDriver(t, w, trainPlacement(1), func(int) []pricing.Offer { return p3Offers(0.90, 0.95) }, avail, TrainingConfig{})
					d.run(t, int(deadline/time.Minute)+10)
					if d.finish == 0 || d.finish > deadline.Seconds()+1e-6 {
						t.Fatalf("missed the deadline: finished at %.0f s (0: never), deadline %.0f s; done %.0f of %.0f s", d.finish, deadline.Seconds(), d.done, d.work)
					}
					if tc.dies > deadline && ckpt > 0 && decider != spotpolicy.PolicyOnDemand && d.onDemand > 0 {
						// (Without checkpoints a preemption near the end
						// would lose everything: the safety net must leave
						// spot while on demand can still redo the work.)
						t.Errorf("spot never failed, yet %.0f s ran on on-demand", d.onDemand)
					}
					if tc.dies == 0 && d.onDemand < work.Seconds() {
						t.Errorf("no spot at all, yet only %.0f s on on-demand for %.0f s of work", d.onDemand, work.Seconds())
					}
				})
			}
		}
	}
}

// runningSlot puts the job's first slot on a running instance.
func runningSlot(zone string, ct pricing.CapacityType, since time.Time) store.SlotRecord {
	return store.SlotRecord{ID: "train/0", Workload: "train", Kind: "training", Index: 0, Cloud: "aws", Region: "us-east-1", Zone: zone,
		InstanceType: "p3.2xlarge", Capacity: string(ct), State: string(Running), InstanceID: "i-1", CreatedAt: t0, LaunchedAt: since, RunningAt: since, PricePerHour: 0.9}
}

func TestTrainingProgressReportedVsEstimated(t *testing.T) {
	const work = 10 * time.Hour
	now := t0.Add(2 * time.Hour)
	for _, tc := range []struct {
		name     string
		progress fakeProgress
		ratio    float64
		slot     store.SlotRecord
		want     float64 // seconds of work done
	}{
		{"reported", fakeProgress{"train": {Done: 0.42, At: now}}, 1, runningSlot("us-east-1a", pricing.Spot, t0.Add(time.Hour)), 0.42 * work.Seconds()},
		{"reported beyond the end is clamped", fakeProgress{"train": {Done: 1.5, At: now}}, 1, runningSlot("us-east-1a", pricing.Spot, t0), work.Seconds()},
		// Running for 1 h, 6 min of it the changeover.
		{"estimated at the planned speed", nil, 0, runningSlot("us-east-1a", pricing.Spot, t0.Add(time.Hour)), 54 * 60},
		{"estimated at the measured speed", nil, 0.5, runningSlot("us-east-1a", pricing.Spot, t0.Add(time.Hour)), 27 * 60},
		{"estimated, not running", nil, 1, store.SlotRecord{ID: "train/0", Workload: "train", State: string(Pending), CreatedAt: t0}, 0},
		{"reported while not running falls back to its checkpoint", fakeProgress{"train": {Done: 0.42, At: now}}, 1,
			store.SlotRecord{ID: "train/0", Workload: "train", State: string(Pending), CreatedAt: t0}, 4 * 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := trainWorkload("", work, 20*time.Hour, 6*time.Minute, time.Hour)
			pol := &policy.Policy{Workloads: []policy.Workload{w}}
			src := &TrainingSource{Inner: staticPlan{trainPlacement(1)}, Policy: func() *policy.Policy { return pol },
				Catalog: func() *pricing.Catalog { return pricing.NewCatalog(p3Offers(0.9, 0.95), t0, "test") },
				Fleet:   &fakeFleet{slots: []store.SlotRecord{tc.slot}}, Tracker: &spotpolicy.LiveTracker{},
				Now: func() time.Time { return now }, SpeedRatio: func(pricing.Cloud, string) float64 { return tc.ratio }}
			if tc.progress != nil {
				src.Progress = tc.progress
			}
			if _, err := src.Plan(context.Background(), &Unavailable{}); err != nil {
				t.Fatal(err)
			}
			d := src.Decisions()["train"]
			if math.Abs(d.Done-tc.want) > 1e-6 {
				t.Errorf("done = %.1f s, want %.1f s", d.Done, tc.want)
			}
			if d.Reported != (tc.progress != nil) {
				t.Errorf("reported = %v, want %v", d.Reported, tc.progress != nil)
			}
			if d.Tick != 120 {
				t.Errorf("tick = %d, want 120 (2 h of 1 min ticks from the slot's creation)", d.Tick)
			}
		})
	}
}

func TestTrainingHysteresis(t *testing.T) {
	const work, deadline = 20 * time.Hour, 40 * time.Hour
	always := func(string, int) bool { return true }
	for _, tc := range []struct {
		name   string
		prices func(tick int) []pricing.Offer
		margin float64
		moves  int
	}{
		{"price flips around every tick", func(i int) []pricing.Offer {
			if i%2 == 0 {
				return p3Offers(0.90, 0.86)
			}
			return p3Offers(0.86, 0.90)
		}, 0, 0},
		{"price flips around every hour", func(i int) []pricing.Offer {
			if (i/60)%2 == 0 {
				return p3Offers(0.90, 0.87)
			}
			return p3Offers(0.87, 0.90)
		}, 0, 0},
		{"a lasting drop elsewhere", func(i int) []pricing.Offer {
			if i < 60 {
				return p3Offers(0.90, 0.95)
			}
			return p3Offers(0.90, 0.45)
		}, 0, 1},
		{"a lasting drop that does not beat the margin", func(i int) []pricing.Offer {
			if i < 60 {
				return p3Offers(0.90, 0.95)
			}
			return p3Offers(0.90, 0.88)
		}, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := trainWorkload(spotpolicy.PolicyAdaptive, work, deadline, 6*time.Minute, 30*time.Minute)
			d := newDriver(t, w, trainPlacement(1), tc.prices, always, TrainingConfig{MoveMargin: tc.margin})
			d.run(t, int(deadline/time.Minute))
			if d.finish == 0 || d.finish > deadline.Seconds() {
				t.Fatalf("missed the deadline: finish %.0f s", d.finish)
			}
			if d.moves != tc.moves {
				t.Errorf("moves = %d, want %d", d.moves, tc.moves)
			}
		})
	}
}

func TestTrainingKeepsSlotIdentities(t *testing.T) {
	// 50 GPU-hours on 5 GPUs: 10 hours of work; the deadline is tight,
	// no slack to wait for spot.
	w := trainWorkload("", 50*time.Hour, 11*time.Hour+6*time.Minute, 6*time.Minute, 0)
	pol := &policy.Policy{Workloads: []policy.Workload{w}}
	plan := trainPlacement(5, 2, 3)
	now := t0.Add(time.Hour)
	u := &Unavailable{}
	// Every spot pool blocked, the instance running on spot in 1a just
	// lost its capacity (draining): the safety net cannot wait, so the job
	// goes on-demand; its slots keep their identities.
	for _, o := range p3Offers(0.9, 0.95) {
		u.Block(PoolOf(o, pricing.Spot), "capacity", now)
	}
	src := &TrainingSource{Inner: staticPlan{plan}, Policy: func() *policy.Policy { return pol },
		Catalog: func() *pricing.Catalog { return pricing.NewCatalog(p3Offers(0.9, 0.95), t0, "test") },
		Fleet:   &fakeFleet{slots: []store.SlotRecord{{ID: "train/0", Workload: "train", State: string(Draining), CreatedAt: t0}}},
		Tracker: &spotpolicy.LiveTracker{}, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	got, err := src.Plan(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	before, after := Desired(plan), Desired(got)
	if len(before) != len(after) {
		t.Fatalf("%d slots, want %d", len(after), len(before))
	}
	for i := range before {
		if before[i].ID != after[i].ID {
			t.Errorf("slot %d: id %s, want %s", i, after[i].ID, before[i].ID)
		}
	}
	if len(plan.Placements[0].Groups) != 2 || plan.Placements[0].Groups[0].Capacity != pricing.Spot {
		t.Errorf("the inner plan was modified")
	}
	p := got.Placements[0]
	if p.Capacity != pricing.OnDemand || p.Instances != 5 {
		t.Errorf("placement %s x%d, want on-demand x5", p.Capacity, p.Instances)
	}
	if want := 3.06 * 5; math.Abs(p.PricePerHour-want) > 1e-9 {
		t.Errorf("price %.2f/h, want %.2f/h", p.PricePerHour, want)
	}
}

// testWriter sends log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}

// TestReconcilerMovesOnlyWhenAsked runs the real reconciler: a plan that
// puts a running job elsewhere leaves it where it runs, unless the
// training stage set Group.Move.
func TestReconcilerMovesOnlyWhenAsked(t *testing.T) {
	e := newEnv(t, testPolicy)
	e.pass()
	e.step(time.Minute)
	e.step(time.Minute)
	for id, s := range e.slots() {
		if State(s.State) != Running || s.Zone != "us-east-1a" {
			t.Fatalf("slot %s not running in us-east-1a: %+v", id, s)
		}
	}
	base, err := e.r.Plans.Plan(context.Background(), e.r.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := func(move bool) *optimizer.Plan {
		p := *base
		p.Placements = append([]optimizer.Placement(nil), base.Placements...)
		pl := &p.Placements[0]
		pl.Groups = append([]optimizer.Group(nil), pl.Groups...)
		for i := range pl.Groups {
			pl.Groups[i].Zone, pl.Groups[i].Move = "us-east-1b", move
		}
		return &p
	}
	e.r.Plans = staticPlan{elsewhere(false)}
	e.step(time.Minute)
	for id, s := range e.slots() {
		if State(s.State) != Running || s.Zone != "us-east-1a" || s.Generation != 1 {
			t.Fatalf("slot %s moved without Move: %+v", id, s)
		}
	}
	e.r.Plans = staticPlan{elsewhere(true)}
	e.step(time.Minute)
	for _, d := range []time.Duration{time.Minute, time.Minute, time.Minute} {
		e.step(d)
	}
	for id, s := range e.slots() {
		if s.Zone != "us-east-1b" || s.Generation != 2 {
			t.Fatalf("slot %s not moved to us-east-1b by one replacement: %+v", id, s)
		}
	}
	e.checkNoDuplicates()
}

// countingProgress counts the jobs' progress reads: one per decision.
type countingProgress struct{ reads int }

func (c *countingProgress) JobProgress(context.Context, string) (JobProgress, bool, error) {
	c.reads++
	return JobProgress{}, false, nil
}

// TestTrainingInPassRedecidesOnlyBlockedJobs: asked again inside a pass at
// the same instant on the same inner plan, the stage keeps a job's decision
// while its pool is not blocked and decides again once it is.
func TestTrainingInPassRedecidesOnlyBlockedJobs(t *testing.T) {
	w := trainWorkload("", 10*time.Hour, 40*time.Hour, 6*time.Minute, time.Hour)
	pol := &policy.Policy{Workloads: []policy.Workload{w}}
	progress := &countingProgress{}
	src := &TrainingSource{Inner: staticPlan{trainPlacement(1)}, Policy: func() *policy.Policy { return pol },
		Catalog:  func() *pricing.Catalog { return pricing.NewCatalog(p3Offers(0.9, 0.95), t0, "test") },
		Fleet:    &fakeFleet{slots: []store.SlotRecord{{ID: "train/0", Workload: "train", State: string(Pending), CreatedAt: t0}}},
		Progress: progress, Tracker: &spotpolicy.LiveTracker{}, Now: func() time.Time { return t0 }}
	u := &Unavailable{}
	first, err := src.Plan(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	g := first.Placements[0].Groups[0]
	if progress.reads != 1 || g.Capacity != pricing.Spot {
		t.Fatalf("first plan: %d decisions, %s in %s; want one, on spot", progress.reads, g.Capacity, g.Zone)
	}
	again, err := src.Plan(InPass(t.Context()), u)
	if err != nil {
		t.Fatal(err)
	}
	if progress.reads != 1 || !reflect.DeepEqual(again.Placements, first.Placements) {
		t.Fatalf("in the pass, nothing blocked: %d decisions, %+v; want the first plan's", progress.reads, again.Placements[0].Groups)
	}
	u.Block(PoolOf(pricing.Offer{Cloud: g.Cloud, Region: g.Region, Zone: g.Zone, InstanceType: g.InstanceType}, g.Capacity), "capacity", t0)
	if _, err := src.Plan(InPass(t.Context()), u); err != nil {
		t.Fatal(err)
	}
	if progress.reads != 2 {
		t.Fatalf("in the pass, its pool blocked: %d decisions, want a second", progress.reads)
	}
	if _, err := src.Plan(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if progress.reads != 3 {
		t.Fatalf("outside a pass: %d decisions, want a third", progress.reads)
	}
}

// TestTrainingForgetsRemovedJobs: a job that leaves the policy, or stops
// being a spot job with a deadline, takes its state and decision with it.
func TestTrainingForgetsRemovedJobs(t *testing.T) {
	now := t0.Add(time.Hour)
	w := trainWorkload("", 10*time.Hour, 20*time.Hour, 6*time.Minute, time.Hour)
	for _, tc := range []struct {
		name  string
		after []policy.Workload
	}{
		{"left the policy", nil},
		{"no longer on spot", []policy.Workload{func() policy.Workload { x := w; x.Spot = policy.SpotNever; return x }()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := &policy.Policy{Workloads: []policy.Workload{w}}
			src := &TrainingSource{Inner: staticPlan{trainPlacement(1)}, Policy: func() *policy.Policy { return pol },
				Catalog: func() *pricing.Catalog { return pricing.NewCatalog(p3Offers(0.9, 0.95), t0, "test") },
				Fleet:   &fakeFleet{slots: []store.SlotRecord{runningSlot("us-east-1a", pricing.Spot, t0)}}, Tracker: &spotpolicy.LiveTracker{},
				Now: func() time.Time { return now }}
			if _, err := src.Plan(context.Background(), &Unavailable{}); err != nil {
				t.Fatal(err)
			}
			if _, ok := src.Decisions()["train"]; !ok {
				t.Fatal("no decision for train while it is a live job")
			}
			pol = &policy.Policy{Workloads: tc.after}
			now = now.Add(time.Minute)
			if _, err := src.Plan(context.Background(), &Unavailable{}); err != nil {
				t.Fatal(err)
			}
			if d, ok := src.Decisions()["train"]; ok {
				t.Fatalf("train's decision stays: %+v", d)
			}
		})
	}
}

// TestTrainingRunnerUpStaysInWatchedPools: the solver's runner-up becomes a
// slot's fallback pool when a launch is refused. A live job placed by the
// stage may fall back only to a pool the stage watches (same cloud, region
// and instance type); one elsewhere ran the job where the stage could not
// see it, and a job without checkpoints missed its deadline by hours in the
// fleet simulation (preemption/4-node traces, seed 1). A spot-only job has
// no safety net to mislead and keeps any.
func TestTrainingRunnerUpStaysInWatchedPools(t *testing.T) {
	for _, tc := range []struct {
		name     string
		runner   optimizer.RunnerUp
		kept     bool
		spotOnly bool
	}{
		{"another zone of the region", optimizer.RunnerUp{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}, true, false},
		{"another region", optimizer.RunnerUp{Cloud: pricing.AWS, Region: "eu-central-1", Zone: "euc1-az3", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}, false, false},
		{"another instance type", optimizer.RunnerUp{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p3.8xlarge", Capacity: pricing.Spot}, false, false},
		{"another instance type for a spot-only job (no safety net to mislead)", optimizer.RunnerUp{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p3.8xlarge", Capacity: pricing.Spot}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := trainPlacement(1)
			r := tc.runner
			plan.Placements[0].RunnerUp = &r
			w := trainWorkload(spotpolicy.PolicyAdaptive, 4*time.Hour, 12*time.Hour, 6*time.Minute, 0)
			if tc.spotOnly {
				w.Spot = policy.SpotOnly
			}
			d := newDriver(t, w, plan, func(int) []pricing.Offer { return p3Offers(0.90, 0.95) }, func(string, int) bool { return true }, TrainingConfig{})
			out, err := d.src.Plan(context.Background(), d.u)
			if err != nil {
				t.Fatal(err)
			}
			specs := Desired(out)
			if len(specs) != 1 {
				t.Fatalf("%d slots, want 1", len(specs))
			}
			alt := specs[0].Alternatives
			if tc.kept != (len(alt) == 1) {
				t.Fatalf("fallback pools %+v; want the runner-up kept: %v", alt, tc.kept)
			}
			for _, o := range alt {
				if (o.Region != "us-east-1" || o.InstanceType != "p3.2xlarge") && !tc.spotOnly {
					t.Errorf("fallback %+v is outside the pools the stage watches", o)
				}
			}
		})
	}
}

func TestGangUpAt(t *testing.T) {
	slot := func(i int, st State, up time.Duration) *store.SlotRecord {
		s := &store.SlotRecord{ID: fmt.Sprintf("train/%d", i), Index: i, State: string(st)}
		if up >= 0 {
			s.RunningAt = t0.Add(up)
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		slots     []*store.SlotRecord
		instances int
		want      time.Time
	}{
		{"one instance up", []*store.SlotRecord{slot(0, Running, time.Hour)}, 1, t0.Add(time.Hour)},
		{"both up: the later one starts the job", []*store.SlotRecord{slot(0, Running, time.Hour), slot(1, Running, 3*time.Hour)}, 2, t0.Add(3 * time.Hour)},
		{"second one pending", []*store.SlotRecord{slot(0, Running, time.Hour), slot(1, Pending, -1)}, 2, time.Time{}},
		{"second one booting", []*store.SlotRecord{slot(0, Running, time.Hour), slot(1, Booting, -1)}, 2, time.Time{}},
		{"draining does not count", []*store.SlotRecord{slot(0, Running, time.Hour), slot(1, Draining, 2*time.Hour)}, 2, time.Time{}},
		{"no slots", nil, 1, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gangUpAt(tc.slots, tc.instances); !got.Equal(tc.want) {
				t.Errorf("gangUpAt = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTrainingIncompleteGangMakesNoProgress: a two-instance job whose
// second instance never came up has done nothing, however long the first
// one runs; the estimate must not advance (before, it did, from the first
// instance's running time, and the safety net never fired).
func TestTrainingIncompleteGangMakesNoProgress(t *testing.T) {
	w := trainWorkload(spotpolicy.PolicyAdaptive, 20*time.Hour, 30*time.Hour, 6*time.Minute, 30*time.Minute)
	w.GPU = policy.GPUNeed{Models: []pricing.GPUModel{pricing.V100}, Count: 2}
	pol := &policy.Policy{Workloads: []policy.Workload{w}}
	now := t0
	fl := &fakeFleet{slots: []store.SlotRecord{runningSlot("us-east-1a", pricing.Spot, t0),
		{ID: "train/1", Workload: "train", Kind: "training", Index: 1, State: string(Pending), CreatedAt: t0}}}
	src := &TrainingSource{Inner: staticPlan{trainPlacement(2)}, Policy: func() *policy.Policy { return pol },
		Catalog: func() *pricing.Catalog { return pricing.NewCatalog(p3Offers(0.90, 0.95), t0, "test") },
		Fleet:   fl, Tracker: &spotpolicy.LiveTracker{Gap: time.Minute}, Now: func() time.Time { return now }}
	var plan *optimizer.Plan
	for now = t0; now.Before(t0.Add(12 * time.Hour)); now = now.Add(10 * time.Minute) {
		var err error
		if plan, err = src.Plan(context.Background(), &Unavailable{}); err != nil {
			t.Fatal(err)
		}
	}
	d := src.Decisions()["train"]
	if d.Done != 0 {
		t.Errorf("after 12 h with one of two instances up the stage estimates %.0f s of work done, want 0", d.Done)
	}
	// 20 h of work due in 30 h, nothing done at 12 h: on-demand now.
	if g := plan.Placements[0].Groups[0]; g.Capacity != pricing.OnDemand {
		t.Errorf("at 12 h with nothing done the job is placed on %s (%s), want on-demand", g.Capacity, d.Reason)
	}
}

func TestInRunningRegion(t *testing.T) {
	plan := trainPlacement(2)
	p := plan.Placements[0]
	for i := range p.Groups {
		p.Groups[i].Region = "us-west-2"
	}
	p.Region = "us-west-2"
	for _, tc := range []struct {
		name                string
		cloud, region, kind string
		want                string
	}{
		{"same type in another region: decide where it runs", "aws", "us-east-1", "p3.2xlarge", "us-east-1"},
		{"same region", "aws", "us-west-2", "p3.2xlarge", "us-west-2"},
		{"another instance type: the solver's", "aws", "us-east-1", "p3.8xlarge", "us-west-2"},
		{"another cloud: the solver's", "gcp", "us-east-1", "p3.2xlarge", "us-west-2"},
		{"region unknown", "aws", "", "p3.2xlarge", "us-west-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := inRunningRegion(p, &store.SlotRecord{Cloud: tc.cloud, Region: tc.region, InstanceType: tc.kind, State: string(Running)})
			if got.Region != tc.want {
				t.Errorf("placement region %s, want %s", got.Region, tc.want)
			}
			for _, g := range got.Groups {
				if g.Region != tc.want {
					t.Errorf("group region %s, want %s", g.Region, tc.want)
				}
			}
			if p.Groups[0].Region != "us-west-2" {
				t.Fatal("the input placement's groups were changed")
			}
		})
	}
}

// TestLeaveBackoff: a move from on-demand to spot that does not reach spot
// (the launch refused: the pool only looked available because its block
// ran out) keeps the job on on-demand for an hour, then two, four, eight;
// one that reaches spot resets the wait.
func TestLeaveBackoff(t *testing.T) {
	od, spot, idle := spotpolicy.RunOnDemand, spotpolicy.RunSpot(0), spotpolicy.Idle
	type step struct {
		at       time.Duration
		cur, a   spotpolicy.Action
		want     spotpolicy.Action
		nextWait time.Duration // the wait after this step
		inst     string        // the job's running instance ("": a new one each step)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a refused move waits an hour", []step{
			{0, od, spot, spot, 0, ""},
			{time.Minute, idle, od, od, time.Hour, ""}, // back from a refused launch
			{2 * time.Minute, od, spot, od, time.Hour, ""},
			{61 * time.Minute, od, spot, spot, time.Hour, ""},
		}},
		{"the wait doubles up to eight hours", []step{
			{0, od, spot, spot, 0, ""},
			{time.Minute, od, od, od, time.Hour, ""},
			{2 * time.Hour, od, spot, spot, time.Hour, ""},
			{2*time.Hour + time.Minute, od, od, od, 2 * time.Hour, ""},
			{5 * time.Hour, od, spot, spot, 2 * time.Hour, ""},
			{5*time.Hour + time.Minute, od, od, od, 4 * time.Hour, ""},
			{10 * time.Hour, od, spot, spot, 4 * time.Hour, ""},
			{10*time.Hour + time.Minute, od, od, od, 8 * time.Hour, ""},
			{19 * time.Hour, od, spot, spot, 8 * time.Hour, ""},
			{19*time.Hour + time.Minute, od, od, od, 8 * time.Hour, ""},
		}},
		{"a move that reaches spot resets the wait", []step{
			{0, od, spot, spot, 0, ""},
			{time.Minute, od, od, od, time.Hour, ""},
			{2 * time.Hour, od, spot, spot, time.Hour, ""},
			{2*time.Hour + time.Minute, spot, spot, spot, 0, ""},
			{3 * time.Hour, od, spot, spot, 0, ""}, // preempted, on demand, spot again: no wait
		}},
		{"a move refused while the on-demand instance kept running costs nothing: no wait", []step{
			{0, od, spot, spot, 0, "i-od"},
			{time.Minute, od, spot, spot, 0, "i-od"}, // launch first: refused, still on i-od
			{2 * time.Minute, od, spot, spot, 0, "i-od"},
		}},
		{"a move that lost the on-demand instance waits, launch first or not", []step{
			{0, od, spot, spot, 0, "i-od"},
			{time.Minute, od, spot, od, time.Hour, "i-od2"}, // stopped first, then refused: a new on-demand instance
		}},
		{"the safety net's move to on-demand is never held", []step{
			{0, od, spot, spot, 0, ""},
			{time.Minute, od, od, od, time.Hour, ""},
			{2 * time.Minute, spot, od, od, 0, ""}, // (running spot: the wait is over)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &liveJob{}
			for i, st := range tc.steps {
				got, _ := j.leaveBackoff(st.cur, st.inst, st.a, t0.Add(st.at), "")
				if got != st.want {
					t.Fatalf("step %d (%s): cur %v, policy %v: got %v, want %v", i, st.at, st.cur, st.a, got, st.want)
				}
				if j.leaveWait != st.nextWait {
					t.Fatalf("step %d (%s): wait %s, want %s", i, st.at, j.leaveWait, st.nextWait)
				}
			}
		})
	}
}

// TestKeepUnsaved: leaving a running instance is judged from the work its
// last checkpoint saved, since a live stop loses the rest.
func TestKeepUnsaved(t *testing.T) {
	const h = 3600.0
	od, spot, idle := spotpolicy.RunOnDemand, spotpolicy.RunSpot(0), spotpolicy.Idle
	state := func(cur spotpolicy.Action, done, saved, ckpt, deadline float64) *spotpolicy.State {
		return &spotpolicy.State{Tick: 0, Gap: 60, Work: 10 * h, Deadline: deadline, Changeover: 600, Done: done, Saved: saved,
			Checkpoint: ckpt, Current: cur, Pools: []spotpolicy.Pool{{Available: true, Run: 100, Frac: 0.9, MeanUp: 100}}}
	}
	for _, tc := range []struct {
		name    string
		s       *spotpolicy.State
		a, want spotpolicy.Action
	}{
		{"nothing unsaved: the policy's move stands", state(od, 2*h, 2*h, 1800, 30*h), spot, spot},
		{"leaving on-demand would lose more than a changeover: wait for the checkpoint", state(od, 2*h, 1.5*h, 3600, 30*h), spot, od},
		{"leaving on-demand would lose less than a changeover", state(od, 2*h, 2*h-300, 1800, 30*h), spot, spot},
		{"no checkpoints: on-demand to the end", state(od, 5*h, 0, 10*h, 30*h), idle, od},
		{"spot to on-demand with time to finish on spot: stay", state(spot, 5*h, 0, 10*h, 30*h), od, spot},
		{"spot to on-demand when the spot run cannot finish before the net: go", state(spot, 2*h, 0, 10*h, 17*h), od, od},
		{"spot to on-demand, the deadline needs it: go", state(spot, 5*h, 0, 10*h, 10.15*h), od, od},
		{"idle to spot: nothing runs", state(idle, 5*h, 0, 10*h, 30*h), spot, spot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := keepUnsaved(tc.s, tc.s.Current, tc.a, ""); got != tc.want {
				t.Errorf("keepUnsaved(%v → %v) = %v, want %v", tc.s.Current, tc.a, got, tc.want)
			}
		})
	}
}

// TestMoveLaunchesBeforeStopping runs the real reconciler on a one-instance
// job that the training stage moves from on-demand to a spot pool: the spot
// instance is launched while the on-demand one keeps running, and the
// on-demand one is stopped only once the launch succeeded. A refused
// launch leaves the job on its instance, same slot generation, nothing
// lost; the next try uses a new launch token.
func TestMoveLaunchesBeforeStopping(t *testing.T) {
	t.Run("refused, then launched", func(t *testing.T) { testMoveLaunchesFirst(t, false, false) })
	t.Run("answer lost", func(t *testing.T) { testMoveLaunchesFirst(t, true, false) })
	t.Run("refused, then the instance lost under a new leader", func(t *testing.T) { testMoveLaunchesFirst(t, false, true) })
}

func testMoveLaunchesFirst(t *testing.T, lostAnswer, lose bool) {
	const onDemandJob = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 20, reference_gpu: V100}
    checkpoint_interval: 30m
    restart_overhead: 5m
    spot: never
`
	e := newEnv(t, onDemandJob)
	e.pass()
	e.step(time.Minute)
	e.step(time.Minute)
	slots := e.slots()
	if len(slots) != 1 {
		t.Fatalf("want one slot, got %d", len(slots))
	}
	var id string
	var before store.SlotRecord
	for k, s := range slots {
		id, before = k, s
	}
	if State(before.State) != Running || before.Capacity != string(pricing.OnDemand) {
		t.Fatalf("slot not running on demand: %+v", before)
	}
	base, err := e.r.Plans.Plan(context.Background(), e.r.Unavailable)
	if err != nil {
		t.Fatal(err)
	}
	toSpot := *base
	toSpot.Placements = append([]optimizer.Placement(nil), base.Placements...)
	pl := &toSpot.Placements[0]
	pl.Groups = append([]optimizer.Group(nil), pl.Groups...)
	pl.Groups[0].Zone, pl.Groups[0].Capacity, pl.Groups[0].Move, pl.Groups[0].PricePerHour = "us-east-1b", pricing.Spot, true, 0.95
	pl.Zone, pl.Capacity, pl.RunnerUp = "us-east-1b", pricing.Spot, nil
	spotPool := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1b", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}

	if lostAnswer {
		// The launch happened but its answer was lost: the slot keeps its
		// instance; the new one carries a generation the slot does not
		// have, an orphan stopped after the grace period.
		e.cloud.LoseNextLaunchResponses(1)
		e.r.Plans = staticPlan{&toSpot}
		e.step(time.Minute)
		e.r.Plans = staticPlan{base}
		if s := e.slots()[id]; s.InstanceID != before.InstanceID || s.Generation != before.Generation {
			t.Fatalf("a move whose answer was lost changed the slot: %+v", s)
		}
		for range 12 {
			e.step(time.Minute)
		}
		live := liveTagged(e.cloud)
		if len(live) != 1 || live[0].ID != before.InstanceID {
			t.Fatalf("after the orphan's grace want only %s alive, got %v", before.InstanceID, live)
		}
		e.checkNoDuplicates()
		return
	}
	// Refused: the on-demand instance runs on, the slot is as it was.
	e.r.Plans = staticPlan{&toSpot}
	e.cloud.FailPool(spotPool, providers.ErrInsufficientCapacity)
	e.step(time.Minute)
	s := e.slots()[id]
	if State(s.State) != Running || s.InstanceID != before.InstanceID || s.Generation != before.Generation || s.Capacity != string(pricing.OnDemand) {
		t.Fatalf("a refused move changed the slot: before %+v, after %+v", before, s)
	}
	live := liveTagged(e.cloud)
	if len(live) != 1 || live[0].ID != before.InstanceID {
		t.Fatalf("after a refused move want only %s alive, got %v", before.InstanceID, live)
	}
	if !e.r.Unavailable.Blocked(spotPool, e.clk.Now()) {
		t.Fatal("the refused pool is not blocked")
	}
	if len(e.events("fleet.launch_failed")) != 1 {
		t.Fatalf("want one launch_failed event, got %d", len(e.events("fleet.launch_failed")))
	}

	if lose {
		// A new leader (nothing in memory) replaces the lost instance on
		// demand: the new launch takes the generation after the refused
		// one, not the refused one's (slot, generation) again.
		e.r.Plans = staticPlan{base}
		e.r = &Reconciler{Store: e.r.Store, Computes: e.r.Computes, Agents: e.r.Agents, Plans: e.r.Plans, Tokens: e.r.Tokens,
			Unavailable: &Unavailable{}, Now: e.r.Now, Options: e.r.Options}
		if err := e.cloud.Terminate(context.Background(), providers.InstanceRef{Cloud: pricing.AWS, ID: before.InstanceID}); err != nil {
			t.Fatal(err)
		}
		e.step(time.Minute)
		if s := e.slots()[id]; s.Generation != before.Generation+2 || s.InstanceID == before.InstanceID || s.InstanceID == "" {
			t.Fatalf("replacement after a refused launch-first: want generation %d on a new instance, got %+v", before.Generation+2, s)
		}
		e.checkNoDuplicates()
		return
	}
	// The pool has capacity again and its block ran out: the move happens,
	// the on-demand instance is stopped in the same pass.
	e.cloud.FailPool(spotPool, nil)
	e.step(5 * time.Minute)
	s = e.slots()[id]
	if s.InstanceID == before.InstanceID || s.Zone != "us-east-1b" || s.Capacity != string(pricing.Spot) {
		t.Fatalf("slot not moved to spot in us-east-1b: %+v", s)
	}
	if s.Generation <= before.Generation+1 {
		t.Fatalf("generation %d: want past the refused launch's %d", s.Generation, before.Generation+1)
	}
	for _, in := range e.cloud.Instances() {
		if in.ID == before.InstanceID && in.State != providers.StateTerminated {
			t.Fatalf("the on-demand instance %s is still %s after the move", in.ID, in.State)
		}
	}
	for _, d := range []time.Duration{time.Minute, time.Minute, time.Minute} {
		e.step(d)
	}
	if s := e.slots()[id]; State(s.State) != Running || s.Capacity != string(pricing.Spot) {
		t.Fatalf("moved slot not running on spot: %+v", s)
	}
	e.checkNoDuplicates()
}

// TestOnDemandFallbackTakesCheapestAlternative: a job planned on spot of one
// instance type runs on demand on the cheapest on-demand placement the
// solver finds for it (another cloud here, 19% cheaper), within the
// policy's limits; with the cheaper cloud ruled out, or no cheaper
// alternative, it runs the planned type on demand as before. Before, the
// live stage's on-demand was always the planned type in the planned
// region.
func TestOnDemandFallbackTakesCheapestAlternative(t *testing.T) {
	gcp := gcpV100
	job := func(clouds string, decider string) *policy.Policy {
		p, err := policy.Parse("test.yaml", []byte(fmt.Sprintf(`
clouds: [%s]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 10, reference_gpu: V100}
    deadline: 40h
    checkpoint_interval: 30m
    restart_overhead: 5m
    spot: prefer
    spot_policy: %s
`, clouds, decider)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		clouds  string
		gcpOD   float64
		decider string
		want    string // cloud/zone/capacity of the decision
	}{
		{"on demand on the cheaper cloud", "aws, gcp", 2.48, spotpolicy.PolicyOnDemand, "gcp/us-central1-a/on-demand"},
		{"the cheaper cloud not allowed", "aws", 2.48, spotpolicy.PolicyOnDemand, "aws/us-east-1a/on-demand"},
		{"no cheaper alternative", "aws, gcp", 3.06, spotpolicy.PolicyOnDemand, "aws/us-east-1a/on-demand"},
		{"spot stays spot", "aws, gcp", 2.48, spotpolicy.PolicyGreedy, "aws/us-east-1a/spot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gcp
			g.OnDemandPrice = tc.gcpOD
			cat := pricing.NewCatalog([]pricing.Offer{p3("us-east-1a", 0.9), p3("us-east-1b", 0.95), g}, t0, "test")
			pol := job(tc.clouds, tc.decider)
			src, plan := fallbackPlan(t, pol, cat, trainPlacement(1))
			p := plan.Placements[0]
			if len(p.Groups) != 1 || p.Groups[0].Instances != 1 {
				t.Fatalf("want one group of one instance, got %+v", p.Groups)
			}
			gr := p.Groups[0]
			if got := fmt.Sprintf("%s/%s/%s", gr.Cloud, gr.Zone, gr.Capacity); got != tc.want {
				t.Fatalf("placed on %s, want %s (%s)", got, tc.want, src.Decisions()["train"].Reason)
			}
			if gr.Capacity == pricing.OnDemand && gr.PricePerHour != min(3.06, tc.gcpOD) && strings.Contains(tc.clouds, "gcp") {
				t.Errorf("on-demand price %.2f, want %.2f", gr.PricePerHour, min(3.06, tc.gcpOD))
			}
			if d := Desired(plan); len(d) != 1 || d[0].Offer.Cloud != gr.Cloud || d[0].Capacity != gr.Capacity {
				t.Fatalf("slots %+v do not follow the placement", d)
			}
		})
	}
}

// TestPriceMoveOutcome: a move between spot pools that left the job on the
// instance it was to leave (the launch refused, launch first) holds the
// target pool back from price moves for an hour, doubling to eight; one
// that reached the pool clears its wait.
func TestPriceMoveOutcome(t *testing.T) {
	pools := []livePool{{key: "a"}, {key: "b"}}
	j := &liveJob{}
	on := func(pool int) spotpolicy.Action { return spotpolicy.RunSpot(pool) }
	for i, st := range []struct {
		at   time.Duration
		cur  spotpolicy.Action
		inst string
		want time.Duration // held from at, 0: not held
	}{
		{0, on(0), "i-1", time.Hour},
		{time.Hour, on(0), "i-1", 2 * time.Hour},
		{3 * time.Hour, on(0), "i-1", 4 * time.Hour},
		{7 * time.Hour, on(0), "i-1", 8 * time.Hour},
		{15 * time.Hour, on(0), "i-1", 8 * time.Hour},
		{23 * time.Hour, on(1), "i-2", 0}, // reached b
		{24 * time.Hour, on(1), "i-2", 0},
	} {
		j.moveTo, j.moveFrom = "b", "i-1"
		now := t0.Add(st.at)
		j.priceMoveOutcome(st.cur, st.inst, pools, now)
		got := time.Duration(0)
		if h := j.moveHeld["b"]; h.After(now) {
			got = h.Sub(now)
		}
		if got != st.want {
			t.Fatalf("step %d: pool b held for %s, want %s", i, got, st.want)
		}
	}
}

// TestOnDemandFallbackCountsOthersUse: the on-demand alternative may use
// only what the rest of the plan leaves of each quota (GPUs) and budget
// (monthly cost). The GCP alternative costs about $25 for the job's 10
// GPU-hours; the other workload's placement holds 1 GCP GPU and spends $30
// a month.
func TestOnDemandFallbackCountsOthersUse(t *testing.T) {
	gcp := gcpV100
	cat := pricing.NewCatalog([]pricing.Offer{p3("us-east-1a", 0.9), p3("us-east-1b", 0.95), gcp}, t0, "test")
	for _, tc := range []struct {
		name, otherTeam, limits string
		want                    string
	}{
		{"quota with room", "ml", "quotas: [{cloud: gcp, max_gpus: 2}]", "gcp/us-central1-a/on-demand"},
		{"quota filled by the other workload", "ml", "quotas: [{cloud: gcp, max_gpus: 1}]", "aws/us-east-1a/on-demand"},
		{"budget with room", "ml", "budgets: [{name: all, monthly_usd: 60}]", "gcp/us-central1-a/on-demand"},
		{"budget spent by the other workload", "ml", "budgets: [{name: all, monthly_usd: 50}]", "aws/us-east-1a/on-demand"},
		{"team budget spent by the team", "ml", "budgets: [{name: ml, team: ml, monthly_usd: 50}]", "aws/us-east-1a/on-demand"},
		{"another team's spend", "web", "budgets: [{name: ml, team: ml, monthly_usd: 50}]", "gcp/us-central1-a/on-demand"},
		{"the other workload's own budget", "ml", "budgets: [{name: other, workload: other, monthly_usd: 50}]", "gcp/us-central1-a/on-demand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.Parse("test.yaml", []byte(fmt.Sprintf(`
clouds: [aws, gcp]
workloads:
  - name: train
    kind: training
    team: ml
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 10, reference_gpu: V100}
    deadline: 40h
    checkpoint_interval: 30m
    restart_overhead: 5m
    spot: prefer
    spot_policy: %s
  - name: other
    kind: batch
    team: %s
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 10, reference_gpu: V100}
    spot: never
%s
`, spotpolicy.PolicyOnDemand, tc.otherTeam, tc.limits)))
			if err != nil {
				t.Fatal(err)
			}
			inner := trainPlacement(1)
			inner.Placements = append(inner.Placements, optimizer.Placement{Workload: "other", Kind: "batch", Cloud: pricing.GCP, Region: "us-central1",
				Zone: "us-central1-a", InstanceType: gcp.InstanceType, GPU: pricing.V100, Capacity: pricing.OnDemand, GPUs: 1, Instances: 1, RelativeSpeed: 1,
				MonthlyCost: 30, Groups: []optimizer.Group{{Cloud: pricing.GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: gcp.InstanceType, GPU: pricing.V100,
					GPUsPerInstance: 1, Instances: 1, Capacity: pricing.OnDemand, PricePerHour: 2.48}}})
			src, plan := fallbackPlan(t, pol, cat, inner)
			gr := plan.Placements[0].Groups[0]
			if got := fmt.Sprintf("%s/%s/%s", gr.Cloud, gr.Zone, gr.Capacity); got != tc.want {
				t.Fatalf("placed on %s, want %s (%s)", got, tc.want, src.Decisions()["train"].Reason)
			}
		})
	}
}

// gcpV100 is a GCP V100 offer on demand only, cheaper than p3.2xlarge on
// demand ($3.06/h): the on-demand alternative of the fallback tests.
var gcpV100 = pricing.Offer{Cloud: pricing.GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: "n1-standard-8+v100", GPU: pricing.V100,
	GPUCount: 1, GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 30, OnDemandPrice: 2.48, ObservedAt: t0, Source: "test"}

// fallbackPlan runs the training stage once over inner for the pending
// job "train" of pol and returns the stage and its plan.
func fallbackPlan(t *testing.T, pol *policy.Policy, cat *pricing.Catalog, inner *optimizer.Plan) (*TrainingSource, *optimizer.Plan) {
	t.Helper()
	src := &TrainingSource{Inner: staticPlan{inner}, Policy: func() *policy.Policy { return pol },
		Catalog: func() *pricing.Catalog { return cat }, Fleet: &fakeFleet{slots: []store.SlotRecord{{ID: "train/0", Workload: "train",
			Kind: "training", State: string(Pending), CreatedAt: t0}}},
		Tracker: &spotpolicy.LiveTracker{}, Now: func() time.Time { return t0 }}
	plan, err := src.Plan(context.Background(), &Unavailable{})
	if err != nil {
		t.Fatal(err)
	}
	return src, plan
}

// TestPriceMoveNeedsSlack: a price move spends a changeover and the unsaved
// work out of the job's slack; the stage takes it only while the slack left
// covers another changeover, since a preemption in the new pool would
// otherwise send the job to on-demand for the rest of its work.
func TestPriceMoveNeedsSlack(t *testing.T) {
	const changeover = 600.0 // s
	for _, tc := range []struct {
		name  string
		slack float64 // s, before the move
		move  bool
	}{
		{"hours of slack", 5 * 3600, true},
		{"slack for the move and another changeover", 2*changeover + 120 + 60, true},
		{"slack for the move only", 2*changeover + 120 - 60, false},
		{"20 minutes of slack", 20 * 60, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 10 h of work, 2 h done of which all but 2 minutes saved; the
			// job runs on spot in pool 0 at $0.90/h, pool 1 sells at $0.45/h.
			s := &spotpolicy.State{Tick: 120, Gap: 60, Work: 10 * 3600, Done: 2 * 3600, Saved: 2*3600 - 120,
				Changeover: changeover, Overhead: 60, Current: spotpolicy.RunSpot(0),
				Pools: []spotpolicy.Pool{{Available: true, Run: 120, Frac: 1}, {Available: true, Run: 120, Frac: 1}}}
			// Slack = deadline − elapsed − remaining work − changeover.
			s.Deadline = s.Elapsed() + s.RemainingWork() + changeover + tc.slack
			src := &TrainingSource{Tracker: &spotpolicy.LiveTracker{}}
			pools := []livePool{{key: "aws/use1-az1/p3.2xlarge", price: 0.90}, {key: "aws/use1-az2/p3.2xlarge", price: 0.45}}
			got, reason := src.hysteresis(s, pools, []bool{false, false}, spotpolicy.RunSpot(1), "cheaper", nil) // (the tracker heard of neither)
			if moved := got == spotpolicy.RunSpot(1); moved != tc.move {
				t.Errorf("moved = %v (%s), want %v", moved, reason, tc.move)
			}
		})
	}
}
