package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
)

// TestAPIClient drives the real handlers through apiv1.Client, the one
// client the CLI, the dashboard and the Terraform provider use: every
// answer decodes into its apiv1 type and errors come back typed.
func TestAPIClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		c := apiv1.NewClient(e.srv.URL, e.admin, e.srv.Client())
		if err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		offers, err := c.Offers(ctx, apiv1.OffersQuery{GPUs: []string{"H100"}, Capacity: "spot", Limit: 2})
		if err != nil || offers.Count != 2 || offers.Offers[0].GPU != "H100" || offers.Offers[0].SpotPrice <= 0 {
			t.Fatalf("offers: %+v %v", offers, err)
		}
		_, err = c.Offers(ctx, apiv1.OffersQuery{GPUs: []string{"A100-80"}})
		if e, ok := err.(*apiv1.Error); !ok || e.Status != http.StatusBadRequest || e.Code != apiv1.CodeBadRequest {
			t.Fatalf("bad gpu: %v", err)
		}
		if p, err := c.Plan(ctx); err != nil || p.Policy != "loaded" {
			t.Fatalf("plan: %+v %v", p, err)
		}
		if p, err := c.PlanPolicy(ctx, "mine.yaml", []byte("workloads: []\n")); err != nil || p.Policy != "mine.yaml" {
			t.Fatalf("plan policy: %+v %v", p, err)
		}
		if b, err := c.Budgets(ctx); err != nil || b.Budgets == nil {
			t.Fatalf("budgets: %+v %v", b, err)
		}

		w, err := c.CreateWorkload(ctx, apiv1.WorkloadInput{Name: "llm", Kind: apiv1.KindTraining, Spec: json.RawMessage(`{"gpus":8}`)})
		if err != nil || w.Name != "llm" || w.CreatedAt.IsZero() {
			t.Fatalf("create: %+v %v", w, err)
		}
		_, err = c.CreateWorkload(ctx, apiv1.WorkloadInput{Name: "llm", Kind: apiv1.KindTraining})
		if apiv1.StatusOf(err) != http.StatusConflict {
			t.Fatalf("duplicate create: %v", err)
		}
		if w, err = c.PutWorkload(ctx, apiv1.WorkloadInput{Name: "llm", Kind: apiv1.KindBatch}); err != nil || w.Kind != "batch" {
			t.Fatalf("put: %+v %v", w, err)
		}
		if ws, err := c.ListWorkloads(ctx); err != nil || len(ws) != 1 {
			t.Fatalf("list: %+v %v", ws, err)
		}
		if err := c.DeleteWorkload(ctx, "llm"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetWorkload(ctx, "llm"); apiv1.StatusOf(err) != http.StatusNotFound {
			t.Fatalf("deleted workload: %v", err)
		}

		boot, err := c.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
		if err != nil || boot.Secret == "" || boot.ID == "" {
			t.Fatalf("token: %+v %v", boot, err)
		}
		reg, err := c.WithToken(boot.Secret).Register(ctx, apiv1.RegisterRequest{Hostname: "h", Cloud: "gcp", InstanceID: "4242",
			AgentVersion: "(devel)", Region: "us-central1", Zone: "us-central1-a", InstanceType: "g2-standard-8", Capacity: "spot",
			GPUs: []apiv1.GPUStat{{Index: 0, Name: "NVIDIA L4", MemoryTotalMiB: 23034}}})
		if err != nil || reg.HeartbeatIntervalSeconds <= 0 || reg.Instance.GPU != "L4" || reg.Instance.Zone != "us-central1-a" {
			t.Fatalf("register: %+v %v", reg, err)
		}
		agent := c.WithToken(reg.Token)
		util := uint32(50)
		if _, err := agent.Heartbeat(ctx, reg.AgentID, apiv1.Heartbeat{Time: time.Now(), Cloud: "gcp",
			GPUs: []apiv1.GPUStat{{Index: 0, Name: "NVIDIA L4", UtilGPUPct: &util}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := agent.ListWorkloads(ctx); apiv1.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("agent token on an admin route: %v", err)
		}
		inst, err := c.GetInstance(ctx, "4242")
		if err != nil || inst.Utilization != 0.5 || len(inst.Telemetry) != 1 || *inst.Telemetry[0].UtilGPUPct != 50 {
			t.Fatalf("instance: %+v %v", inst, err)
		}
		if is, err := c.ListInstances(ctx, apiv1.InstancesQuery{State: apiv1.StateRunning}); err != nil || len(is) != 1 {
			t.Fatalf("instances: %+v %v", is, err)
		}
		if evs, err := c.ListEvents(ctx, apiv1.EventsQuery{Kind: apiv1.EventRegistered, Limit: 10}); err != nil || len(evs) != 1 {
			t.Fatalf("events: %+v %v", evs, err)
		}
		if bs, err := c.ListBenchmarks(ctx, ""); err != nil || bs == nil {
			t.Fatalf("benchmarks: %+v %v", bs, err)
		}
	})
}
