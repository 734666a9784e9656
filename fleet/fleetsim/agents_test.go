package fleetsim

import (
	"testing"
	"time"

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
