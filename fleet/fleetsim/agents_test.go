package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// The agents' answers are reused when the clock moves (a pass's readers
// are done with them by then), never within an instant: an answer dropped
// because an agent came or went may still be read in that pass.
func TestAgentListsReusedOnlyAfterTheClockMoves(t *testing.T) {
	now := DefaultStart
	a := newAgents(func() time.Time { return now })
	a.add(&store.InstanceRecord{ID: "i-1", Workload: "svc", State: store.StateRunning})
	a.add(&store.InstanceRecord{ID: "i-2", Workload: "svc", State: store.StateRunning})
	list := func() []store.InstanceRecord {
		out, err := a.ListInstances(t.Context(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	dropped := list()
	a.remove("i-2") // within the instant: dropped stays as it was
	kept := list()
	if len(dropped) != 2 || dropped[1].ID != "i-2" || len(kept) != 1 || kept[0].ID != "i-1" {
		t.Fatalf("lists before and after a removal: %v, %v", dropped, kept)
	}
	now = now.Add(time.Minute)
	a.add(&store.InstanceRecord{ID: "i-3", Workload: "svc", State: store.StateRunning})
	next := list()
	if len(next) != 2 || next[0].ID != "i-1" || next[1].ID != "i-3" || !next[0].LastHeartbeat.Equal(now) {
		t.Fatalf("list a minute later: %v; want i-1 and i-3 beating now", next)
	}
	if &next[0] == &dropped[0] {
		t.Fatal("an answer dropped within an instant was reused")
	}
	if dropped[0].ID != "i-1" || dropped[1].ID != "i-2" {
		t.Fatalf("the dropped answer changed: %v", dropped)
	}
	if again := list(); &again[0] != &next[0] {
		t.Fatal("a second list at the same instant was not the cached answer")
	}
	now = now.Add(time.Minute)
	if later := list(); &later[0] != &next[0] || !later[1].LastHeartbeat.Equal(now) {
		t.Fatalf("a minute later the last instant's answer was not reused: %v", later)
	}
}

// The agents' lists, kept sorted as agents come and go (not re-sorted),
// are always every agent of the workload by id, whatever the order of
// comings, goings and listings.
func TestAgentListsStaySortedAsAgentsComeAndGo(t *testing.T) {
	now := DefaultStart
	a := newAgents(func() time.Time { return now })
	rng := rand.New(rand.NewPCG(13, 1))
	want := map[string]string{} // id → workload
	wls := []string{"svc-a", "svc-b", "svc-c"}
	for step := range 3000 {
		id := fmt.Sprintf("i-%03d", rng.IntN(200))
		switch {
		case want[id] == "":
			w := wls[rng.IntN(len(wls))]
			a.add(&store.InstanceRecord{ID: id, Workload: w, State: store.StateRunning})
			want[id] = w
		case rng.IntN(4) == 0:
			// registered again, under the same workload
			a.add(&store.InstanceRecord{ID: id, Workload: want[id], State: store.StateRunning})
		default:
			a.remove(id)
			delete(want, id)
		}
		if rng.IntN(3) == 0 {
			now = now.Add(time.Second)
		}
		workload := ""
		if rng.IntN(2) == 0 {
			workload = wls[rng.IntN(len(wls))]
		}
		var ids []string
		for id, w := range want {
			if workload == "" || w == workload {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		got, err := a.ListInstances(t.Context(), workload, "")
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, r := range got {
			gotIDs = append(gotIDs, r.ID)
		}
		if !slices.Equal(gotIDs, ids) {
			t.Fatalf("step %d, workload %q: listed %v, want %v", step, workload, gotIDs, ids)
		}
	}
}

// The simulator's load samples, counted in place, are fleet.AgentLoad's
// read from the agents' listings, whatever agents come, go, are preempted
// or change utilisation.
func TestAgentLoadSamplesAsAgentLoad(t *testing.T) {
	now := DefaultStart
	a := newAgents(func() time.Time { return now })
	rng := rand.New(rand.NewPCG(13, 2))
	wls := []policy.Workload{{Name: "svc-a"}, {Name: "svc-b"}, {Name: "svc-c"}}
	for step := range 2000 {
		id := fmt.Sprintf("i-%03d", rng.IntN(60))
		w := wls[rng.IntN(len(wls))].Name
		switch rng.IntN(5) {
		case 0, 1:
			a.add(&store.InstanceRecord{ID: id, Workload: w, State: store.StateRunning})
		case 2:
			a.remove(id)
		case 3:
			a.preempting(id, now)
		default:
			a.setUtil(w, float64(rng.IntN(100))/97)
		}
		if rng.IntN(3) == 0 {
			now = now.Add(time.Second)
		}
		at := now
		if rng.IntN(10) == 0 {
			at = now.Add(3 * time.Minute) // stale heartbeats: none ready
		}
		for _, wl := range wls {
			want, err := fleet.AgentLoad{Agents: a}.Sample(t.Context(), wl, at)
			if err != nil {
				t.Fatal(err)
			}
			got, err := agentLoad{a}.Sample(t.Context(), wl, at)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %s: sampled %+v, want %+v", step, wl.Name, got, want)
			}
		}
	}
}
