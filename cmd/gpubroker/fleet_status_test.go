//go:build !agentonly

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/store"
)

// statusFleet is an httpapi.Fleet that answers a fixed status.
type statusFleet struct{ st apiv1.FleetStatus }

func (f *statusFleet) Status(context.Context) (apiv1.FleetStatus, error) { return f.st, nil }
func (f *statusFleet) Diff(context.Context) (apiv1.FleetReport, error) {
	return apiv1.FleetReport{}, nil
}
func (f *statusFleet) SetPaused(context.Context, bool, string) (apiv1.FleetPause, error) {
	return apiv1.FleetPause{}, nil
}

func (f *statusFleet) Replace(_ context.Context, id, reason, by string) (apiv1.FleetReplace, error) {
	return apiv1.FleetReplace{Instance: id, Reason: reason, By: by}, nil
}

// serveFleetCLI starts the broker's real handlers over fl on a fresh store
// and points the CLI at them with an admin token.
func serveFleetCLI(t *testing.T, fl httpapi.Fleet, at time.Time) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "b.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin, hash, _ := httpapi.NewToken()
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "first", at); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: b, Fleet: fl, Now: func() time.Time { return at }}).Handler())
	t.Cleanup(srv.Close)
	t.Setenv("GPUBROKER_URL", srv.URL)
	t.Setenv("GPUBROKER_TOKEN", admin)
}

// TestFleetStatusDecisionsCLI runs "gpubroker fleet status" against the
// broker's real handlers and checks the live spot decisions table: a
// leader's decisions (spot, wait, overdue on-demand, a hedged service), a
// leader that has none yet, and a follower.
func TestFleetStatusDecisionsCLI(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	fl := &statusFleet{}
	serveFleetCLI(t, fl, at)

	base := apiv1.FleetStatus{At: at, Mode: apiv1.FleetApply, ByState: map[string]int{"running": 2}, Orphans: []apiv1.FleetInstance{},
		Blocked: []apiv1.BlockedPool{}, Slots: []apiv1.FleetSlot{
			{ID: "finetune/0", Workload: "finetune", Kind: "training", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1b",
				InstanceType: "p3.2xlarge", Capacity: "spot", PricePerHour: 0.95, State: "running", AgeSeconds: 5400, Agent: "healthy", InstanceID: "i-1"},
			{ID: "chat/0", Workload: "chat", Kind: "inference", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
				InstanceType: "g4dn.xlarge", Capacity: "spot", PricePerHour: 0.16, State: "running", AgeSeconds: 7200, Agent: "healthy", InstanceID: "i-2"},
		}}
	leader := base
	leader.DecisionsFrom = apiv1.DecisionsFromLeader
	leader.Limited = []apiv1.LimitedPool{{Cloud: "aws", Zone: "us-east-1c", InstanceType: "p3.2xlarge", Capacity: "spot", Instances: 1,
		Until: at.Add(50 * time.Minute)}}
	leader.Decisions = []apiv1.FleetDecision{
		{Workload: "finetune", Stage: "training", Policy: "adaptive", Action: "spot aws/us-east-1b/p3.2xlarge", At: at.Add(-40 * time.Second), Tick: 90,
			Progress: &apiv1.FleetProgress{Done: 0.25, Reported: true, Deadline: at.Add(46*time.Hour + 30*time.Minute), TimeLeftSeconds: (46*time.Hour + 30*time.Minute).Seconds()}},
		{Workload: "nightly", Stage: "training", Policy: "uniform-progress", Action: "wait", Reason: "spot pools blocked; slack covers the wait",
			At: at.Add(-2 * time.Minute), Tick: 12, Progress: &apiv1.FleetProgress{Done: 0.031, Deadline: at.Add(10 * time.Hour), TimeLeftSeconds: 36000}},
		{Workload: "late", Stage: "training", Policy: "adaptive", Action: "on-demand", Reason: "safety net: on-demand to hold the deadline",
			At: at.Add(-time.Minute), Tick: 300, Progress: &apiv1.FleetProgress{Done: 0.97, Deadline: at.Add(-5 * time.Minute), TimeLeftSeconds: -300}},
		{Workload: "chat", Stage: "inference", Policy: "adaptive", Action: "spot aws/us-east-1a/g4dn.xlarge×2 + spot aws/us-east-1b/g4dn.xlarge×1 + on-demand×1",
			Reason: "4 replicas needed, 3 ready; error budget 6h52m0s of 7h12m0s left (99% over 30d)", At: at.Add(-30 * time.Second), Tick: 120,
			Replicas: &apiv1.FleetReplicas{Spot: map[string]int{"aws/us-east-1a/g4dn.xlarge": 2, "aws/us-east-1b/g4dn.xlarge": 1}, OnDemand: 1, Target: 4, Ready: 3,
				Availability: &apiv1.FleetAvailability{Goal: 0.99, WindowSeconds: 2592000, BudgetSeconds: 25920, BudgetLeftSeconds: 24720}}},
	}
	none := base
	none.DecisionsFrom, none.Decisions = apiv1.DecisionsFromLeader, []apiv1.FleetDecision{}
	follower := base
	follower.DecisionsFrom, follower.Decisions = apiv1.DecisionsNone, []apiv1.FleetDecision{}

	for _, tc := range []struct {
		name   string
		st     apiv1.FleetStatus
		golden string
	}{
		{"leader", leader, "fleet-status-decisions.txt"},
		{"leader, none yet", none, "fleet-status-no-decisions.txt"},
		{"follower", follower, "fleet-status-follower.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl.st = tc.st
			out, errOut, code := execute(t, newFleetCmd(), "fleet", "status")
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tc.golden, []byte(out))
		})
	}

	// -o json hands the decisions through as the API sent them.
	fl.st = leader
	out, errOut, code := execute(t, newFleetCmd(), "fleet", "status", "-o", "json")
	var got apiv1.FleetStatus
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("json: exit %d %s %s", code, errOut, out)
	}
	if got.DecisionsFrom != apiv1.DecisionsFromLeader || len(got.Decisions) != 4 || got.Decisions[0].Progress.Done != 0.25 ||
		got.Decisions[3].Replicas.Spot["aws/us-east-1a/g4dn.xlarge"] != 2 {
		t.Fatalf("json decisions: %+v", got.Decisions)
	}
}

// TestFleetReplaceCLI runs "gpubroker fleet replace" against the broker's
// real handlers: the reason reaches the fleet, the answer names the
// request, and an instance the fleet does not have exits with the API's
// 404 message.
func TestFleetReplaceCLI(t *testing.T) {
	fl := &replaceFleet{}
	serveFleetCLI(t, fl, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))

	out, errOut, code := execute(t, newFleetCmd(), "fleet", "replace", "i-1", "--reason", "slow host")
	if code != exitOK || !strings.Contains(out, "Replacement of i-1 requested") || fl.reason != "slow host" {
		t.Fatalf("exit %d, out %q, err %q, reason %q", code, out, errOut, fl.reason)
	}
	// status lists the request until the leader acts on it.
	fl.st = apiv1.FleetStatus{Mode: apiv1.FleetDryRun, Slots: []apiv1.FleetSlot{}, Replacing: []apiv1.FleetReplace{
		{Instance: "i-1", Reason: "slow host", By: "api:first", At: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}}}
	out, errOut, code = execute(t, newFleetCmd(), "fleet", "status")
	if code != exitOK || !strings.Contains(out, "Replacements requested") || !strings.Contains(out, "i-1 by api:first at 2026-12-02T12:00:00Z: slow host") {
		t.Fatalf("status with a pending replacement: exit %d, out %q, err %q", code, out, errOut)
	}
	out, errOut, code = execute(t, newFleetCmd(), "fleet", "replace", "i-404")
	if code == exitOK || !strings.Contains(errOut, "not an instance of the fleet") {
		t.Fatalf("unknown instance: exit %d, out %q, err %q", code, out, errOut)
	}
}

type replaceFleet struct {
	statusFleet
	reason string
}

func (f *replaceFleet) Replace(_ context.Context, id, reason, by string) (apiv1.FleetReplace, error) {
	if id != "i-1" {
		return apiv1.FleetReplace{}, fmt.Errorf("%w: instance %q: %v", store.ErrNotFound, id, fleet.ErrNotInFleet)
	}
	f.reason = reason
	return apiv1.FleetReplace{Instance: id, Reason: reason, By: by, At: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}, nil
}
