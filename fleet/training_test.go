package fleet

import (
	"context"
	"fmt"
	"math"
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
	plan, err := d.src.Plan(context.Background(), d.u)
	if err != nil {
		t.Fatal(err)
	}
	g := plan.Placements[0].Groups[0]
	spec := Desired(plan)[0]
	if State(s.State) != Running || (g.Move && elsewhere(s, &spec)) {
		if State(s.State) == Running {
			d.moves++
			d.saved = d.done // a voluntary stop checkpoints first
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
		d.saved = d.done
		if d.ckpt > 0 && d.done < d.work {
			d.saved = math.Floor(d.done/d.ckpt) * d.ckpt
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
					if tc.dies > deadline && decider != spotpolicy.PolicyOnDemand && d.onDemand > 0 {
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
