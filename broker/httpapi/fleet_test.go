package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/gpubroker/gpubroker/apiv1"
)

// fakeFleet records what the fleet routes asked of it.
type fakeFleet struct {
	mu     sync.Mutex
	paused bool
	by     string
}

func (f *fakeFleet) Status(context.Context) (apiv1.FleetStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return apiv1.FleetStatus{Paused: f.paused, Slots: []apiv1.FleetSlot{}}, nil
}

func (f *fakeFleet) Diff(context.Context) (apiv1.FleetReport, error) {
	return apiv1.FleetReport{Actions: []apiv1.FleetAction{{Kind: "launch", Slot: "train/0"}}}, nil
}

func (f *fakeFleet) SetPaused(_ context.Context, paused bool, by string) (apiv1.FleetPause, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused, f.by = paused, by
	return apiv1.FleetPause{Paused: paused, By: by}, nil
}

func TestFleetRoutes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		out := e.want("POST", "/api/v1/fleet/pause", e.admin, nil, http.StatusOK)
		if p := decode[map[string]any](t, out); p["paused"] != true || p["by"] == "" {
			t.Fatalf("pause answer %s", out)
		}
		out = e.want("GET", "/api/v1/fleet", e.admin, nil, http.StatusOK)
		if p := decode[map[string]any](t, out); p["paused"] != true {
			t.Fatalf("status %s", out)
		}
		e.want("POST", "/api/v1/fleet/resume", e.admin, nil, http.StatusOK)
		out = e.want("GET", "/api/v1/fleet/diff", e.admin, nil, http.StatusOK)
		if d := decode[map[string]any](t, out); len(d["actions"].([]any)) != 1 {
			t.Fatalf("diff %s", out)
		}
	})
}
