package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/cputime"
	"github.com/gpubroker/gpubroker/internal/heapprobe"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

// memAgents is an agent source held in memory (the benchmark measures the
// reconciler, the fleet tables and the cloud calls; the agents' table has
// its own benchmark in store/).
type memAgents []store.InstanceRecord

func (m memAgents) ListInstances(context.Context, string, string) ([]store.InstanceRecord, error) {
	return m, nil
}

// benchFleet builds a settled fleet of n instances over 3 clouds × regions
// regions, every slot running with a fresh heartbeat, in a SQLite store.
func benchFleet(b *testing.B, regions, n int) (*Reconciler, map[pricing.Cloud]*fake.Compute, store.Fence) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	br, err := st.Broker(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fst, err := br.Fleet(ctx)
	if err != nil {
		b.Fatal(err)
	}
	clk := &clock{t: t0}
	clouds := []pricing.Cloud{pricing.AWS, pricing.GCP, pricing.Azure}
	computes := map[pricing.Cloud]providers.Compute{}
	fakes := map[pricing.Cloud]*fake.Compute{}
	plan := &optimizer.Plan{}
	per := n / (len(clouds) * regions)
	extra := n - per*len(clouds)*regions
	for _, c := range clouds {
		var offers []pricing.Offer
		for r := range regions {
			region := fmt.Sprintf("%s-region-%02d", c, r)
			o := pricing.Offer{Cloud: c, Region: region, Zone: region + "-a", InstanceType: "gpu-1", GPU: pricing.L4, GPUCount: 1, OnDemandPrice: 1}
			offers = append(offers, o)
			k := per
			if extra > 0 {
				k++
				extra--
			}
			plan.Placements = append(plan.Placements, optimizer.Placement{Workload: "svc-" + region, Kind: "inference",
				Groups: []optimizer.Group{{Cloud: c, Region: region, Zone: o.Zone, InstanceType: o.InstanceType, GPU: o.GPU,
					GPUsPerInstance: 1, Instances: k, Capacity: pricing.OnDemand, PricePerHour: 1}}})
		}
		f := fake.NewCompute(fake.ComputeConfig{Cloud: c, Offers: offers, Now: clk.Now, LaunchLatency: time.Second})
		fakes[c], computes[c] = f, f
	}
	// Seed: every slot launched and recorded, as a settled fleet is.
	var ch store.FleetChanges
	var agents memAgents
	for _, sp := range Desired(plan) {
		tok := ClientToken("gpubroker", sp.ID, 1)
		in, err := fakes[sp.Offer.Cloud].Launch(ctx, providers.LaunchRequest{ClientToken: tok, Candidates: []pricing.Offer{sp.Offer},
			Capacity: sp.Capacity, Tags: map[string]string{TagFleet: "gpubroker", TagSlot: sp.ID, TagToken: tok, TagWorkload: sp.Workload}})
		if err != nil {
			b.Fatal(err)
		}
		ch.Slots = append(ch.Slots, store.SlotRecord{ID: sp.ID, Workload: sp.Workload, Kind: sp.Kind, Index: sp.Index, Cloud: string(in.Cloud),
			Region: in.Region, Zone: in.Zone, InstanceType: in.InstanceType, GPU: string(sp.Offer.GPU), Capacity: string(in.Capacity),
			PricePerHour: sp.PricePerHour, State: string(Running), Generation: 1, InstanceID: in.ID, StateSince: t0, CreatedAt: t0,
			LaunchedAt: in.LaunchedAt, RunningAt: t0})
		ch.Intents = append(ch.Intents, store.IntentRecord{Token: tok, SlotID: sp.ID, Generation: 1, Epoch: 1, Cloud: string(in.Cloud),
			Capacity: string(in.Capacity), State: store.IntentLaunched, InstanceID: in.ID, Region: in.Region, Zone: in.Zone, CreatedAt: t0, UpdatedAt: t0})
		ch.Instances = append(ch.Instances, store.FleetInstanceRecord{ID: in.ID, Cloud: string(in.Cloud), Region: in.Region, Zone: in.Zone,
			InstanceType: in.InstanceType, Capacity: string(in.Capacity), State: string(providers.StateRunning), SlotID: sp.ID, Token: tok,
			LaunchedAt: in.LaunchedAt.UTC(), FirstSeen: t0})
		agents = append(agents, store.InstanceRecord{ID: in.ID, Cloud: string(in.Cloud), State: store.StateRunning, RegisteredAt: t0})
	}
	if err := fst.Apply(ctx, store.Fence{}, ch); err != nil {
		b.Fatal(err)
	}
	clk.Add(time.Minute)
	for i := range agents {
		agents[i].LastHeartbeat = clk.Now()
	}
	r := &Reconciler{Store: fst, Computes: computes, Agents: agents, Plans: staticPlan{plan: plan}, Now: clk.Now,
		Options: Options{Mode: Apply, MaxInstances: 2 * n}}
	l, _, err := br.AcquireLease(ctx, lease, "bench", 24*time.Hour, clk.Now())
	if err != nil {
		b.Fatal(err)
	}
	return r, fakes, store.Fence{Lease: lease, Holder: "bench", Epoch: l.Epoch, Now: clk.Now()}
}

// BenchmarkReconcilePass is one reconcile pass over a settled fleet on the
// fake clouds: the cloud calls per pass must grow with the regions (one
// List page per region) and stay flat as instances grow.
func BenchmarkReconcilePass(b *testing.B) {
	for _, c := range []struct{ regions, n int }{{20, 10_000}, {20, 20_000}, {40, 10_000}} {
		b.Run(fmt.Sprintf("clouds=3/regions=%d/instances=%d", c.regions, c.n), func(b *testing.B) {
			r, fakes, f := benchFleet(b, c.regions, c.n)
			ctx := context.Background()
			if rep, err := r.Reconcile(ctx, f); err != nil || len(rep.Actions) != 0 || rep.Slots != c.n {
				b.Fatalf("settled fleet: %v, %d slots, actions %+v", err, rep.Slots, rep.Actions[:min(3, len(rep.Actions))])
			}
			for _, fk := range fakes {
				fk.ResetCalls()
			}
			var peak uint64
			b.ReportAllocs()
			cpu0 := cputime.Process()
			b.ResetTimer()
			for range b.N {
				peak = max(peak, heapprobe.Peak(func() {
					if _, err := r.Reconcile(ctx, f); err != nil {
						b.Fatal(err)
					}
				}))
			}
			b.StopTimer()
			cpu := cputime.Process() - cpu0
			calls := 0
			for _, fk := range fakes {
				for k, v := range fk.Calls() {
					if k == fake.APILaunch || k == fake.APITerminate {
						b.Fatalf("a settled fleet made %d %s calls", v, k)
					}
					calls += v
				}
			}
			b.ReportMetric(float64(calls)/float64(b.N), "api-calls/pass")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			// CPU time (user+system, all threads, heap probe included): on a
			// shared machine the wall clock also measures the other tenants.
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/pass")
		})
	}
}
