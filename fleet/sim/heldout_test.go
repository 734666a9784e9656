package sim

import (
	"fmt"
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
		files, err := filepath.Glob(filepath.Join(root, folder, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no traces in %s", folder)
		}
		sort.Strings(files)
		var trs []*Trace
		for _, f := range files {
			tr, err := LoadTrace(f)
			if err != nil {
				t.Fatal(err)
			}
			trs = append(trs, tr)
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

var heldOutSetting = Inference{Target: 4, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}

func TestInferenceHeldOutTable(t *testing.T) {
	if os.Getenv("GPUBROKER_HELDOUT_TABLE") == "" {
		t.Skip("set GPUBROKER_HELDOUT_TABLE=1 to print the table")
	}
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
			line += fmt.Sprintf(" | %7.3f%% %.3f", r.AtTarget*100, r.Normalized)
		}
		t.Log(line)
	}
}
