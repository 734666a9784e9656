package fleet

import (
	"slices"
	"testing"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TestHedgeAdmit: the services decide in parallel on a spot pool's
// capacity as the plan began; admit hands the pool's free capacity (its
// nominal capacity less the fleet's live spot instances there) to their new
// replicas in service order. A service whose new replicas do not all fit
// keeps what it runs, gets what is left, and runs its target on demand
// until its next decision; replicas a service already runs are never
// taken. Without admit, all three services launch their whole decision
// into the pool that just came back (9 new replicas for 3 free).
func TestHedgeAdmit(t *testing.T) {
	cat := hedgeCatalog()
	var pools []pricing.Offer
	for _, o := range cat.Offers() {
		if o.InstanceType == "g4dn.xlarge" && o.Region == "us-east-1" {
			pools = append(pools, o)
		}
	}
	if len(pools) != 3 {
		t.Fatalf("catalog: %d us-east-1 T4 pools, want 3", len(pools))
	}
	od := pools[0]
	keys := make([]providers.PoolKey, len(pools))
	for k, o := range pools {
		keys[k] = PoolOf(o, pricing.Spot)
	}
	const nominal = 4
	type svc struct {
		name    string
		running []int // live spot replicas per pool
		decided []int // the decision's spot replicas per pool
		target  int
		same    bool // a second placement of the service before it (one hedge)
		// after admit
		spot []int
		od   int
	}
	cases := []struct {
		name string
		use  []int // the fleet's live spot instances per pool (training jobs', services')
		svcs []svc
	}{
		{"all fit", []int{0, 0, 0}, []svc{
			{"a", []int{0, 0, 0}, []int{2, 1, 0}, 2, false, []int{2, 1, 0}, 1},
			{"b", []int{0, 0, 0}, []int{2, 1, 0}, 2, false, []int{2, 1, 0}, 1},
		}},
		{"the first in order gets the pool", []int{1, 0, 0}, []svc{
			{"a", []int{0, 0, 0}, []int{3, 0, 0}, 2, false, []int{3, 0, 0}, 1},
			{"b", []int{0, 0, 0}, []int{3, 0, 0}, 2, false, []int{0, 0, 0}, 2},
			{"c", []int{0, 0, 0}, []int{3, 0, 0}, 2, false, []int{0, 0, 0}, 2},
		}},
		{"what runs stays, the rest goes on demand", []int{4, 0, 0}, []svc{
			{"a", []int{2, 0, 0}, []int{3, 1, 0}, 3, false, []int{2, 1, 0}, 3},
			{"b", []int{2, 0, 0}, []int{2, 2, 0}, 2, false, []int{2, 2, 0}, 1},
		}},
		{"partly admitted", []int{0, 0, 0}, []svc{
			{"a", []int{0, 0, 0}, []int{3, 0, 0}, 2, false, []int{3, 0, 0}, 1},
			{"b", []int{0, 0, 0}, []int{2, 2, 0}, 2, false, []int{1, 2, 0}, 2},
		}},
		{"a service's second placement is not counted again", []int{0, 0, 0}, []svc{
			{"a", []int{0, 0, 0}, []int{3, 0, 0}, 2, false, []int{3, 0, 0}, 1},
			{"a", []int{0, 0, 0}, []int{3, 0, 0}, 2, true, []int{3, 0, 0}, 1},
			{"b", []int{0, 0, 0}, []int{1, 0, 0}, 2, false, []int{1, 0, 0}, 1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &HedgedSource{poolUse: map[providers.PoolKey]int{}, plans: 1} // (Plan counts its plans from 1)
			for k, n := range c.use {
				h.poolUse[keys[k]] = n
			}
			jobs := make([]hedgeJob, len(c.svcs))
			var hg *hedge
			for i, s := range c.svcs {
				dec, err := spotpolicy.NewInference(spotpolicy.InferenceAdaptive)
				if err != nil {
					t.Fatal(err)
				}
				if !s.same {
					hg = &hedge{policy: dec, zones: pools, keys: keys, nominal: []int{nominal, nominal, nominal},
						spotPool: make([]string, len(pools)), inter: make([]string, len(pools)),
						fleet: spotpolicy.Fleet{Spot: slices.Clone(s.decided), OnDemand: 1}} // one on demand beside the spot
				}
				zones := make([]spotpolicy.Zone, len(pools))
				for k := range zones {
					// As observePools sets it: the fleet's capacity less the
					// others', at least what the service runs.
					zones[k].Capacity = max(s.running[k], nominal-(c.use[k]-s.running[k]))
					zones[k].Spot = s.running[k]
				}
				p := optimizer.Placement{Workload: s.name, Kind: "inference", Groups: []optimizer.Group{{Cloud: pricing.AWS, Region: "us-east-1",
					Zone: "us-east-1a", InstanceType: "g4dn.xlarge", GPU: pricing.T4, GPUsPerInstance: 1, Instances: s.target, Capacity: pricing.OnDemand}}}
				jobs[i] = hedgeJob{p: &p, hg: hg, target: s.target, zones: zones, od: &od}
				if err := hg.placement(&jobs[i]); err != nil {
					t.Fatal(err)
				}
			}
			h.admit(jobs)
			for i, s := range c.svcs {
				spot := make([]int, len(pools))
				od := 0
				for _, g := range jobs[i].p.Groups {
					if g.Capacity == pricing.OnDemand {
						od += g.Instances
						continue
					}
					for k, o := range pools {
						if g.Zone == o.Zone {
							spot[k] += g.Instances
						}
					}
				}
				if !slices.Equal(spot, s.spot) || od != s.od {
					t.Errorf("%s: spot %v + %d on demand; want %v + %d", s.name, spot, od, s.spot, s.od)
				}
				if hg := jobs[i].hg; hg.trimmed {
					// The decision the log and the API show is the one that runs.
					n, want := 0, 0
					for _, v := range hg.last.Spot {
						n += v
					}
					for _, v := range s.spot {
						want += v
					}
					if n != want || hg.last.OnDemand != s.od {
						t.Errorf("%s: decision shown %v + %d on demand; want %d spot + %d", s.name, hg.last.Spot, hg.last.OnDemand, want, s.od)
					}
				}
			}
		})
	}
}
