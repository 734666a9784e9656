package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/store"
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

func (f *fakeFleet) Replace(_ context.Context, id, reason, by string) (apiv1.FleetReplace, error) {
	if id != "i-1" {
		return apiv1.FleetReplace{}, fmt.Errorf("instance %q: %w", id, store.ErrNotFound)
	}
	return apiv1.FleetReplace{Instance: id, Reason: reason, By: by}, nil
}

// TestFleetReplaceRoute: an admin's request is accepted (202) with or
// without a body; unknown instances are 404, bad bodies and over-long
// reasons 400, and no token 401.
func TestFleetReplaceRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		out := e.want("POST", "/api/v1/fleet/instances/i-1/replace", e.admin, map[string]any{"reason": "slow host"}, http.StatusAccepted)
		if p := decode[map[string]any](t, out); p["instance"] != "i-1" || p["reason"] != "slow host" || !strings.HasPrefix(p["by"].(string), "api:") {
			t.Fatalf("replace answer %s", out)
		}
		e.want("POST", "/api/v1/fleet/instances/i-1/replace", e.admin, nil, http.StatusAccepted)
		e.want("POST", "/api/v1/fleet/instances/i-9/replace", e.admin, nil, http.StatusNotFound)
		e.want("POST", "/api/v1/fleet/instances/i-1/replace", e.admin, `{"reasn": "x"}`, http.StatusBadRequest)
		e.want("POST", "/api/v1/fleet/instances/i-1/replace", e.admin, map[string]any{"reason": strings.Repeat("x", 501)}, http.StatusBadRequest)
		e.want("POST", "/api/v1/fleet/instances/i-1/replace", "", nil, http.StatusUnauthorized)
	})
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
