package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent"
	agentbroker "github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/agent/drain"
	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/pricing"
)

// syncBuf is a log sink shared by goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// agentVersions are what the Go toolchain stamps: a tagged build, a build
// without VCS stamping (go build -buildvcs=false, Docker, a tarball) and a
// build from a modified checkout.
var agentVersions = []string{"v1.4.2", "(devel)", "v0.0.0-20261202161000-0123456789ab+dirty"}

// TestAgentContract sends the agent's own messages (built by the agent's
// own converters from notice.Notice, drain.Result, gpu.Stat and
// gpu.Result) through the agent's own client, reporter and spool to the
// real handlers, for every kind of version string a build produces.
func TestAgentContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		admin := apiv1.NewClient(e.srv.URL, e.admin, e.srv.Client())
		boot, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
		if err != nil {
			t.Fatal(err)
		}
		for i, version := range agentVersions {
			t.Run(version, func(t *testing.T) {
				id := "i-0contract" + string(rune('a'+i))
				dir := t.TempDir()
				tokFile := filepath.Join(dir, "token")
				if err := os.WriteFile(tokFile, []byte(boot.Secret+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				util, temp, power := uint32(87), uint32(61), 212.5
				stats := []gpu.Stat{{Index: 0, UUID: "GPU-1", Name: "NVIDIA A10G", Model: pricing.A10G, MemoryTotalMiB: 23028,
					MemoryUsedMiB: 20000, UtilGPUPct: &util, TempC: &temp, PowerW: &power}}
				c := &agentbroker.Client{BaseURL: e.srv.URL, HTTP: e.srv.Client(), TokenFile: tokFile, StateFile: filepath.Join(dir, "agent.json"),
					Register: apiv1.RegisterRequest{Hostname: "ip-10-0-0-12", Cloud: "aws", InstanceID: id, AgentVersion: version,
						Region: "us-east-1", Zone: "us-east-1b", InstanceType: "g5.xlarge", Capacity: "spot", GPUs: agent.APIStats(stats)}}
				resp, err := c.Heartbeat(ctx, apiv1.Heartbeat{Time: time.Now(), Cloud: "aws", GPUs: agent.APIStats(stats), SpoolDepth: 0})
				if err != nil {
					t.Fatalf("heartbeat (registers first): %v", err)
				}
				if resp.HeartbeatIntervalSeconds != 10 || c.HeartbeatInterval() != 10*time.Second {
					t.Fatalf("heartbeat interval %d / %s, want the broker's 10 s", resp.HeartbeatIntervalSeconds, c.HeartbeatInterval())
				}

				deadline := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
				n := notice.Notice{Kind: notice.KindTerminate, ID: "aws/instance-action/terminate/" + deadline.Format(time.RFC3339),
					Cloud: "aws", Deadline: deadline, Observed: deadline.Add(-2 * time.Minute), Detail: "terminate",
					Raw: notice.RawJSON([]byte(`{"action":"terminate","time":"2026-12-02T12:00:00Z"}`))}
				res := drain.Result{Info: drain.Info{NoticeID: n.ID, Kind: string(n.Kind), Cloud: "aws", Deadline: deadline},
					Started: deadline.Add(-time.Minute), Finished: deadline.Add(-time.Minute)}
				bench := gpu.Result{Time: deadline.Add(-time.Hour), Method: "cuda-dlopen", Duration: 12.5, Threshold: 0.8,
					GPUs: []gpu.GPUResult{{Measurement: gpu.Measurement{Index: 0, Name: "NVIDIA A10G", DType: "bf16", TFLOPS: 61.2,
						BandwidthGBs: 540, MatrixN: 8192, Iterations: 20}, Model: pricing.A10G, SpecTFLOPS: 70, TFLOPSRatio: 0.87}}}
				var reps []agentbroker.Report
				for _, r := range []struct {
					kind, id string
					body     any
				}{
					{agentbroker.KindNotice, n.ID, agent.NoticeReport(n, "drain")},
					// A drain that could not run as configured reports why.
					{agentbroker.KindDrain, n.ID, agent.DrainReport(res, errors.New("no drain steps configured"), false)},
					{agentbroker.KindBenchmark, "benchmark/1", agent.BenchmarkReport(bench)},
				} {
					rep, err := agentbroker.NewReport(r.kind, r.id, r.body)
					if err != nil {
						t.Fatal(err)
					}
					reps = append(reps, rep)
				}
				for _, rep := range reps {
					for range 2 { // a re-delivery from the spool counts once
						if err := c.Send(ctx, rep); err != nil {
							t.Fatalf("%s: %v", rep.Kind, err)
						}
					}
				}
				inst, err := admin.GetInstance(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if inst.AgentVersion != version || inst.Region != "us-east-1" || inst.Zone != "us-east-1b" || inst.InstanceType != "g5.xlarge" ||
					inst.Capacity != "spot" || inst.GPU != "A10G" || inst.GPUCount != 1 || inst.Utilization != 0.87 ||
					inst.State != apiv1.StateDraining || inst.DrainState != "failed" || !inst.PreemptAt.Equal(deadline) {
					t.Fatalf("instance after the agent's messages: %+v", inst)
				}
				evs, err := admin.ListEvents(ctx, apiv1.EventsQuery{Instance: id})
				if err != nil || len(evs) != 4 {
					t.Fatalf("events: %d %v", len(evs), err)
				}
				if evs[2].Kind != apiv1.EventDrainFailed || !strings.Contains(evs[2].Message, "no drain steps configured") {
					t.Fatalf("drain event: %+v", evs[2])
				}
			})
		}
	})
}

// TestAgentReportsSurviveRejections: a report the broker refuses (4xx)
// is dropped alone, the others are delivered; while the agent cannot
// register (a bootstrap token for an instance that exists), reports stay
// spooled and the logs say so; a registration token for the instance
// then delivers them.
func TestAgentReportsSurviveRejections(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		admin := apiv1.NewClient(e.srv.URL, e.admin, e.srv.Client())
		boot, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
		if err != nil {
			t.Fatal(err)
		}
		e.register("i-0lost", "") // registered before; the agent has lost its state
		dir := t.TempDir()
		tokFile := filepath.Join(dir, "token")
		_ = os.WriteFile(tokFile, []byte(boot.Secret), 0o600)
		var logs syncBuf
		c := &agentbroker.Client{BaseURL: e.srv.URL, HTTP: e.srv.Client(), TokenFile: tokFile, StateFile: filepath.Join(dir, "agent.json"),
			Register: apiv1.RegisterRequest{Hostname: "h", Cloud: "aws", InstanceID: "i-0lost", AgentVersion: "(devel)"}}
		sp, err := agentbroker.NewSpool(filepath.Join(dir, "spool"), 16)
		if err != nil {
			t.Fatal(err)
		}
		r := &agentbroker.Reporter{Client: c, Spool: sp, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			RetryEvery: 20 * time.Millisecond}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { r.Run(rctx); close(done) }()
		defer func() { cancel(); <-done }()

		mk := func(kind, id string) agentbroker.Report {
			rep, _ := agentbroker.NewReport(agentbroker.KindNotice, id, agent.NoticeReport(notice.Notice{Kind: notice.Kind(kind), ID: id,
				Cloud: "aws", Observed: time.Now()}, "none"))
			return rep
		}
		r.Enqueue(mk("rebalance", "n1"))
		r.Enqueue(mk("explode", "n-bad"))
		r.Enqueue(mk("rebalance", "n2"))
		waitFor(t, func() bool { return sp.Len() == 3 })
		time.Sleep(100 * time.Millisecond) // several retries
		if sp.Len() != 3 || strings.Contains(logs.String(), "dropping") {
			t.Fatalf("reports lost while the agent cannot register (%d left):\n%s", sp.Len(), logs.String())
		}
		if !strings.Contains(logs.String(), "registering as another existing instance is not allowed") {
			t.Fatalf("the log does not say why:\n%s", logs.String())
		}

		reg, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenRegistration, InstanceID: "i-0lost"})
		if err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(tokFile, []byte(reg.Secret), 0o600)
		waitFor(t, func() bool { return sp.Len() == 0 })
		evs, err := admin.ListEvents(ctx, apiv1.EventsQuery{Instance: "i-0lost", Kind: apiv1.EventNotice})
		if err != nil || len(evs) != 2 {
			t.Fatalf("delivered notices: %+v %v", evs, err)
		}
		// The summary line is written just after the spool empties.
		waitFor(t, func() bool { return strings.Contains(logs.String(), "delivered=2 rejected=1") })
		if !strings.Contains(logs.String(), "broker rejected report; dropping it") {
			t.Fatalf("logs do not tell what happened:\n%s", logs.String())
		}
		if code, _ := e.do("GET", "/api/v1/instances/i-0lost", e.admin, nil); code != http.StatusOK {
			t.Fatal(code)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

// TestAgentProgressContract sends a progress file, parsed by the agent's
// own parser and converter, through the agent's client to the real
// handler, twice (a spool re-delivery), and reads what the fleet's
// training stage will see.
func TestAgentProgressContract(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		admin := apiv1.NewClient(e.srv.URL, e.admin, e.srv.Client())
		boot, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		tokFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokFile, []byte(boot.Secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := &agentbroker.Client{BaseURL: e.srv.URL, HTTP: e.srv.Client(), TokenFile: tokFile, StateFile: filepath.Join(dir, "agent.json"),
			Register: apiv1.RegisterRequest{Hostname: "ip-10-0-0-13", Cloud: "aws", InstanceID: "i-0progress", AgentVersion: "v1.4.2",
				Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p3.2xlarge", Capacity: "spot", Workload: "train"}}
		p, err := agent.ParseProgress("progress.json", []byte(`{"done": 0.375, "step": 3000, "eta_seconds": 7200}`))
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		rep, err := agentbroker.NewReport(agentbroker.KindProgress, "progress-1", agent.ProgressReport(p, at))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := c.Send(ctx, rep); err != nil {
				t.Fatalf("progress: %v", err)
			}
		}
		got, err := e.broker.JobProgress(ctx, "train")
		if err != nil {
			t.Fatal(err)
		}
		if got.Done != 0.375 || got.Step != 3000 || got.ETA != 2*time.Hour || got.Instance != "i-0progress" || !got.ReportedAt.Equal(at.UTC()) {
			t.Fatalf("stored progress %+v", got)
		}
	})
}
