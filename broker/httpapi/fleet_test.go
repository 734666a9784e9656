package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
)

// fakeFleet records what the fleet routes asked of it.
type fakeFleet struct {
	mu     sync.Mutex
	paused bool
	by     string
}

func (f *fakeFleet) Status(context.Context) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return map[string]any{"paused": f.paused, "slots": []any{}}, nil
}

func (f *fakeFleet) Diff(context.Context) (any, error) {
	return map[string]any{"actions": []any{map[string]any{"kind": "launch", "slot": "train/0"}}}, nil
}

func (f *fakeFleet) SetPaused(_ context.Context, paused bool, by string) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused, f.by = paused, by
	return map[string]any{"paused": paused, "by": by}, nil
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
