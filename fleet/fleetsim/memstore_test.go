package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/store"
)

// fleetStores are the two implementations of fleet.Store: MemStore and
// store.Fleet on dsn. Every case runs on both and must load the same.
func fleetStores(t *testing.T, dsn string) map[string]fleet.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]fleet.Store{"sql": f, "memory": NewMemStore()}
}

func TestMemStoreBehavesLikeStoreFleet(t *testing.T) {
	compareStores(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "fleet.db") })
}

func TestMemStoreBehavesLikeStoreFleetOnPostgres(t *testing.T) {
	compareStores(t, func(t *testing.T) string { return testpg.DSN(t) })
}

var ts0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func slot(id, state string, gen int) store.SlotRecord {
	return store.SlotRecord{ID: id, Workload: "w", Kind: "training", State: state, Generation: gen, Cloud: "aws", Zone: "us-east-1a",
		InstanceType: "p3.2xlarge", Capacity: "spot", PricePerHour: 0.97, CreatedAt: ts0, StateSince: ts0}
}

func intent(tok, slotID string, gen int, state, inst string) store.IntentRecord {
	return store.IntentRecord{Token: tok, SlotID: slotID, Generation: gen, Cloud: "aws", Capacity: "spot", Request: []byte(`{}`),
		State: state, InstanceID: inst, CreatedAt: ts0, UpdatedAt: ts0}
}

func instance(id, slotID string) store.FleetInstanceRecord {
	return store.FleetInstanceRecord{ID: id, Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p3.2xlarge",
		Capacity: "spot", State: "running", SlotID: slotID, FirstSeen: ts0, LaunchedAt: ts0}
}

func compareStores(t *testing.T, dsn func(t *testing.T) string) {
	fence := store.Fence{Now: ts0.Add(time.Hour)}
	cases := []struct {
		name    string
		batches []store.FleetChanges
		wantErr error // of the last batch
	}{
		{name: "empty"},
		{name: "upserts and deletes", batches: []store.FleetChanges{
			{Slots: []store.SlotRecord{slot("w/1", "pending", 0), slot("w/0", "pending", 0)},
				Events: []store.EventRecord{{At: ts0, Kind: "fleet.slot", Message: "new"}}},
			{Slots: []store.SlotRecord{slot("w/0", "launching", 1)}, Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentOpen, "")}},
			{DeleteSlots: []string{"w/1"}},
		}},
		{name: "launched intents are not loaded, failed ones are", batches: []store.FleetChanges{
			{Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentOpen, ""), intent("t2", "w/1", 1, store.IntentFailed, "")}},
			{Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentLaunched, "i-1")}, Instances: []store.FleetInstanceRecord{instance("i-1", "w/0")}},
		}},
		{name: "deleting an instance retires its launched intent", batches: []store.FleetChanges{
			{Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentLaunched, "i-1"), intent("t2", "w/0", 2, store.IntentOpen, "")},
				Instances: []store.FleetInstanceRecord{instance("i-1", "w/0"), instance("i-2", "")}},
			{DeleteInstances: []string{"i-1"}},
		}},
		{name: "a deleted slot's intents keep its last generation", batches: []store.FleetChanges{
			{Slots: []store.SlotRecord{slot("w/0", "launching", 2)}, Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentLaunched, "i-1"), intent("t2", "w/0", 2, store.IntentOpen, "")}},
			{DeleteSlots: []string{"w/0"}, Intents: []store.IntentRecord{intent("t2", "w/0", 2, store.IntentFailed, "")}},
		}},
		{name: "a second token for one slot generation conflicts and writes nothing", batches: []store.FleetChanges{
			{Intents: []store.IntentRecord{intent("t1", "w/0", 1, store.IntentOpen, "")}},
			{Slots: []store.SlotRecord{slot("w/9", "pending", 0)}, Intents: []store.IntentRecord{intent("t9", "w/0", 1, store.IntentOpen, "")}},
		}, wantErr: store.ErrConflict},
		{name: "a fence of no lease term is refused", batches: []store.FleetChanges{
			{Slots: []store.SlotRecord{slot("w/0", "pending", 0)}},
		}, wantErr: store.ErrFenced},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var loads []store.FleetState
			var gens []map[string]int
			var names []string
			for name, fs := range fleetStores(t, dsn(t)) {
				ctx := context.Background()
				var err error
				for i, c := range tc.batches {
					f := fence
					if tc.wantErr == store.ErrFenced && i == len(tc.batches)-1 {
						f = store.Fence{Lease: "broker-leader", Holder: "a", Epoch: 1, Now: ts0}
					}
					err = fs.Apply(ctx, f, c)
					if i < len(tc.batches)-1 && err != nil {
						t.Fatalf("%s: batch %d: %v", name, i, err)
					}
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("%s: last batch: got %v, want %v", name, err, tc.wantErr)
				}
				if tc.wantErr == nil && err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				st, err := fs.Load(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pause, err := fs.Paused(ctx)
				if err != nil || pause.Paused {
					t.Fatalf("%s: paused %+v, %v", name, pause, err)
				}
				last := map[string]int{}
				for _, id := range []string{"w/0", "w/1", "w/9"} {
					if last[id], err = fs.LastGeneration(ctx, id); err != nil {
						t.Fatalf("%s: last generation of %s: %v", name, id, err)
					}
				}
				loads = append(loads, normalize(st))
				gens = append(gens, last)
				names = append(names, name)
			}
			if !reflect.DeepEqual(loads[0], loads[1]) {
				t.Fatalf("%s loads\n%+v\n%s loads\n%+v", names[0], loads[0], names[1], loads[1])
			}
			if !reflect.DeepEqual(gens[0], gens[1]) {
				t.Fatalf("last generations: %s %v, %s %v", names[0], gens[0], names[1], gens[1])
			}
		})
	}
}

// normalize makes the two stores' loads comparable: times in UTC, empty
// slices as nil, raw JSON as text.
func normalize(st store.FleetState) store.FleetState {
	out := store.FleetState{}
	for _, s := range st.Slots {
		s.CreatedAt, s.StateSince, s.LaunchedAt, s.RunningAt = s.CreatedAt.UTC(), s.StateSince.UTC(), s.LaunchedAt.UTC(), s.RunningAt.UTC()
		out.Slots = append(out.Slots, s)
	}
	for _, in := range st.Intents {
		in.CreatedAt, in.UpdatedAt = in.CreatedAt.UTC(), in.UpdatedAt.UTC()
		in.Request = append([]byte(nil), in.Request...)
		out.Intents = append(out.Intents, in)
	}
	for _, x := range st.Instances {
		x.FirstSeen, x.LaunchedAt, x.OrphanSince, x.RetiredAt = x.FirstSeen.UTC(), x.LaunchedAt.UTC(), x.OrphanSince.UTC(), x.RetiredAt.UTC()
		out.Instances = append(out.Instances, x)
	}
	return out
}

// TestMemStoreSnapshotFollowsEveryChange applies random batches — new,
// changed and deleted slots and instances — and after each compares Load
// and View with the records the batches leave, sorted: the snapshot
// patched in place of a rebuild must not lose or misplace a change.
func TestMemStoreSnapshotFollowsEveryChange(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		t.Run(fmt.Sprintf("recycle=%v", recycle), func(t *testing.T) { testSnapshotFollowsEveryChange(t, recycle) })
	}
}

// testSnapshotFollowsEveryChange applies random changes and loads after
// each. With Recycle, Load's answer is changed by its reader (as the
// reconciler does) and the View's answer of the step before must still
// read as it did: memory is reused only one change later.
func testSnapshotFollowsEveryChange(t *testing.T, recycle bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	m := NewMemStore()
	m.Recycle = recycle
	var lastView, lastWant store.FleetState
	slots := map[string]store.SlotRecord{}
	insts := map[string]store.FleetInstanceRecord{}
	for step := 0; step < 400; step++ {
		var c store.FleetChanges
		for range 1 + rng.IntN(4) {
			id := fmt.Sprintf("w/%02d", rng.IntN(30))
			switch r := rng.IntN(10); {
			case r < 5:
				s := slot(id, []string{"pending", "launching", "running"}[rng.IntN(3)], rng.IntN(5))
				c.Slots = append(c.Slots, s)
			case r < 6:
				c.DeleteSlots = append(c.DeleteSlots, id)
			case r < 9:
				x := instance(fmt.Sprintf("i-%02d", rng.IntN(30)), id)
				x.State = []string{"pending", "running", "terminated"}[rng.IntN(3)]
				c.Instances = append(c.Instances, x)
			default:
				c.DeleteInstances = append(c.DeleteInstances, fmt.Sprintf("i-%02d", rng.IntN(30)))
			}
		}
		if err := m.Apply(ctx, store.Fence{}, c); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Slots {
			slots[s.ID] = s
		}
		for _, id := range c.DeleteSlots {
			delete(slots, id)
		}
		for _, x := range c.Instances {
			insts[x.ID] = x
		}
		for _, id := range c.DeleteInstances {
			delete(insts, id)
		}
		var want store.FleetState
		for _, id := range slices.Sorted(maps.Keys(slots)) {
			want.Slots = append(want.Slots, slots[id])
		}
		for _, id := range slices.Sorted(maps.Keys(insts)) {
			want.Instances = append(want.Instances, insts[id])
		}
		got, err := m.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		view, _ := m.View().Load(ctx)
		for name, st := range map[string]store.FleetState{"Load": got, "View": view} {
			if !reflect.DeepEqual(normalize(st), normalize(want)) {
				t.Fatalf("step %d: %s\n%+v\nwant\n%+v", step, name, st, want)
			}
		}
		for i := range got.Slots {
			got.Slots[i].State = "changed by the reader"
		}
		for i := range got.Instances {
			got.Instances[i].State = "changed by the reader"
		}
		if step > 0 && !reflect.DeepEqual(normalize(lastView), normalize(lastWant)) {
			t.Fatalf("step %d: the last step's view changed after one change:\n%+v\nwant\n%+v", step, lastView, lastWant)
		}
		if again, _ := m.View().Load(ctx); !reflect.DeepEqual(normalize(again), normalize(want)) {
			t.Fatalf("step %d: changing Load's answer changed the view", step)
		}
		lastView, lastWant = view, want
	}
}

// TestMemStoreReplaceRequestsLikeStoreFleet: replacement requests are
// listed oldest first, a repeat replaces the earlier one, and Apply's
// DoneReplacements forgets them, in both stores.
func TestMemStoreReplaceRequestsLikeStoreFleet(t *testing.T) {
	compareReplaceRequests(t, filepath.Join(t.TempDir(), "fleet.db"))
}

func TestMemStoreReplaceRequestsLikeStoreFleetOnPostgres(t *testing.T) {
	compareReplaceRequests(t, testpg.DSN(t))
}

func compareReplaceRequests(t *testing.T, dsn string) {
	ctx := context.Background()
	var got []string
	for name, fs := range fleetStores(t, dsn) {
		rs := fs.(interface {
			RequestReplace(context.Context, store.ReplaceRequest) error
		})
		for i, id := range []string{"i-b", "i-a", "i-b"} {
			if err := rs.RequestReplace(ctx, store.ReplaceRequest{Instance: id, Reason: fmt.Sprint("r", i), By: "test", At: ts0.Add(time.Duration(i) * time.Minute)}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if err := fs.Apply(ctx, store.Fence{Now: ts0.Add(time.Hour)}, store.FleetChanges{DoneReplacements: []string{"i-x"}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before, err := fs.ReplaceRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Apply(ctx, store.Fence{Now: ts0.Add(time.Hour)}, store.FleetChanges{DoneReplacements: []string{"i-a"}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after, err := fs.ReplaceRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%+v | %+v", before, after))
	}
	if got[0] != got[1] {
		t.Fatalf("the stores differ:\n%s\n%s", got[0], got[1])
	}
	if !strings.Contains(got[0], "{Instance:i-a Reason:r1") || !strings.HasSuffix(got[0], "| [{Instance:i-b Reason:r2 By:test At:2026-01-05 00:02:00 +0000 UTC}]") {
		t.Fatalf("requests %s", got[0])
	}
}
