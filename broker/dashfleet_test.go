package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/store"
)

// memFleet is a fleet store holding a fixed state.
type memFleet struct{ st store.FleetState }

func (m memFleet) Load(context.Context) (store.FleetState, error)                  { return m.st, nil }
func (m memFleet) Apply(context.Context, store.Fence, store.FleetChanges) error    { return nil }
func (m memFleet) Paused(context.Context) (store.FleetPause, error)                { return store.FleetPause{}, nil }
func (m memFleet) LastGeneration(context.Context, string) (int, error)             { return 0, nil }
func (m memFleet) ReplaceRequests(context.Context) ([]store.ReplaceRequest, error) { return nil, nil }
func (m memFleet) SetPaused(context.Context, bool, string, time.Time) error        { return nil }
func (m memFleet) RequestReplace(context.Context, store.ReplaceRequest) error      { return nil }

func TestDashFleetShowsSlots(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	empty := dashFleet{&fleet.Service{Store: memFleet{}, Now: func() time.Time { return now }}}
	if _, err := empty.FleetInstances(context.Background(), dashboard.FleetQuery{}); !errors.Is(err, dashboard.ErrNoSource) {
		t.Fatalf("no slots: %v, want ErrNoSource (the page's empty state)", err)
	}
	st := store.FleetState{Slots: []store.SlotRecord{
		{ID: "chat/0", Workload: "chat", Cloud: "aws", Zone: "use1-az4", InstanceType: "g4dn.xlarge", Capacity: "spot", State: "running", InstanceID: "i-1", PricePerHour: 0.2, StateSince: now},
		{ID: "chat/1", Workload: "chat", State: "launching", StateSince: now},
		{ID: "train/0", Workload: "train", Cloud: "gcp", State: "running", InstanceID: "vm-2", StateSince: now},
		{ID: "old/0", Workload: "old", State: "gone", StateSince: now},
	}}
	d := dashFleet{&fleet.Service{Store: memFleet{st}, Now: func() time.Time { return now }}}
	page, err := d.FleetInstances(context.Background(), dashboard.FleetQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 2 || len(page.Instances) != 1 || page.Instances[0].ID != "i-1" || page.Instances[0].PricePerHour != 0.2 {
		t.Errorf("page %+v", page)
	}
	want := map[string][2]int{"chat": {2, 1}, "train": {1, 1}, "old": {0, 0}}
	for _, s := range page.Slots {
		if w := want[s.Workload]; s.Desired != w[0] || s.Running != w[1] {
			t.Errorf("slots of %s: desired %d running %d, want %v", s.Workload, s.Desired, s.Running, w)
		}
	}
	page, _ = d.FleetInstances(context.Background(), dashboard.FleetQuery{Workload: "train"})
	if page.Total != 1 || page.Instances[0].Slot != "train/0" {
		t.Errorf("train only: %+v", page)
	}
}
