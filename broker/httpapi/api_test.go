package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// backends are the databases every API test runs against.
var backends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "broker.db") }},
	{"postgres", func(t *testing.T) string { return testpg.DSN(t) }},
}

// fakePlanner answers plan routes from canned values.
type fakePlanner struct {
	planErr    error
	currentErr error
}

func (f *fakePlanner) Plan(_ context.Context, name string, data []byte) (apiv1.Plan, error) {
	if f.planErr != nil {
		return apiv1.Plan{}, f.planErr
	}
	return apiv1.Plan{Policy: name, Warnings: []string{fmt.Sprintf("%d bytes", len(data))}}, nil
}

func (f *fakePlanner) Current(context.Context) (apiv1.Plan, error) {
	if f.currentErr != nil {
		return apiv1.Plan{}, f.currentErr
	}
	return apiv1.Plan{Policy: "loaded"}, nil
}

func (f *fakePlanner) Budgets(context.Context) (apiv1.Budgets, error) {
	return apiv1.Budgets{Budgets: []apiv1.BudgetStatus{}}, nil
}

type env struct {
	t       *testing.T
	srv     *httptest.Server
	api     *httpapi.Server
	broker  *store.Broker
	admin   string
	planner *fakePlanner
}

func newEnv(t *testing.T, dsn string) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatalf("broker tables: %v", err)
	}
	tok, hash, err := httpapi.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakePlanner{}
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }, Planner: fp, Fleet: &fakeFleet{},
		Spend: func(_ context.Context, q apiv1.SpendQuery) (apiv1.Spend, error) {
			return apiv1.Spend{By: q.By, Lines: []apiv1.SpendLine{}}, nil
		},
		Metrics: httpapi.NewMetrics(nil), MaxBodyBytes: 256 << 10})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, api: api, broker: b, admin: tok, planner: fp}
}

// do sends a request; body may be nil, a string (sent as is) or a value
// encoded as JSON.
func (e *env) do(method, path, token string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (e *env) want(method, path, token string, body any, status int) []byte {
	e.t.Helper()
	code, out := e.do(method, path, token, body)
	if code != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, code, status, out)
	}
	return out
}

func (e *env) register(id, workload string) string {
	e.t.Helper()
	out := e.want("POST", "/api/v1/agents/register", e.admin, map[string]any{"instance_id": id, "cloud": "aws",
		"region": "us-east-1", "zone": "us-east-1a", "instance_type": "g5.xlarge", "gpu": "A10G", "gpu_count": 1,
		"capacity": "spot", "workload": workload}, http.StatusCreated)
	var r struct {
		AgentID string `json:"agent_id"`
		Token   string `json:"token"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Token == "" || r.AgentID != id {
		e.t.Fatalf("register answer %s: %v", out, err)
	}
	return r.Token
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

type errBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, newEnv(t, b.dsn(t))) })
	}
}

// TestAuthEveryRoute checks each route with no token, a wrong token, an
// agent token (its own instance and another's) and the admin token.
func TestAuthEveryRoute(t *testing.T) {
	type route struct {
		method, path string
		body         any
		agentOwn     bool // agent tokens may call it for their own id
	}
	hb := map[string]any{"load1": 0.5}
	routes := map[string]route{
		"GET /healthz":                              {"GET", "/healthz", nil, false},
		"GET /readyz":                               {"GET", "/readyz", nil, false},
		"GET /api/v1/offers":                        {"GET", "/api/v1/offers?gpu=T4", nil, false},
		"GET /api/v1/plan":                          {"GET", "/api/v1/plan", nil, false},
		"POST /api/v1/plan":                         {"POST", "/api/v1/plan", "workloads: []", false},
		"GET /api/v1/budgets":                       {"GET", "/api/v1/budgets", nil, false},
		"GET /api/v1/spend":                         {"GET", "/api/v1/spend", nil, false},
		"GET /api/v1/workloads":                     {"GET", "/api/v1/workloads", nil, false},
		"POST /api/v1/workloads":                    {"POST", "/api/v1/workloads", map[string]any{"name": "w1", "kind": "batch"}, false},
		"GET /api/v1/workloads/{name}":              {"GET", "/api/v1/workloads/w1", nil, false},
		"PUT /api/v1/workloads/{name}":              {"PUT", "/api/v1/workloads/w1", map[string]any{"kind": "training"}, false},
		"DELETE /api/v1/workloads/{name}":           {"DELETE", "/api/v1/workloads/w1", nil, false},
		"GET /api/v1/instances":                     {"GET", "/api/v1/instances", nil, false},
		"GET /api/v1/instances/{id}":                {"GET", "/api/v1/instances/i-a", nil, false},
		"GET /api/v1/events":                        {"GET", "/api/v1/events", nil, false},
		"GET /api/v1/benchmarks":                    {"GET", "/api/v1/benchmarks", nil, false},
		"POST /api/v1/tokens":                       {"POST", "/api/v1/tokens", map[string]any{"kind": "bootstrap", "name": "cloud-init"}, false},
		"GET /api/v1/tokens":                        {"GET", "/api/v1/tokens?kind=bootstrap", nil, false},
		"DELETE /api/v1/tokens/{id}":                {"DELETE", "/api/v1/tokens/" + store.TokenID(store.HashToken("revoke-me")), nil, false},
		"POST /api/v1/agents/register":              {"POST", "/api/v1/agents/register", map[string]any{"instance_id": "i-c", "hostname": "vm-c", "cloud": "gcp", "agent_version": "v0.1.0"}, false},
		"POST /api/v1/agents/{id}/heartbeat":        {"POST", "/api/v1/agents/%s/heartbeat", hb, true},
		"POST /api/v1/agents/{id}/benchmarks":       {"POST", "/api/v1/agents/%s/benchmarks", map[string]any{"method": "command", "gpus": []map[string]any{{"index": 0, "name": "NVIDIA A10G", "dtype": "bf16", "tflops": 60, "bandwidth_gbs": 550}}}, true},
		"POST /api/v1/agents/{id}/notices":          {"POST", "/api/v1/agents/%s/notices", map[string]any{"kind": "preempt", "id": "n1", "cloud": "aws", "deadline": "2026-12-02T12:00:00Z"}, true},
		"POST /api/v1/agents/{id}/drains":           {"POST", "/api/v1/agents/%s/drains", map[string]any{"ok": true, "steps": []any{}}, true},
		"POST /api/v1/agents/{id}/progress":         {"POST", "/api/v1/agents/%s/progress", map[string]any{"done": 0.5, "reported_at": "2026-12-01T10:00:00Z"}, true},
		"GET /api/v1/fleet":                         {"GET", "/api/v1/fleet", nil, false},
		"GET /api/v1/fleet/diff":                    {"GET", "/api/v1/fleet/diff", nil, false},
		"POST /api/v1/fleet/pause":                  {"POST", "/api/v1/fleet/pause", nil, false},
		"POST /api/v1/fleet/resume":                 {"POST", "/api/v1/fleet/resume", nil, false},
		"POST /api/v1/fleet/instances/{id}/replace": {"POST", "/api/v1/fleet/instances/i-1/replace", nil, false},
	}
	public := map[string]bool{"GET /healthz": true, "GET /readyz": true}
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, p := range e.api.Routes() {
			if _, ok := routes[p]; !ok {
				t.Fatalf("route %q has no auth test; add it to the table", p)
			}
		}
		// Both run a workload, so progress reports reach the store.
		tokA := e.register("i-a", "job")
		e.register("i-b", "job")
		if err := e.broker.AddToken(t.Context(), store.TokenRecord{Hash: store.HashToken("revoke-me"), Kind: store.TokenBootstrap,
			Subject: "old", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Creating w1 first lets GET/PUT/DELETE reach their handlers.
		order := []string{"POST /api/v1/workloads", "GET /api/v1/workloads/{name}", "PUT /api/v1/workloads/{name}", "DELETE /api/v1/workloads/{name}"}
		for p := range routes {
			if !strings.Contains(strings.Join(order, "|"), p) {
				order = append(order, p)
			}
		}
		for _, p := range order {
			r := routes[p]
			own := strings.ReplaceAll(r.path, "%s", "i-a")
			other := strings.ReplaceAll(r.path, "%s", "i-b")
			t.Run(p, func(t *testing.T) {
				if public[p] {
					e.want(r.method, own, "", r.body, http.StatusOK)
					return
				}
				for _, c := range []struct {
					name, token, path string
					status            int
				}{
					{"no token", "", own, http.StatusUnauthorized},
					{"wrong token", "gpb_not-a-real-token", own, http.StatusUnauthorized},
					{"agent on another instance", tokA, other, http.StatusForbidden},
				} {
					code, out := e.do(r.method, c.path, c.token, r.body)
					if code != c.status {
						t.Errorf("%s: status %d, want %d (%s)", c.name, code, c.status, out)
						continue
					}
					eb := decode[errBody](t, out)
					if eb.Error.Code == "" || eb.Error.Message == "" {
						t.Errorf("%s: error body %s lacks code or message", c.name, out)
					}
				}
				code, out := e.do(r.method, own, tokA, r.body)
				if r.agentOwn {
					if code >= 300 {
						t.Errorf("agent on its own instance: status %d (%s)", code, out)
					}
				} else if code != http.StatusForbidden {
					t.Errorf("agent token on an admin route: status %d, want 403 (%s)", code, out)
				}
				code, out = e.do(r.method, other, e.admin, r.body)
				if code >= 300 {
					t.Errorf("admin: status %d (%s)", code, out)
				}
			})
		}
	})
}

func TestWorkloadsCRUD(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		spec := map[string]any{"gpu": map[string]any{"count": 8, "models": []string{"H100"}}, "work_gpu_hours": 2000}
		out := e.want("POST", "/api/v1/workloads", e.admin, map[string]any{"name": "llm-pretrain", "team": "research",
			"kind": "training", "spec": spec}, http.StatusCreated)
		w := decode[apiv1.Workload](t, out)
		if w.Name != "llm-pretrain" || w.Team != "research" || w.CreatedAt.IsZero() {
			t.Fatalf("created %+v", w)
		}
		e.want("POST", "/api/v1/workloads", e.admin, map[string]any{"name": "llm-pretrain", "kind": "training"}, http.StatusConflict)
		e.want("POST", "/api/v1/workloads", e.admin, map[string]any{"name": "chat", "kind": "inference"}, http.StatusCreated)
		got := decode[struct{ Items []apiv1.Workload }](t, e.want("GET", "/api/v1/workloads", e.admin, nil, http.StatusOK))
		if len(got.Items) != 2 || got.Items[0].Name != "chat" || got.Items[1].Name != "llm-pretrain" {
			t.Fatalf("list %+v", got.Items)
		}
		var gotSpec map[string]any
		if err := json.Unmarshal(got.Items[1].Spec, &gotSpec); err != nil || gotSpec["work_gpu_hours"] != float64(2000) {
			t.Fatalf("spec round trip %s: %v", got.Items[1].Spec, err)
		}
		out = e.want("PUT", "/api/v1/workloads/chat", e.admin, map[string]any{"kind": "inference", "team": "apps"}, http.StatusOK)
		if w := decode[apiv1.Workload](t, out); w.Team != "apps" {
			t.Fatalf("updated %+v", w)
		}
		e.want("PUT", "/api/v1/workloads/nope", e.admin, map[string]any{"kind": "batch"}, http.StatusNotFound)
		e.want("PUT", "/api/v1/workloads/chat", e.admin, map[string]any{"name": "other", "kind": "batch"}, http.StatusBadRequest)
		e.want("DELETE", "/api/v1/workloads/chat", e.admin, nil, http.StatusNoContent)
		e.want("DELETE", "/api/v1/workloads/chat", e.admin, nil, http.StatusNotFound)
		e.want("GET", "/api/v1/workloads/chat", e.admin, nil, http.StatusNotFound)
	})
}

// Bodies as the agent sends them (docs/agent.md, agent/broker).
const (
	agentHeartbeat = `{"time":"2026-12-02T10:00:00Z","cloud":"aws","spool_depth":0,"draining":false,
 "gpus":[{"index":0,"uuid":"GPU-1","name":"NVIDIA A10G","model":"A10G",
          "memory_total_mib":23028,"memory_used_mib":1024,"util_gpu_pct":80,"util_memory_pct":41,
          "temperature_c":64,"power_w":150.5,"power_limit_w":300,"sm_clock_mhz":1710,
          "memory_clock_mhz":6251,"ecc_volatile_uncorrected":0,"ecc_aggregate_uncorrected":3},
         {"index":1,"uuid":"GPU-2","name":"NVIDIA A10G","memory_total_mib":23028,"memory_used_mib":0,"util_gpu_pct":40}]}`
	agentNotice = `{"kind":"preempt","id":"aws/instance-action/terminate/2026-12-02T12:00:00Z","cloud":"aws",
 "deadline":"2026-12-02T12:00:00Z","observed":"2026-12-02T11:58:00.2Z","detail":"terminate",
 "raw":{"action":"terminate","time":"2026-12-02T12:00:00Z"},"action":"drain"}`
	agentDrain = `{"info":{"notice_id":"aws/instance-action/terminate/2026-12-02T12:00:00Z","kind":"preempt","cloud":"aws",
         "deadline":"2026-12-02T12:00:00Z","early":false},
 "started":"2026-12-02T11:58:01Z","finished":"2026-12-02T11:58:40Z","deadline":"2026-12-02T11:59:55Z",
 "steps":[{"name":"signal SIGTERM /run/trainer.pid","status":"ok","started":"2026-12-02T11:58:01Z","duration_ns":1200000000},
          {"name":"exec /opt/train/checkpoint.sh","status":"ok","started":"2026-12-02T11:58:02Z","duration_ns":30000000000}],
 "ok":true,"acked":false}`
	agentBenchmark = `{"time":"2026-12-02T10:01:00Z","method":"cuda-dlopen","duration_s":41.2,"below_spec_threshold":0.5,
 "gpus":[{"index":0,"name":"NVIDIA A10G","dtype":"bf16","tflops":62.5,"bandwidth_gbs":560,
          "matrix_n":8192,"iterations":50,"model":"A10G","spec_tflops":125,"spec_bandwidth_gbs":600,
          "tflops_ratio":0.5,"bandwidth_ratio":0.93,"below_spec":false}]}`
)

// postKey posts a raw body with an Idempotency-Key.
func (e *env) postKey(path, token, key, body string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func TestAgentLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		// An admin issues a bootstrap token; the agent registers with it the
		// way agent/broker does.
		boot := decode[struct{ Token string }](t, e.want("POST", "/api/v1/tokens", e.admin,
			map[string]any{"kind": "bootstrap", "name": "cloud-init"}, http.StatusCreated)).Token
		e.want("GET", "/api/v1/workloads", boot, nil, http.StatusForbidden)
		reg := decode[struct {
			AgentID                  string `json:"agent_id"`
			Token                    string `json:"token"`
			HeartbeatIntervalSeconds int    `json:"heartbeat_interval_seconds"`
		}](t, e.want("POST", "/api/v1/agents/register", boot, `{"hostname":"ip-10-0-0-12","cloud":"aws","instance_id":"i-0abc","agent_version":"v0.1.0","gpus":null}`, http.StatusCreated))
		if reg.AgentID != "i-0abc" || reg.Token == "" || reg.HeartbeatIntervalSeconds <= 0 {
			t.Fatalf("register answer %+v", reg)
		}
		tok := reg.Token
		if _, err := e.broker.UpdateWorkload(context.Background(), store.WorkloadRecord{Name: "x"}, time.Now()); err == nil {
			t.Fatal("updating a missing workload succeeded")
		}
		e.want("POST", "/api/v1/agents/i-0abc/heartbeat", tok, agentHeartbeat, http.StatusOK)
		inst := decode[apiv1.Instance](t, e.want("GET", "/api/v1/instances/i-0abc", e.admin, nil, http.StatusOK))
		if inst.Hostname != "ip-10-0-0-12" || inst.AgentVersion != "v0.1.0" || inst.Utilization < 0.599 || inst.Utilization > 0.601 ||
			inst.LastHeartbeat.IsZero() || !strings.Contains(mustJSON(t, inst.Telemetry), `"ecc_aggregate_uncorrected":3`) {
			t.Fatalf("instance after heartbeat %+v", inst)
		}
		// A heartbeat without GPUs (no NVML) is fine.
		e.want("POST", "/api/v1/agents/i-0abc/heartbeat", tok, `{"time":"2026-12-02T10:00:10Z","cloud":"aws","gpus":null,"gpu_error":"NVML not found","spool_depth":2,"draining":false}`, http.StatusOK)

		for range 2 { // the second delivery is the same report
			code, out := e.postKey("/api/v1/agents/i-0abc/benchmarks", tok, "benchmark/1764669660000000000", agentBenchmark)
			if code != http.StatusAccepted {
				t.Fatalf("benchmark: %d %s", code, out)
			}
		}
		bs := decode[struct{ Items []apiv1.Benchmark }](t, e.want("GET", "/api/v1/benchmarks", e.admin, nil, http.StatusOK))
		if len(bs.Items) != 1 || bs.Items[0].TFLOPS != 62.5 || bs.Items[0].GPU != "A10G" || bs.Items[0].MemBandwidthGB != 560 {
			t.Fatalf("benchmarks after two deliveries %+v", bs.Items)
		}
		for range 2 {
			code, out := e.postKey("/api/v1/agents/i-0abc/notices", tok, "aws/instance-action/terminate/2026-12-02T12:00:00Z", agentNotice)
			if code != http.StatusAccepted {
				t.Fatalf("notice: %d %s", code, out)
			}
		}
		inst = decode[apiv1.Instance](t, e.want("GET", "/api/v1/instances/i-0abc", e.admin, nil, http.StatusOK))
		deadline := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		if inst.State != store.StatePreempting || !inst.PreemptAt.Equal(deadline) {
			t.Fatalf("instance after notice %+v", inst)
		}
		code, out := e.postKey("/api/v1/agents/i-0abc/notices", tok, "rebalance-1", `{"kind":"rebalance","id":"rebalance-1","cloud":"aws","action":"none"}`)
		if code != http.StatusAccepted {
			t.Fatalf("rebalance notice: %d %s", code, out)
		}
		if code, out := e.postKey("/api/v1/agents/i-0abc/drains", tok, "aws/instance-action/terminate/2026-12-02T12:00:00Z", agentDrain); code != http.StatusAccepted {
			t.Fatalf("drain: %d %s", code, out)
		}
		inst = decode[apiv1.Instance](t, e.want("GET", "/api/v1/instances/i-0abc", e.admin, nil, http.StatusOK))
		if inst.State != store.StateDrained || inst.DrainState != "completed" {
			t.Fatalf("instance after drain %+v", inst)
		}
		evs := decode[struct{ Items []apiv1.Event }](t, e.want("GET", "/api/v1/events?instance=i-0abc", e.admin, nil, http.StatusOK))
		var kinds []string
		for _, ev := range evs.Items {
			kinds = append(kinds, ev.Kind)
		}
		if got := strings.Join(kinds, ","); got != "registered,benchmark,preemption_notice,notice,drained" {
			t.Fatalf("event kinds %s (repeated deliveries must count once)", got)
		}
		evs = decode[struct{ Items []apiv1.Event }](t, e.want("GET", "/api/v1/events?kind=drained", e.admin, nil, http.StatusOK))
		if len(evs.Items) != 1 {
			t.Fatalf("kind filter: %+v", evs.Items)
		}
		last := evs.Items[0].ID
		evs = decode[struct{ Items []apiv1.Event }](t, e.want("GET", fmt.Sprintf("/api/v1/events?after_id=%d", last), e.admin, nil, http.StatusOK))
		if len(evs.Items) != 0 {
			t.Fatalf("after_id filter: %+v", evs.Items)
		}
		list := decode[struct{ Items []apiv1.Instance }](t, e.want("GET", "/api/v1/instances?state=drained", e.admin, nil, http.StatusOK))
		if len(list.Items) != 1 {
			t.Fatalf("instance filter: %+v", list.Items)
		}
		// Drained is final (fleet/instance): a late terminal notice is
		// recorded but does not bring the instance back to preempting.
		if code, out := e.postKey("/api/v1/agents/i-0abc/notices", tok, "late-1", `{"kind":"preempt","id":"late-1","cloud":"aws","action":"none: already draining"}`); code != http.StatusAccepted {
			t.Fatalf("late notice: %d %s", code, out)
		}
		if inst = decode[apiv1.Instance](t, e.want("GET", "/api/v1/instances/i-0abc", e.admin, nil, http.StatusOK)); inst.State != store.StateDrained {
			t.Fatalf("a late notice revived a drained instance: %+v", inst)
		}

		// Re-registering rotates the token: the old one stops working.
		tok2 := e.register("i-0abc", "chat")
		e.want("POST", "/api/v1/agents/i-0abc/heartbeat", tok, `{"load1":1}`, http.StatusUnauthorized)
		e.want("POST", "/api/v1/agents/i-0abc/heartbeat", tok2, `{"load1":1}`, http.StatusOK)
		// Reports for an instance that never registered are 404s.
		e.want("POST", "/api/v1/agents/i-ghost/heartbeat", e.admin, `{"load1":1}`, http.StatusNotFound)
		e.want("POST", "/api/v1/agents/i-ghost/notices", e.admin, agentNotice, http.StatusNotFound)
	})
}

// TestConcurrentHeartbeats drives the group commit: every heartbeat is
// acknowledged and the last one of each agent is stored.
func TestConcurrentHeartbeats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const agents, beats = 20, 10
		toks := make([]string, agents)
		for i := range toks {
			toks[i] = e.register(fmt.Sprintf("i-%02d", i), "")
		}
		var wg sync.WaitGroup
		errs := make(chan string, agents*beats)
		for i := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 1; k <= beats; k++ {
					code, out := e.do("POST", fmt.Sprintf("/api/v1/agents/i-%02d/heartbeat", i), toks[i], map[string]any{"load1": float64(k)})
					if code != http.StatusOK {
						errs <- fmt.Sprintf("agent %d beat %d: %d %s", i, k, code, out)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		for i := range agents {
			inst := decode[apiv1.Instance](t, e.want("GET", fmt.Sprintf("/api/v1/instances/i-%02d", i), e.admin, nil, http.StatusOK))
			if inst.Load1 != beats {
				t.Errorf("agent %d: load1 %v, want %d", i, inst.Load1, beats)
			}
		}
	})
}

func TestBadInput(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", 300<<10) + `"}`
	bigHB := `{"load1":1,"gpus":[` + strings.Repeat(`{"index":0},`, 8000) + `{"index":0}]}`
	cases := []struct {
		name, method, path string
		body               any
		status             int
		msg                string
	}{
		{"not json", "POST", "/api/v1/workloads", "{name:", 400, "not valid JSON"},
		{"empty body", "POST", "/api/v1/workloads", "", 400, "empty"},
		{"unknown field", "POST", "/api/v1/workloads", `{"name":"a","kind":"batch","colour":"red"}`, 400, `unknown field "colour"`},
		{"trailing data", "POST", "/api/v1/workloads", `{"name":"a","kind":"batch"} {}`, 400, "after the JSON object"},
		{"wrong type", "POST", "/api/v1/workloads", `{"name":5,"kind":"batch"}`, 400, `field "name" must be a string`},
		{"bad name", "POST", "/api/v1/workloads", `{"name":"Bad Name","kind":"batch"}`, 400, "is not valid"},
		{"bad kind", "POST", "/api/v1/workloads", `{"name":"a","kind":"serving"}`, 400, "training, inference or batch"},
		{"spec not object", "POST", "/api/v1/workloads", `{"name":"a","kind":"batch","spec":[1]}`, 400, "spec must be a JSON object"},
		{"too large", "POST", "/api/v1/workloads", big, 413, "larger than"},
		{"agent body too large", "POST", "/api/v1/agents/i-x/heartbeat", bigHB, 413, "larger than"},
		{"utilization over 100", "POST", "/api/v1/agents/i-x/heartbeat", `{"gpus":[{"index":0,"util_gpu_pct":700}]}`, 400, "gpus[0].util_gpu_pct"},
		{"gpu without index", "POST", "/api/v1/agents/i-x/heartbeat", `{"gpus":[{"name":"T4"}]}`, 400, "lacks its index"},
		{"gpus not array", "POST", "/api/v1/agents/i-x/heartbeat", `{"gpus":{"index":0}}`, 400, "array"},
		{"negative load", "POST", "/api/v1/agents/i-x/heartbeat", `{"load1":-1}`, 400, "load1"},
		{"unknown gpu", "POST", "/api/v1/agents/i-x/benchmarks", `{"gpus":[{"index":0,"name":"Voodoo 2","tflops":1}]}`, 400, "not a known GPU"},
		{"zero tflops", "POST", "/api/v1/agents/i-x/benchmarks", `{"gpus":[{"index":0,"model":"T4","tflops":0}]}`, 400, "tflops"},
		{"no results", "POST", "/api/v1/agents/i-x/benchmarks", `{"gpus":[]}`, 400, "1 to 64"},
		{"bad notice kind", "POST", "/api/v1/agents/i-x/notices", `{"kind":"explode","id":"n"}`, 400, "not a notice kind"},
		{"bad drain step", "POST", "/api/v1/agents/i-x/drains", `{"ok":true,"steps":[{"name":"x","status":"maybe"}]}`, 400, "steps[0].status"},
		{"long idempotency key", "POST", "/api/v1/agents/i-x/notices", nil, 400, "Idempotency-Key"},
		{"register bad cloud", "POST", "/api/v1/agents/register", `{"instance_id":"i-1","cloud":"ibm"}`, 400, "unknown cloud"},
		{"register bad id", "POST", "/api/v1/agents/register", `{"instance_id":"../etc","cloud":"aws"}`, 400, "instance_id"},
		{"register no identity", "POST", "/api/v1/agents/register", `{"cloud":"aws","agent_version":"v1"}`, 400, "both empty"},
		{"token bad kind", "POST", "/api/v1/tokens", `{"kind":"agent","name":"x"}`, 400, "admin, bootstrap or registration"},
		{"offers bad gpu", "GET", "/api/v1/offers?gpu=A100-80", nil, 400, "did you mean"},
		{"offers bad cloud", "GET", "/api/v1/offers?cloud=ibm", nil, 400, "unknown cloud"},
		{"offers bad count", "GET", "/api/v1/offers?min_gpus=abc", nil, 400, "min_gpus"},
		{"offers min>max", "GET", "/api/v1/offers?min_gpus=8&max_gpus=2", nil, 400, "more than max_gpus"},
		{"offers bad glob", "GET", "/api/v1/offers?region=us-[", nil, 400, "not a valid glob"},
		{"offers unknown param", "GET", "/api/v1/offers?colour=red", nil, 400, "unknown query parameter"},
		{"events bad since", "GET", "/api/v1/events?since=yesterday", nil, 400, "RFC 3339"},
		{"events bad kind", "GET", "/api/v1/events?kind=party", nil, 400, "not an event kind"},
		{"events bad limit", "GET", "/api/v1/events?limit=0", nil, 400, "limit"},
		{"instances bad state", "GET", "/api/v1/instances?state=zombie", nil, 400, "state"},
		{"empty policy", "POST", "/api/v1/plan", "  ", 400, "empty"},
		{"wrong content type", "POST", "/api/v1/workloads", nil, 400, "Content-Type"},
		{"unknown route", "GET", "/api/v1/nothing", nil, 404, "no route"},
		{"wrong method", "PATCH", "/api/v1/workloads", nil, 405, "not allowed"},
	}
	e := newEnv(t, filepath.Join(t.TempDir(), "b.db"))
	e.register("i-x", "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var code int
			var out []byte
			if c.name == "long idempotency key" {
				code, out = e.postKey(c.path, e.admin, strings.Repeat("k", 300), agentNotice)
			} else if c.name == "wrong content type" {
				req, _ := http.NewRequest("POST", e.srv.URL+c.path, strings.NewReader("name=a"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer "+e.admin)
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				out, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			} else {
				code, out = e.do(c.method, c.path, e.admin, c.body)
			}
			if code != c.status {
				t.Fatalf("status %d, want %d: %s", code, c.status, out)
			}
			eb := decode[errBody](t, out)
			if !strings.Contains(eb.Error.Message, c.msg) {
				t.Fatalf("message %q does not mention %q", eb.Error.Message, c.msg)
			}
		})
	}
}

func TestOffersQuery(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "b.db"))
	type offers struct {
		Count  int
		Offers []pricing.Offer
	}
	got := decode[offers](t, e.want("GET", "/api/v1/offers?gpu=H100,A100-80GB&cloud=aws&capacity=spot&min_gpus=8", e.admin, nil, http.StatusOK))
	if got.Count == 0 || got.Count != len(got.Offers) {
		t.Fatalf("count %d with %d offers", got.Count, len(got.Offers))
	}
	for _, o := range got.Offers {
		if o.Cloud != pricing.AWS || o.GPUCount < 8 || o.SpotPrice == 0 || (o.GPU != "H100" && o.GPU != "A100-80GB") {
			t.Fatalf("offer %+v does not match the query", o)
		}
	}
	got = decode[offers](t, e.want("GET", "/api/v1/offers?region=europe-*&limit=3", e.admin, nil, http.StatusOK))
	if got.Count != 3 {
		t.Fatalf("limit: %d offers", got.Count)
	}
	for _, o := range got.Offers {
		if !strings.HasPrefix(o.Region, "europe-") {
			t.Fatalf("region filter let %s through", o.Region)
		}
	}
	got = decode[offers](t, e.want("GET", "/api/v1/offers?max_price=0.0001", e.admin, nil, http.StatusOK))
	if got.Count != 0 || got.Offers == nil {
		t.Fatalf("expected an empty (not null) list, got %+v", got)
	}
}

func TestPlanRoutes(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "b.db"))
	e.want("POST", "/api/v1/plan?name=mine.yaml", e.admin, "workloads: []\n", http.StatusOK)
	e.planner.planErr = fmt.Errorf("%w: mine.yaml:3:5: unknown field", policy.ErrInvalid)
	out := e.want("POST", "/api/v1/plan", e.admin, "x: 1", http.StatusBadRequest)
	if !strings.Contains(decode[errBody](t, out).Error.Message, "mine.yaml:3:5") {
		t.Fatalf("policy position lost: %s", out)
	}
	e.planner.planErr = fmt.Errorf("%w: no offer fits", optimizer.ErrInfeasible)
	e.want("POST", "/api/v1/plan", e.admin, "x: 1", http.StatusUnprocessableEntity)
	e.planner.currentErr = policy.ErrNoPolicy
	e.want("GET", "/api/v1/plan", e.admin, nil, http.StatusNotFound)
	e.planner.currentErr = fmt.Errorf("disk on fire: secret=hunter2")
	out = e.want("GET", "/api/v1/plan", e.admin, nil, http.StatusInternalServerError)
	if strings.Contains(string(out), "hunter2") {
		t.Fatalf("internal error detail leaked: %s", out)
	}
	big := strings.Repeat("#", 300<<10)
	e.want("POST", "/api/v1/plan", e.admin, big, http.StatusRequestEntityTooLarge)
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "b.db"))
	e.want("GET", "/api/v1/workloads", e.admin, nil, http.StatusOK)
	e.want("GET", "/api/v1/workloads", "", nil, http.StatusUnauthorized)
	out := string(e.want("GET", "/metrics", "", nil, http.StatusOK))
	for _, want := range []string{
		`gpubroker_http_request_duration_seconds_count{code="200",route="GET /api/v1/workloads"} 1`,
		`gpubroker_http_request_duration_seconds_count{code="401",route="GET /api/v1/workloads"} 1`,
		`gpubroker_plan_cost_usd`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProgressReports(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tok := e.register("i-train", "train")
		tokIdle := e.register("i-idle", "")
		at := time.Now().UTC().Truncate(time.Second)
		body := map[string]any{"done": 0.42, "step": 4200, "eta_seconds": 5400, "reported_at": at.Format(time.RFC3339)}
		out := e.want("POST", "/api/v1/agents/i-train/progress", tok, body, http.StatusOK)
		if r := decode[apiv1.ProgressResponse](t, out); r.Status != "stored" || r.Workload != "train" {
			t.Fatalf("first report: %s", out)
		}
		// A retry (same reported_at) and a late, older report change nothing.
		out = e.want("POST", "/api/v1/agents/i-train/progress", tok, body, http.StatusOK)
		if r := decode[apiv1.ProgressResponse](t, out); r.Status != "unchanged" {
			t.Fatalf("retried report: %s", out)
		}
		older := map[string]any{"done": 0.1, "reported_at": at.Add(-time.Minute).Format(time.RFC3339)}
		if r := decode[apiv1.ProgressResponse](t, e.want("POST", "/api/v1/agents/i-train/progress", tok, older, http.StatusOK)); r.Status != "unchanged" {
			t.Fatalf("older report stored")
		}
		p, err := e.broker.JobProgress(t.Context(), "train")
		if err != nil || p.Done != 0.42 || p.Step != 4200 || p.ETA != 90*time.Minute || p.Instance != "i-train" {
			t.Fatalf("stored progress %+v, %v", p, err)
		}
		for _, tc := range []struct {
			name, body, want string
		}{
			{"done above 1", `{"done":1.5,"reported_at":"2026-12-01T10:00:00Z"}`, "from 0 to 1"},
			{"done negative", `{"done":-0.1,"reported_at":"2026-12-01T10:00:00Z"}`, "from 0 to 1"},
			{"done a string", `{"done":"half","reported_at":"2026-12-01T10:00:00Z"}`, "done"},
			{"no time", `{"done":0.5}`, "reported_at is missing"},
			{"time far ahead", fmt.Sprintf(`{"done":0.5,"reported_at":%q}`, at.Add(time.Hour).Format(time.RFC3339)), "ahead of the broker's clock"},
			{"negative step", `{"done":0.5,"step":-1,"reported_at":"2026-12-01T10:00:00Z"}`, "step"},
			{"negative eta", `{"done":0.5,"eta_seconds":-3,"reported_at":"2026-12-01T10:00:00Z"}`, "eta_seconds"},
			{"unknown field", `{"done":0.5,"percent":50,"reported_at":"2026-12-01T10:00:00Z"}`, "percent"},
			{"not json", `done=0.5`, ""},
		} {
			code, out := e.do("POST", "/api/v1/agents/i-train/progress", tok, tc.body)
			eb := decode[errBody](t, out)
			if code != http.StatusBadRequest || eb.Error.Message == "" || !strings.Contains(eb.Error.Message, tc.want) {
				t.Errorf("%s: status %d, body %s; want 400 mentioning %q", tc.name, code, out, tc.want)
			}
		}
		code, out := e.do("POST", "/api/v1/agents/i-idle/progress", tokIdle, body)
		if eb := decode[errBody](t, out); code != http.StatusConflict || !strings.Contains(eb.Error.Message, "no workload") {
			t.Errorf("instance without a workload: %d %s, want 409", code, out)
		}
		if code, out := e.do("POST", "/api/v1/agents/i-ghost/progress", e.admin, body); code != http.StatusNotFound {
			t.Errorf("unknown instance: %d %s, want 404", code, out)
		}
	})
}
