package fleet

import (
	"context"
	"slices"
	"testing"

	"github.com/gpubroker/gpubroker/store"
)

// fleetStates is a FleetReader that returns its states one read after
// another.
type fleetStates struct{ states [][]string } // each read's slots' workloads, in order

func (f *fleetStates) Load(context.Context) (store.FleetState, error) {
	var st store.FleetState
	for i, w := range f.states[0] {
		st.Slots = append(st.Slots, store.SlotRecord{Workload: w, Index: i})
	}
	f.states = f.states[1:]
	return st, nil
}

// TestReadFleetBySvc: each read lists every service's slots in the fleet's
// order, and nothing of a service the read does not find, whether the
// services come in the last read's order, in another, interleaved, or
// some go and others come; slotsFor (by the placement's place in the
// plan) lists those of slotsOf.
func TestReadFleetBySvc(t *testing.T) {
	reads := [][]string{
		{"a", "a", "b", "c", "c", "c"},
		{"a", "a", "b", "c", "c", "c"}, // the same order
		{"c", "a", "b", "b"},           // another
		{"a", "b", "a", "c", "b"},      // interleaved
		{"d", "b"},                     // a and c gone, d new
		{},
		{"c", "a"},
	}
	f := &fleetStates{states: slices.Clone(reads)}
	h := &HedgedSource{Fleet: f}
	for r, read := range reads {
		if err := h.readFleet(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"a", "b", "c", "d", "e"} {
			var want, got []int
			for i, x := range read {
				if x == w {
					want = append(want, i)
				}
			}
			for _, s := range h.slotsOf(w) {
				got = append(got, s.Index)
			}
			if !slices.Equal(got, want) {
				t.Errorf("read %d: %s's slots %v, want %v", r, w, got, want)
			}
		}
		// The j-th hedged placement's slots, the same service or another
		// than in the last plan: those of slotsOf.
		names := []string{"a", "b", "c", "d", "e"}
		for j := range names {
			w := names[(j+r/2)%len(names)]
			if got, want := h.slotsFor(j, w), h.slotsOf(w); !slices.Equal(got, want) {
				t.Errorf("read %d: placement %d (%s): slots %v, want %v", r, j, w, got, want)
			}
		}
	}
}
