package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/internal/shareddata"
)

// heldOutSet is one set of real zones replayed together.
type heldOutSet struct {
	Name  string // folder:zone+zone
	Pools *Pools
}

// heldOutFolders are the trace folders of ../shared/data/spot-traces with
// GPU or CPU instances the inference policy can be replayed on.
var heldOutFolders = []string{
	"availability/1-node/aws-02-15-2023",
	"availability/1-node/aws-10-26-2022",
	"availability/16-node/aws-08-27-2023",
	"preemption/1-node/aws-04-22-2023",
	"preemption/4-node/aws-08-03-2023",
	"preemption/1-node/aws-04-19-2023",
	"preemption/1-node/gcp-04-30-2023",
}

// subsets lists the index sets of size k out of n, in lexicographic order.
func subsets(n, k int) [][]int {
	var out [][]int
	var rec func(from int, cur []int)
	rec = func(from int, cur []int) {
		if len(cur) == k {
			out = append(out, append([]int(nil), cur...))
			return
		}
		for i := from; i < n; i++ {
			rec(i+1, append(cur, i))
		}
	}
	rec(0, nil)
	return out
}

// heldOutSets loads every folder whole and every subset of two and three of
// its zones (zones of different instance kinds, as in aws-10-26-2022, are
// grouped by kind first, then all together). Singles are included for the
// multi-node folders, where one zone can hold the whole target.
func heldOutSets(t testing.TB) []heldOutSet {
	t.Helper()
	root := shareddata.Dir(t, "spot-traces")
	var sets []heldOutSet
	for _, folder := range heldOutFolders {
		trs, err := LoadTraces(filepath.Join(root, folder))
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string][]*Trace{}
		for _, tr := range trs {
			kind := tr.Name[strings.IndexByte(tr.Name, '_')+1:]
			groups[kind] = append(groups[kind], tr)
		}
		add := func(ts []*Trace) {
			names := make([]string, len(ts))
			for i, tr := range ts {
				names[i] = tr.Name
			}
			p, err := NewPools(ts)
			if err != nil {
				t.Fatal(err)
			}
			sets = append(sets, heldOutSet{Name: folder + ":" + strings.Join(names, "+"), Pools: p})
		}
		if len(groups) > 1 {
			add(trs)
		}
		kinds := make([]string, 0, len(groups))
		for k := range groups {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		multi := strings.Contains(folder, "/4-node/") || strings.Contains(folder, "/16-node/")
		for _, kind := range kinds {
			g := groups[kind]
			sizes := []int{2, 3}
			if multi {
				sizes = append(sizes, 1)
			}
			if len(g) > 3 {
				sizes = append(sizes, len(g))
			}
			for _, k := range sizes {
				if k > len(g) {
					continue
				}
				for _, idx := range subsets(len(g), k) {
					ts := make([]*Trace, len(idx))
					for i, j := range idx {
						ts[i] = g[j]
					}
					add(ts)
				}
			}
		}
	}
	return sets
}

var heldOutSetting = Inference{Target: 4, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices, History: DefaultHistory, Goal: 0.99}

// crossFolderShortMax is the most sets of crossFolderSets(t, 100, 1) that
// the default policy may leave below 99% at target: 18 before it spent the
// goal's error budget, 3 since (docs/BENCHMARKS.md, "Session 23: the error
// budget").
const crossFolderShortMax = 3

// TestInferenceHeldOutTable replays every held-out set against every
// inference policy and checks each against the bound; with
// GPUBROKER_HELDOUT_TABLE set it prints the table of docs/BENCHMARKS.md,
// "Inference hedging on held-out traces".
func TestInferenceHeldOutTable(t *testing.T) {
	table := os.Getenv("GPUBROKER_HELDOUT_TABLE") != ""
	for _, s := range heldOutSets(t) {
		lb, err := InferenceCostBound(heldOutSetting, s.Pools, 0.99)
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s | %d | %.3f", s.Name, len(s.Pools.Traces), lb)
		for _, name := range spotpolicy.InferencePolicies() {
			pol, _ := spotpolicy.NewInference(name)
			r, err := RunInference(heldOutSetting, s.Pools, pol, false)
			if err != nil {
				t.Fatal(err)
			}
			belowBound(t, s.Name, name, lb, r)
			line += fmt.Sprintf(" | %7.3f%% %.3f", r.AtTarget*100, r.Normalized)
		}
		if table {
			t.Log(line)
		}
	}
}

// belowBound fails the test where a policy keeps 99% at target for less
// than InferenceCostBound, which no policy can: the bound or the
// simulator would be wrong.
func belowBound(t *testing.T, set, policy string, bound float64, r InferenceResult) {
	t.Helper()
	if r.AtTarget >= 0.99 && r.Normalized < bound-1e-9 {
		t.Errorf("%s: %s at %.3f%% costs %.4f, below the bound %.4f", set, policy, r.AtTarget*100, r.Normalized, bound)
	}
}

// crossFolderSets draws n seeded sets of 2 to 6 zones from all the trace
// files of heldOutFolders together, so zones of different folders (and
// ticks, resampled by NewPools) are replayed as one service's pools.
func crossFolderSets(t testing.TB, n int, seed uint64) []heldOutSet {
	t.Helper()
	root := shareddata.Dir(t, "spot-traces")
	var all []*Trace
	var names []string
	for _, folder := range heldOutFolders {
		trs, err := LoadTraces(filepath.Join(root, folder))
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs {
			all = append(all, tr)
			names = append(names, folder[strings.LastIndexByte(folder, '/')+1:]+"/"+tr.Name)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	sets := make([]heldOutSet, 0, n)
	for range n {
		idx := rng.Perm(len(all))[:2+rng.IntN(5)]
		ts := make([]*Trace, len(idx))
		nm := make([]string, len(idx))
		for i, j := range idx {
			ts[i], nm[i] = all[j], names[j]
		}
		p, err := NewPools(ts)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, heldOutSet{Name: strings.Join(nm, "+"), Pools: p})
	}
	return sets
}

// replayDefault replays the pools against the default inference policy in
// heldOutSetting, with the cost bound at 99% beside it.
func replayDefault(t testing.TB, p *Pools) (bound float64, r InferenceResult) {
	t.Helper()
	bound, err := InferenceCostBound(heldOutSetting, p, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := spotpolicy.NewInference(spotpolicy.DefaultInference)
	if r, err = RunInference(heldOutSetting, p, pol, false); err != nil {
		t.Fatal(err)
	}
	return bound, r
}

// TestInferenceCrossFolderTable replays crossFolderSets against the default
// policy and checks its cost against the bound; with GPUBROKER_HELDOUT_TABLE
// set it prints the table of docs/BENCHMARKS.md, "Zones of different
// folders".
func TestInferenceCrossFolderTable(t *testing.T) {
	table := os.Getenv("GPUBROKER_HELDOUT_TABLE") != ""
	reach, met, short := 0, 0, 0
	for _, s := range crossFolderSets(t, 100, 1) {
		lb, r := replayDefault(t, s.Pools)
		belowBound(t, s.Name, spotpolicy.DefaultInference, lb, r)
		status := "out of reach"
		switch {
		case r.AtTarget < 0.99:
			status = "below 99%"
			short++
		case lb > 0.60:
		case r.Normalized <= 0.60:
			status = "met"
			met++
		default:
			status = "open"
		}
		if lb <= 0.60 {
			reach++
		}
		if table {
			t.Logf("| %s | %d | %d s, %.0f h | %.3f | %.3f%% / %.3f | %s |", s.Name, len(s.Pools.Traces), s.Pools.Gap,
				float64(s.Pools.Len*s.Pools.Gap)/3600, lb, r.AtTarget*100, r.Normalized, status)
		}
	}
	t.Logf("bound ≤ 0.60 on %d sets; goal met on %d; below 99%% at target on %d", reach, met, short)
	if short > crossFolderShortMax {
		t.Errorf("%d sets below 99%% at target; want at most %d", short, crossFolderShortMax)
	}
}

// costGoalSets are the sets on which the default policy meets the issue's
// cost goal (≤ 60% of all-on-demand) at ≥ 99% at target; the test keeps
// them there. On every other set with a lower bound under 0.60 the goal is
// not met today (docs/BENCHMARKS.md, "Inference hedging on held-out
// traces"): those are asserted at target and no dearer than on-demand, and
// their gap to the bound is logged.
var costGoalSets = map[string]bool{
	"availability/1-node/aws-02-15-2023:us-east-1a_v100_1+us-east-1c_v100_1+us-east-1d_v100_1+us-east-1f_v100_1+us-east-2a_v100_1+us-east-2b_v100_1+us-west-2a_v100_1+us-west-2b_v100_1+us-west-2c_v100_1": true,
	"preemption/1-node/gcp-04-30-2023:us-central1-a_c3-88+us-central1-b_c3-88+us-central1-c_c3-88+us-east1-b_c3-88":                                                                                        true,
}

// costCapSets are open sets (bound under 0.60, goal not met) whose cost the
// policy brought down, each with a cap just above its figure in
// docs/BENCHMARKS.md so that the gain is kept: the 4-node zones, whose
// capacity drops by some replicas more often than by all of them.
var costCapSets = map[string]float64{
	"preemption/4-node/aws-08-03-2023:us-east-1f_v100_1+us-east-2a_v100_1":                   0.80,
	"preemption/4-node/aws-08-03-2023:us-east-1f_v100_1+us-west-2c_v100_1":                   0.95,
	"preemption/4-node/aws-08-03-2023:us-east-2a_v100_1+us-west-2c_v100_1":                   0.71,
	"preemption/4-node/aws-08-03-2023:us-east-1f_v100_1+us-east-2a_v100_1+us-west-2c_v100_1": 0.71,
	"preemption/4-node/aws-08-03-2023:us-east-2a_v100_1":                                     0.73,
}

// shortSets are the sets on which the default policy stays below 99% at
// target, with the share it does keep (docs/BENCHMARKS.md). None since the
// policy spends the goal's error budget: the last one,
// aws-04-22-2023 us-west-2b+us-west-2c at 98.97% before, two one-instance
// zones often preempted within minutes of each other, is at 99% now.
var shortSets = map[string]float64{}

// TestInferenceHeldOut runs the default inference policy (target 4, 10 min
// ready delay) over every real trace folder and every subset of two and
// three of its zones: at least 99% of time at target everywhere; at most
// 60% of all-on-demand where the goal is met; no dearer than recorded on
// the open sets whose cost came down (costCapSets); elsewhere, including
// where InferenceCostBound shows 60% is out of reach for any policy at 99%
// (few zones of one instance each cannot hold four spot replicas), no
// dearer than on-demand (0.5% allowed for changeovers; none on the
// 16-node zones).
func TestInferenceHeldOut(t *testing.T) {
	sets := heldOutSets(t)
	seen := map[string]bool{}
	for _, s := range sets {
		seen[s.Name] = true
		if testing.Short() && !costGoalSets[s.Name] && strings.Count(s.Name, "+") == 1 {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			lb, r := replayDefault(t, s.Pools)
			want := 0.99
			if v, ok := shortSets[s.Name]; ok {
				want = v
			}
			if r.AtTarget < want {
				t.Errorf("%.3f%% at target at %.3f of on-demand; want ≥ %.2f%%", r.AtTarget*100, r.Normalized, want*100)
			}
			switch {
			case costGoalSets[s.Name]:
				if r.Normalized > 0.60 {
					t.Errorf("cost %.3f of on-demand; want ≤ 0.60 (bound %.3f)", r.Normalized, lb)
				}
			case costCapSets[s.Name] > 0:
				if r.Normalized > costCapSets[s.Name] {
					t.Errorf("cost %.3f of on-demand; want ≤ %.2f as recorded (bound %.3f)", r.Normalized, costCapSets[s.Name], lb)
				}
			case r.Normalized > 1.005:
				t.Errorf("cost %.3f of on-demand; want at most 0.5%% over all-on-demand (bound %.3f)", r.Normalized, lb)
			case strings.Contains(s.Name, "/16-node/") && r.Normalized > 1:
				// Zones that often come back for a few ticks only: the
				// policy must not pay more for its moves than spot saves
				// (1.004–1.009 before the moves were weighed).
				t.Errorf("cost %.3f of on-demand; want below all-on-demand (bound %.3f)", r.Normalized, lb)
			case lb <= 0.60:
				t.Logf("cost goal open: %.3f of on-demand at %.3f%%, bound %.3f", r.Normalized, r.AtTarget*100, lb)
			}
			if r.Normalized < lb-1e-9 && r.AtTarget >= 0.99 {
				t.Errorf("cost %.3f below the lower bound %.3f: the bound or the simulator is wrong", r.Normalized, lb)
			}
		})
	}
	var named []string
	for name := range costGoalSets {
		named = append(named, name)
	}
	for name := range shortSets {
		named = append(named, name)
	}
	for name := range costCapSets {
		named = append(named, name)
	}
	for _, name := range named {
		if !seen[name] {
			t.Errorf("set %s not found among the trace sets", name)
		}
	}
}

// TestInferenceWholeTrees replays whole trace folders and trees of
// ../shared/data/spot-traces as one service's zones (LoadTraces reads a
// directory; NewPools resamples the ticks): the goal (≥ 99% at target at
// ≤ 60% of all-on-demand) is met on every one but the three 16-node zones,
// whose bound is under 0.60 but which no policy that cannot foresee their
// losses brings near it (docs/BENCHMARKS.md, "Zones of different
// folders"); there at least no dearer than on-demand.
func TestInferenceWholeTrees(t *testing.T) {
	root := shareddata.Dir(t, "spot-traces")
	for _, tc := range []struct {
		dir     string
		zones   int
		maxCost float64
	}{
		{".", 34, 0.60},
		{"availability", 20, 0.60},
		{"availability/1-node", 17, 0.60},
		{"availability/16-node", 3, 1.00},
		{"preemption", 14, 0.60},
		{"preemption/1-node", 11, 0.60},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			ts, err := LoadTraces(filepath.Join(root, tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != tc.zones {
				t.Fatalf("%d traces; want %d", len(ts), tc.zones)
			}
			p, err := NewPools(ts)
			if err != nil {
				t.Fatal(err)
			}
			_, r := replayDefault(t, p)
			if r.AtTarget < 0.99 || r.Normalized > tc.maxCost {
				t.Errorf("%.3f%% at target at %.3f of on-demand; want ≥ 99%% at ≤ %.2f", r.AtTarget*100, r.Normalized, tc.maxCost)
			}
		})
	}
}

// TestInferenceCostBound checks the bound on hand-made zones: one zone
// always able to hold the target costs the spot share; no capacity costs
// on-demand; capacity for half the target half the time, with 50% at
// target allowed, costs spot for the cheap half only; with a ready delay of
// one tick, a zone that is never up two ticks running serves nothing on
// spot (after the first tick), and one up two ticks of three serves on the
// second of them.
func TestInferenceCostBound(t *testing.T) {
	c := Inference{Target: 2, Prices: Prices{OnDemand: 3, Spot: 1}}
	mk := func(avail ...int) *Pools {
		return mustPools(t, &Trace{Name: "a", Gap: 60, Avail: avail})
	}
	tests := []struct {
		name     string
		p        *Pools
		atTarget float64
		want     float64
	}{
		{"always spot", mk(2, 2, 2, 2), 1, 1.0 / 3},
		{"never spot", mk(0, 0, 0, 0), 1, 1},
		{"half the time one", mk(1, 1, 0, 0), 1, (2*(1+3) + 2*6) / (4 * 6.0)},
		{"half may be short", mk(1, 1, 0, 0), 0.5, 2 * (1 + 3) / (4 * 6.0)},
	}
	delayed := Inference{Target: 2, ReadyDelay: time.Minute, Prices: Prices{OnDemand: 3, Spot: 1}}
	for _, tc := range tests {
		got, err := InferenceCostBound(c, tc.p, tc.atTarget)
		if err != nil {
			t.Fatal(err)
		}
		if d := got - tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %.4f; want %.4f", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		p    *Pools
		want float64
	}{
		// The first tick has no earlier one to check (the bound stays
		// low there); after it, a replica serving on spot needs the zone
		// up on the tick before as well.
		{"flapping, ready delay one tick", mk(2, 0, 2, 0, 2, 0), (2.0/6 + 5*1) / 6},
		{"up two of three, ready delay one tick", mk(2, 2, 0, 2, 2, 0), (3*(2.0/6) + 3*1) / 6},
		{"no delay", mk(2, 0, 2, 0, 2, 0), 0.5*(2.0/6) + 0.5},
	} {
		cc := delayed
		if tc.name == "no delay" {
			cc.ReadyDelay = 0
		}
		got, err := InferenceCostBound(cc, tc.p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d := got - tc.want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %.4f; want %.4f", tc.name, got, tc.want)
		}
	}
	if _, err := InferenceCostBound(c, mk(1), 1.5); err == nil {
		t.Error("availability 1.5 accepted")
	}
}
