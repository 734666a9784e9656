package broker

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"regexp"
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
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "b.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }, Fleet: fleetAPI{svc}, Now: clock})
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
