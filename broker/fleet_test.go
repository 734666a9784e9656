package broker

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

// TestFleetAPIContract sends the apiv1 client's real requests to the real
// handlers backed by the real fleet service, store and reconciler: what the
// CLI reads is what the broker means.
func TestFleetAPIContract(t *testing.T) {
	ctx := context.Background()
	b := openBroker(t, filepath.Join(t.TempDir(), "b.db"))
	fst, err := b.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	offer := pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge", GPU: pricing.T4,
		GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 0.526, SpotPrice: 0.2, ObservedAt: now, Source: "test"}
	cat := pricing.NewCatalog([]pricing.Offer{offer}, now, "test")
	pol, err := policy.Parse("p.yaml", []byte("clouds: [aws]\nworkloads:\n  - name: embed\n    kind: batch\n    gpu: {models: [T4], count: 2}\n    work: {gpu_hours: 10, reference_gpu: T4}\n    spot: never\n"))
	if err != nil {
		t.Fatal(err)
	}
	cloud := fake.NewCompute(fake.ComputeConfig{Offers: []pricing.Offer{offer}, Now: clock})
	rec := &fleet.Reconciler{Store: fst, Computes: map[pricing.Cloud]providers.Compute{pricing.AWS: cloud}, Agents: b,
		Plans:  &fleet.SolverSource{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol }, Now: clock},
		Tokens: &StoreMinter{Broker: b, Fleet: fst}, Now: clock, Options: fleet.Options{Mode: fleet.Apply}}
	svc := &fleet.Service{Store: fst, Agents: b, Reconciler: rec, Now: clock}
	tok, hash, err := httpapi.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "ops", now); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }, Fleet: fleetAPI{s: svc}, Now: clock})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	c := apiv1.NewClient(srv.URL, tok, nil)

	diff, err := c.FleetDiff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Actions) != 2 || diff.Actions[0].Kind != "launch" || diff.Actions[0].Done || diff.Mode != apiv1.FleetApply {
		t.Fatalf("diff %+v", diff)
	}
	if len(cloud.Instances()) != 0 {
		t.Fatal("diff launched")
	}
	if _, err := rec.Reconcile(ctx, store.Fence{}); err != nil {
		t.Fatal(err)
	}
	fs, err := c.FleetStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Slots) != 2 || fs.Slots[0].ID != "embed/0" || fs.Slots[0].State != "booting" || fs.Slots[0].InstanceID == "" ||
		fs.Slots[0].Agent != "none" || fs.ByState["booting"] != 2 || fs.LastPass == nil || len(fs.LastPass.Actions) != 2 {
		t.Fatalf("status %+v", fs)
	}
	// The user data carries a registration token the broker accepts.
	ud := cloud.UserData(fs.Slots[0].InstanceID)
	regTok := regexp.MustCompile(`gpb_[A-Za-z0-9_-]+`).FindString(ud)
	if regTok == "" {
		t.Fatalf("no token in the user data:\n%s", ud)
	}
	if rec, err := b.LookupToken(ctx, httpapi.HashToken(regTok)); err != nil || rec.Kind != store.TokenBootstrap || rec.Subject != "embed/0" {
		t.Fatalf("the user data's token is not a stored bootstrap token: %+v %v", rec, err)
	}
	p, err := c.SetFleetPaused(ctx, true)
	if err != nil || !p.Paused || p.By != "api:ops" {
		t.Fatalf("pause %+v %v", p, err)
	}
	if fs, _ = c.FleetStatus(ctx); !fs.Paused || fs.PausedBy != "api:ops" {
		t.Fatalf("status after pause %+v", fs)
	}
	if p, err = c.SetFleetPaused(ctx, false); err != nil || p.Paused {
		t.Fatalf("resume %+v %v", p, err)
	}
}

// TestFleetStatusDecisions: GET /api/v1/fleet carries the live stages'
// decisions from the chain the broker builds: an empty list before any
// pass, the deadline job's decision with its progress after one, and none
// (said so) on a replica that does not lead.
func TestFleetStatusDecisions(t *testing.T) {
	ctx := context.Background()
	b := openBroker(t, filepath.Join(t.TempDir(), "b.db"))
	fst, err := b.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var offers []pricing.Offer
	for i, z := range []string{"us-east-1a", "us-east-1b"} {
		offers = append(offers, pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: z, InstanceType: "g4dn.xlarge", GPU: pricing.T4,
			GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 0.526, SpotPrice: 0.2 + 0.01*float64(i), ObservedAt: now, Source: "test"})
	}
	cat := pricing.NewCatalog(offers, now, "test")
	pol, err := policy.Parse("p.yaml", []byte(`clouds: [aws]
workloads:
  - name: finetune
    kind: training
    gpu: {models: [T4], count: 1}
    work: {gpu_hours: 10, reference_gpu: T4}
    deadline: 48h
    spot: prefer
`))
	if err != nil {
		t.Fatal(err)
	}
	cloud := fake.NewCompute(fake.ComputeConfig{Offers: offers, Now: clock})
	board := &fleet.DecisionBoard{}
	rec := &fleet.Reconciler{Store: fst, Computes: map[pricing.Cloud]providers.Compute{pricing.AWS: cloud}, Agents: b,
		Plans: fleet.NewPlanChain(fleet.ChainConfig{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol },
			Now: clock, Fleet: fst, Progress: storeProgress{b}, Decisions: board}),
		Tokens: &StoreMinter{Broker: b, Fleet: fst}, Now: clock, Options: fleet.Options{Mode: fleet.Apply}}
	svc := &fleet.Service{Store: fst, Agents: b, Reconciler: rec, Now: clock}
	tok, hash, err := httpapi.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "ops", now); err != nil {
		t.Fatal(err)
	}
	leading := true
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }, Now: clock,
		Fleet: fleetAPI{s: svc, decisions: board, leading: func() bool { return leading }}})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	c := apiv1.NewClient(srv.URL, tok, nil)

	// The wire shape: always a list, and where it comes from.
	raw := func() map[string]json.RawMessage {
		t.Helper()
		req := httptest.NewRequest("GET", apiv1.PathFleet, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		api.Handler().ServeHTTP(w, req)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 {
			t.Fatalf("%d %s: %v", w.Code, w.Body, err)
		}
		return m
	}
	if m := raw(); string(m["decisions"]) != "[]" || string(m["decisions_from"]) != `"leader"` {
		t.Fatalf("before any pass: decisions %s from %s", m["decisions"], m["decisions_from"])
	}

	if _, err := rec.Reconcile(ctx, store.Fence{}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Minute)
	// The job reports a quarter done through its agent.
	if _, err := b.RecordProgress(ctx, store.ProgressRecord{Workload: "finetune", Instance: "i-1", Done: 0.25, ReportedAt: now.Add(-time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(ctx, store.Fence{}); err != nil {
		t.Fatal(err)
	}
	fs, err := c.FleetStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fs.DecisionsFrom != apiv1.DecisionsFromLeader || len(fs.Decisions) != 1 {
		t.Fatalf("decisions from %q: %+v", fs.DecisionsFrom, fs.Decisions)
	}
	d := fs.Decisions[0]
	if d.Workload != "finetune" || d.Stage != "training" || d.Policy == "" || !d.At.Equal(now) || d.Replicas != nil || d.Progress == nil {
		t.Fatalf("decision %+v", d)
	}
	if !strings.HasPrefix(d.Action, "spot aws/us-east-1") && d.Action != "on-demand" && d.Action != "wait" {
		t.Errorf("action %q", d.Action)
	}
	slot := fs.Slots[0]
	if want := "spot aws/" + slot.Zone + "/g4dn.xlarge"; slot.Capacity == "spot" && d.Action != want {
		t.Errorf("action %q, the slot is in %s", d.Action, want)
	}
	// The job's first slot was created at the first pass: 48 h from then.
	if p := d.Progress; !p.Reported || p.Done != 0.25 || !p.Deadline.Equal(now.Add(-90*time.Minute+48*time.Hour)) ||
		p.TimeLeftSeconds != (48*time.Hour-90*time.Minute).Seconds() {
		t.Errorf("progress %+v", *p)
	}
	m := raw()
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(m["decisions"], &rows); err != nil || len(rows) != 1 {
		t.Fatalf("decisions %s: %v", m["decisions"], err)
	}
	for _, k := range []string{"workload", "stage", "policy", "action", "at", "tick", "progress"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("decision without %q: %s", k, m["decisions"])
		}
	}
	if _, ok := rows[0]["replicas"]; ok {
		t.Errorf("a training decision with replicas: %s", m["decisions"])
	}

	// A follower has no decisions and says so.
	leading = false
	if fs, err = c.FleetStatus(ctx); err != nil || fs.DecisionsFrom != apiv1.DecisionsNone || fs.Decisions == nil || len(fs.Decisions) != 0 {
		t.Fatalf("follower: %q %+v %v", fs.DecisionsFrom, fs.Decisions, err)
	}
}
