package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

const propertyPolicy = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 3}
    work: {gpu_hours: 30, reference_gpu: V100}
    checkpoint_interval: 30m
    restart_overhead: 5m
    spot: only
  - name: serve
    kind: inference
    gpu: {models: [V100], count: 1}
    replicas: {min: 2, max: 6}
    spot: never
`

// TestPropertyNeverTwoInstancesPerSlot replays random sequences of cloud
// and broker events — preemptions, capacity and quota errors, throttling,
// lost launch answers, crashes before and after the launch call, leader
// changes, silent agents, failed listings — and checks after every pass
// that no slot ever has two live instances and no launch token started two;
// once the trouble stops, every slot must be running again.
func TestPropertyNeverTwoInstancesPerSlot(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runProperty(t, uint64(seed))
		})
	}
}

// TestPropertyOnPostgres runs a few sequences on PostgreSQL, the store of
// replicated brokers.
func TestPropertyOnPostgres(t *testing.T) {
	for seed := range 2 {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runPropertyOn(t, uint64(seed), newEnvDSN(t, testpg.DSN(t), propertyPolicy))
		})
	}
}

func runProperty(t *testing.T, seed uint64) {
	runPropertyOn(t, seed, newEnv(t, propertyPolicy))
}

func runPropertyOn(t *testing.T, seed uint64, e *env) {
	rng := rand.New(rand.NewPCG(seed, 42))
	holders := []string{"a", "b", "c"}
	var log []string
	defer func() {
		if t.Failed() {
			for _, l := range log {
				t.Log(l)
			}
		}
	}()
	pass := func() {
		e.lead(e.holder)
		_, err := e.r.Reconcile(context.Background(), e.fence())
		if err != nil && !errors.Is(err, store.ErrFenced) && !errors.Is(err, errCrash) {
			t.Fatalf("reconcile: %v", err)
		}
		e.checkNoDuplicates()
	}
	for i := 0; i < 30; i++ {
		op := rng.IntN(12)
		switch op {
		case 0, 1:
			d := time.Duration(rng.IntN(180)+1) * time.Second
			log = append(log, fmt.Sprintf("%d: wait %s", i, d))
			e.clk.Add(d)
		case 2:
			live := liveTagged(e.cloud)
			if len(live) > 0 {
				v := live[rng.IntN(len(live))]
				log = append(log, fmt.Sprintf("%d: preempt %s", i, v.ID))
				e.cloud.Preempt(v.ID)
			}
		case 3:
			z := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[rng.IntN(3)]
			ct := []pricing.CapacityType{pricing.Spot, pricing.OnDemand}[rng.IntN(2)]
			k := providers.PoolKey{Cloud: pricing.AWS, Zone: z, InstanceType: "p3.2xlarge", Capacity: ct}
			err := []error{providers.ErrInsufficientCapacity, providers.ErrQuotaExceeded}[rng.IntN(2)]
			log = append(log, fmt.Sprintf("%d: pool %v fails with %v", i, k, err))
			e.cloud.FailPool(k, err)
		case 4:
			log = append(log, fmt.Sprintf("%d: next launch answer lost", i))
			e.cloud.LoseNextLaunchResponses(1)
		case 5:
			log = append(log, fmt.Sprintf("%d: next launch throttled", i))
			e.cloud.FailNext(fake.APILaunch, providers.ErrThrottled)
		case 6:
			before := rng.IntN(2) == 0
			log = append(log, fmt.Sprintf("%d: crash (before launch call: %v) and restart", i, before))
			e.r.Computes[pricing.AWS] = &crashingCompute{Compute: e.cloud, before: before}
			pass()
			e.r.Computes[pricing.AWS] = e.cloud
			e.restart()
		case 7:
			next := holders[rng.IntN(len(holders))]
			log = append(log, fmt.Sprintf("%d: leader change to %s mid-launch", i, next))
			switched := false
			e.r.Computes[pricing.AWS] = &hookCompute{Compute: e.cloud, after: func() {
				if !switched {
					switched = true
					e.clk.Add(2 * time.Hour)
					e.cloud.Sync()
				}
			}}
			_, err := e.r.Reconcile(context.Background(), e.fence())
			if err != nil && !errors.Is(err, store.ErrFenced) {
				t.Fatal(err)
			}
			e.checkNoDuplicates()
			e.r.Computes[pricing.AWS] = e.cloud
			if switched {
				l, ok, err := e.broker.AcquireLease(context.Background(), lease, next+fmt.Sprint(i), time.Hour, e.clk.Now())
				if err != nil || !ok {
					t.Fatalf("lease: %v %v", ok, err)
				}
				e.holder, e.epoch = next+fmt.Sprint(i), l.Epoch
				e.restart()
			}
		case 8:
			live := liveTagged(e.cloud)
			if len(live) > 0 {
				v := live[rng.IntN(len(live))]
				log = append(log, fmt.Sprintf("%d: agent of %s goes silent", i, v.ID))
				e.deadAgents[v.ID] = true
			}
		case 9:
			log = append(log, fmt.Sprintf("%d: next listing fails", i))
			e.cloud.FailNext(fake.APIListPage, providers.ErrThrottled)
		case 10:
			q := rng.IntN(6)
			log = append(log, fmt.Sprintf("%d: quota %d", i, q))
			e.cloud.SetQuota(q)
		case 11:
			live := liveTagged(e.cloud)
			if len(live) > 0 {
				v := live[rng.IntN(len(live))]
				log = append(log, fmt.Sprintf("%d: %s stopped", i, v.ID))
				e.cloud.Stop(v.ID)
			}
		}
		e.cloud.Sync()
		e.agentsUp()
		pass()
	}
	// Calm: errors stop, capacity returns; every slot must refill.
	log = append(log, "calm")
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		for _, ct := range []pricing.CapacityType{pricing.Spot, pricing.OnDemand} {
			e.cloud.FailPool(providers.PoolKey{Cloud: pricing.AWS, Zone: z, InstanceType: "p3.2xlarge", Capacity: ct}, nil)
		}
	}
	e.cloud.SetQuota(0)
	for range 30 {
		e.clk.Add(2 * time.Minute)
		e.cloud.Sync()
		e.agentsUp()
		pass()
	}
	slots := e.slots()
	if len(slots) < 5 {
		t.Fatalf("only %d slots", len(slots))
	}
	for id, s := range slots {
		if State(s.State) != Running {
			t.Fatalf("slot %s not refilled after the calm: %+v\n%s", id, s, e.cloud.Describe())
		}
	}
	if n := len(liveTagged(e.cloud)); n != len(slots) {
		t.Fatalf("%d live tagged instances for %d slots:\n%s", n, len(slots), e.cloud.Describe())
	}
}
