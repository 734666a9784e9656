package store

import (
	"errors"
	"testing"
	"time"
)

func TestFleetApplyIsFencedAndAtomic(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		b, err := s.Broker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, ok, err := b.AcquireLease(ctx, "lead", "a", time.Minute, t0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		fa := Fence{Lease: "lead", Holder: "a", Epoch: l.Epoch, Now: t0}
		slot := SlotRecord{ID: "train/0", Workload: "train", Kind: "training", Cloud: "aws", Zone: "us-east-1a", State: "launching",
			Generation: 1, StateSince: t0, CreatedAt: t0, LaunchedAt: t0}
		in := IntentRecord{Token: "tok-1", SlotID: "train/0", Generation: 1, Epoch: l.Epoch, Cloud: "aws", Capacity: "spot",
			Request: []byte(`{"ClientToken":"tok-1"}`), State: IntentOpen, CreatedAt: t0, UpdatedAt: t0}
		err = f.Apply(ctx, fa, FleetChanges{Slots: []SlotRecord{slot}, Intents: []IntentRecord{in},
			Instances: []FleetInstanceRecord{{ID: "i-1", Cloud: "aws", SlotID: "train/0", Token: "tok-1", State: "pending", LaunchedAt: t0, FirstSeen: t0}},
			Events:    []EventRecord{{At: t0, Kind: "fleet.slot", Instance: "i-1", Workload: "train", Message: "pending → launching"}}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Slots) != 1 || st.Slots[0].Generation != 1 || !st.Slots[0].LaunchedAt.Equal(t0) || st.Slots[0].RunningAt != (time.Time{}) {
			t.Fatalf("slots %+v", st.Slots)
		}
		if len(st.Intents) != 1 || string(st.Intents[0].Request) != `{"ClientToken":"tok-1"}` || len(st.Instances) != 1 {
			t.Fatalf("state %+v", st)
		}
		// A second intent for the same slot generation is refused.
		dup := in
		dup.Token = "tok-other"
		if err := f.Apply(ctx, fa, FleetChanges{Intents: []IntentRecord{dup}}); !errors.Is(err, ErrConflict) {
			t.Fatalf("duplicate (slot, generation): %v", err)
		}
		// Leadership moves to b: a's writes are fenced, nothing of them lands.
		if _, ok, err := b.AcquireLease(ctx, "lead", "b", time.Minute, t0.Add(2*time.Minute)); err != nil || !ok {
			t.Fatal(ok, err)
		}
		slot.State = "booting"
		err = f.Apply(ctx, Fence{Lease: "lead", Holder: "a", Epoch: l.Epoch, Now: t0.Add(2 * time.Minute)},
			FleetChanges{Slots: []SlotRecord{slot}, Events: []EventRecord{{At: t0, Kind: "fleet.slot"}}})
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("deposed writer: %v", err)
		}
		st, _ = f.Load(ctx)
		if st.Slots[0].State != "launching" {
			t.Fatalf("fenced write landed: %+v", st.Slots[0])
		}
		if n, _ := b.CountEvents(ctx); n != 1 {
			t.Fatalf("%d events; the fenced write's event must not land", n)
		}
		// Retired intents are not loaded; deletes work.
		in.State = IntentRetired
		if err := f.Apply(ctx, Fence{}, FleetChanges{Intents: []IntentRecord{in}, DeleteInstances: []string{"i-1"}, DeleteSlots: []string{"train/0"}}); err != nil {
			t.Fatal(err)
		}
		st, _ = f.Load(ctx)
		if len(st.Intents)+len(st.Instances)+len(st.Slots) != 0 {
			t.Fatalf("left: %+v", st)
		}
		// The kill switch.
		if p, err := f.Paused(ctx); err != nil || p.Paused {
			t.Fatalf("paused by default: %+v %v", p, err)
		}
		if err := f.SetPaused(ctx, true, "ops", t0); err != nil {
			t.Fatal(err)
		}
		if p, _ := f.Paused(ctx); !p.Paused || p.By != "ops" {
			t.Fatalf("pause: %+v", p)
		}
	})
}
