package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	agentbroker "github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/store"
)

// TestRealAgentClient drives the API with the agent's own client
// (agent/broker), so the two sides of the contract cannot drift apart.
func TestRealAgentClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		boot := decode[struct{ Token string }](t, e.want("POST", "/api/v1/tokens", e.admin,
			map[string]any{"kind": "bootstrap", "name": "cloud-init"}, http.StatusCreated)).Token
		dir := t.TempDir()
		tokFile := filepath.Join(dir, "agent-token")
		if err := os.WriteFile(tokFile, []byte(boot+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := &agentbroker.Client{BaseURL: e.srv.URL, HTTP: e.srv.Client(), TokenFile: tokFile,
			StateFile: filepath.Join(dir, "agent.json"),
			Register:  apiv1.RegisterRequest{Hostname: "ip-10-0-0-12", Cloud: "aws", InstanceID: "i-0real", AgentVersion: "v0.1.0"}}
		ctx := context.Background()
		var gpus struct {
			GPUs []apiv1.GPUStat `json:"gpus"`
		}
		if err := json.Unmarshal([]byte(agentHeartbeat), &gpus); err != nil {
			t.Fatal(err)
		}
		resp, err := c.Heartbeat(ctx, apiv1.Heartbeat{Time: time.Now(), Cloud: "aws", GPUs: gpus.GPUs})
		if err != nil {
			t.Fatalf("heartbeat through the agent's client: %v", err)
		}
		if resp.BenchmarkRequested {
			t.Error("benchmark requested for no reason")
		}
		if c.AgentID() != "i-0real" {
			t.Fatalf("agent id %q", c.AgentID())
		}
		for _, r := range []struct{ kind, id, body string }{
			{agentbroker.KindNotice, "aws/instance-action/terminate/2026-12-02T12:00:00Z", agentNotice},
			{agentbroker.KindDrain, "aws/instance-action/terminate/2026-12-02T12:00:00Z", agentDrain},
			{agentbroker.KindBenchmark, "benchmark/1", agentBenchmark},
		} {
			rep := agentbroker.Report{Kind: r.kind, ID: r.id, Body: json.RawMessage(r.body)}
			for range 2 { // a re-delivery from the spool is harmless
				if err := c.Send(ctx, rep); err != nil {
					t.Fatalf("%s through the agent's client: %v", r.kind, err)
				}
			}
		}
		inst := decode[apiv1.Instance](t, e.want("GET", "/api/v1/instances/i-0real", e.admin, nil, http.StatusOK))
		if inst.State != store.StateDrained || inst.LastHeartbeat.IsZero() || inst.Utilization == 0 {
			t.Fatalf("instance after the agent's reports: %+v", inst)
		}
		evs := decode[struct{ Items []apiv1.Event }](t, e.want("GET", "/api/v1/events?instance=i-0real", e.admin, nil, http.StatusOK))
		if len(evs.Items) != 4 { // registered, preemption_notice, drained, benchmark
			t.Fatalf("%d events, want 4: %+v", len(evs.Items), evs.Items)
		}
	})
}
