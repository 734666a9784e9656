package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/config"
	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/agent/internal/fakebroker"
	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/agent/notice"
)

// workload is a local HTTP endpoint standing in for the workload's drain
// hook; it records what it was told.
type workload struct {
	mu    sync.Mutex
	calls []string
}

func (w *workload) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	var info struct {
		NoticeID string `json:"notice_id"`
		Early    bool   `json:"early"`
	}
	_ = json.NewDecoder(r.Body).Decode(&info)
	w.mu.Lock()
	w.calls = append(w.calls, r.URL.Path+" "+info.NoticeID)
	w.mu.Unlock()
}

func (w *workload) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

type env struct {
	broker   *fakebroker.Broker
	brokerTS *httptest.Server
	work     *workload
	workURL  string
	cfg      config.Config
	dir      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{broker: fakebroker.New("boot"), work: &workload{}, dir: t.TempDir()}
	e.brokerTS = httptest.NewServer(e.broker)
	t.Cleanup(e.brokerTS.Close)
	ws := httptest.NewServer(e.work)
	t.Cleanup(ws.Close)
	e.workURL = ws.URL
	tf := filepath.Join(e.dir, "token")
	_ = os.WriteFile(tf, []byte("boot"), 0o600)
	e.cfg = config.Config{
		Broker: e.brokerTS.URL, TokenFile: tf, StateDir: filepath.Join(e.dir, "state"),
		PollInterval: 20 * time.Millisecond, HeartbeatInterval: time.Hour,
		Drain:     []config.Step{{Kind: "http", URL: ws.URL + "/drain", Timeout: time.Second}},
		Benchmark: config.Benchmark{Method: "off"},
	}
	return e
}

func (e *env) start(t *testing.T, o agent.Options) {
	t.Helper()
	o.Config = e.cfg
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.OpenGPU == nil && o.GPU == nil {
		o.OpenGPU = func() (gpu.Collector, error) { return nil, gpu.ErrNoNVML }
	}
	a, err := agent.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	for _, s := range state {
		what += " (state: " + s() + ")"
	}
	t.Fatalf("timed out waiting for %s", what)
}

func paths(rs []fakebroker.Received) string {
	var out []string
	for _, r := range rs {
		if r.Path != "heartbeat" {
			out = append(out, r.Path)
		}
	}
	return strings.Join(out, ",")
}

func TestAWSNoticeDrainsAndReports(t *testing.T) {
	e := newEnv(t)
	imds := fakecloud.NewAWS()
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close)                             // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "auto", srv.URL // detected through the fake
	e.start(t, agent.Options{})
	time.Sleep(100 * time.Millisecond)
	imds.SetInstanceAction(`{"action":"terminate","time":"` + time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339) + `"}`)
	waitFor(t, "drain reported", func() bool { return paths(e.broker.Received()) == "notices,drains" },
		func() string { return paths(e.broker.Received()) + fmt.Sprint(e.work.got()) })
	if got := e.work.got(); len(got) != 1 || !strings.HasPrefix(got[0], "/drain aws/instance-action/terminate/") {
		t.Fatalf("workload told %v", got)
	}
	rs := e.broker.Received()
	var d map[string]any
	for _, r := range rs {
		if r.Path == "drains" {
			d = r.Body
		}
	}
	if d["ok"] != true || d["info"].(map[string]any)["cloud"] != "aws" {
		t.Fatalf("drain report %v", d)
	}
}

func TestAzurePreemptDrainsThenAcks(t *testing.T) {
	e := newEnv(t)
	az := fakecloud.NewAzure("vm0")
	srv := httptest.NewServer(az)
	t.Cleanup(srv.Close) // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "azure", srv.URL
	e.start(t, agent.Options{})
	az.AddEvent("EV1", "Preempt", []string{"vm0"}, time.Now().Add(30*time.Second))
	waitFor(t, "ack", func() bool { return slices.Equal(az.AckedIDs(), []string{"EV1"}) })
	waitFor(t, "drain reported", func() bool { return paths(e.broker.Received()) == "notices,drains" })
	for _, r := range e.broker.Received() {
		if r.Path == "drains" && r.Body["acked"] != true {
			t.Fatalf("drain report without acked: %v", r.Body)
		}
	}
	if len(e.work.got()) != 1 {
		t.Fatalf("workload told %v", e.work.got())
	}
}

func TestGCPEarlyDrainThenPreemption(t *testing.T) {
	e := newEnv(t)
	md := fakecloud.NewGCP()
	srv := httptest.NewServer(md)
	t.Cleanup(srv.Close) // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "gcp", srv.URL
	e.cfg.EarlyDrain = config.EarlyDrain{On: []string{"maintenance"},
		Steps: []config.Step{{Kind: "http", URL: e.workURL + "/checkpoint", Timeout: time.Second}}}
	e.start(t, agent.Options{})
	time.Sleep(100 * time.Millisecond)
	md.Set("instance/maintenance-event", "MIGRATE_ON_HOST_MAINTENANCE")
	waitFor(t, "early drain", func() bool { return len(e.work.got()) == 1 })
	md.Set("instance/preempted", "TRUE")
	waitFor(t, "full drain", func() bool { return len(e.work.got()) == 2 })
	got := e.work.got()
	if !strings.HasPrefix(got[0], "/checkpoint gcp/maintenance/") || got[1] != "/drain gcp/preempted" {
		t.Fatalf("workload told %v", got)
	}
	// The early drain's result and the preemption notice may be reported in
	// either order.
	waitFor(t, "reports", func() bool {
		p := strings.Split(paths(e.broker.Received()), ",")
		slices.Sort(p)
		return strings.Join(p, ",") == "drains,drains,notices,notices"
	})
}

func TestRebalanceWithoutEarlyDrainIsOnlyReported(t *testing.T) {
	e := newEnv(t)
	imds := fakecloud.NewAWS()
	imds.SetRebalance(`{"noticeTime":"2026-04-24T17:00:00Z"}`)
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close) // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "aws", srv.URL
	e.start(t, agent.Options{})
	waitFor(t, "notice", func() bool { return paths(e.broker.Received()) == "notices" })
	time.Sleep(100 * time.Millisecond)
	if len(e.work.got()) != 0 {
		t.Fatalf("drained on a rebalance without early_drain: %v", e.work.got())
	}
	for _, r := range e.broker.Received() {
		if a := r.Body["action"]; r.Path == "notices" && a != "none" {
			t.Fatalf("action %v", a)
		}
	}
}

func TestHungHookAndDownBroker(t *testing.T) {
	e := newEnv(t)
	e.broker.SetDown(true)
	az := fakecloud.NewAzure("vm0")
	srv := httptest.NewServer(az)
	t.Cleanup(srv.Close) // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "azure", srv.URL
	e.cfg.SafetyMargin = time.Second
	e.cfg.Drain = append([]config.Step{{Kind: "exec", Command: "sleep 60", Timeout: 300 * time.Millisecond}}, e.cfg.Drain...)
	e.start(t, agent.Options{})
	az.AddEvent("EV1", "Preempt", []string{"vm0"}, time.Now().Add(30*time.Second))
	// The drain goes on without the broker, past the hung hook. It did
	// not complete, so the event is not approved: the workload keeps its
	// time until NotBefore.
	waitFor(t, "workload told", func() bool { return len(e.work.got()) == 1 })
	spool := filepath.Join(e.cfg.StateDir, "spool")
	waitFor(t, "reports spooled", func() bool { ents, _ := os.ReadDir(spool); return len(ents) == 2 })
	e.broker.SetDown(false)
	waitFor(t, "spool delivered", func() bool { return paths(e.broker.Received()) == "notices,drains" })
	if got := az.AckedIDs(); len(got) != 0 {
		t.Fatalf("a failed drain was acknowledged: %v", got)
	}
	for _, r := range e.broker.Received() {
		if r.Path == "drains" {
			if r.Body["acked"] != false {
				t.Fatalf("drain report says acked: %v", r.Body)
			}
			steps := r.Body["steps"].([]any)
			if s := steps[0].(map[string]any)["status"]; s != "timed_out" {
				t.Fatalf("hung hook status %v", s)
			}
			if s := steps[1].(map[string]any)["status"]; s != "ok" {
				t.Fatalf("step after the hung hook: %v", s)
			}
		}
	}
}

func TestHeartbeatTelemetryAndBenchmarkOnDemand(t *testing.T) {
	e := newEnv(t)
	imds := fakecloud.NewAWS()
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close) // after the agent stops (cleanups run last-in first-out)
	e.cfg.Cloud, e.cfg.MetadataURL = "aws", srv.URL
	e.cfg.HeartbeatInterval = 50 * time.Millisecond
	script := filepath.Join(e.dir, "bench.sh")
	_ = os.WriteFile(script, []byte(`#!/bin/sh
echo '{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"NVIDIA H100 80GB HBM3","dtype":"bf16","tflops":700,"bandwidth_gbs":3000}]}'
`), 0o755)
	e.cfg.Benchmark = config.Benchmark{Method: "command", Command: script}
	now := make(chan struct{})
	e.start(t, agent.Options{GPU: fakeGPU{}, BenchmarkNow: now})
	count := func(p string) int {
		n := 0
		for _, r := range e.broker.Received() {
			if r.Path == p {
				n++
			}
		}
		return n
	}
	waitFor(t, "start-up benchmark and heartbeat", func() bool { return count("benchmarks") == 1 && count("heartbeat") >= 1 })
	now <- struct{}{}
	waitFor(t, "on-demand benchmark", func() bool { return count("benchmarks") == 2 })
	e.broker.SetBenchmarkRequested(true)
	waitFor(t, "broker-requested benchmark", func() bool { return count("benchmarks") >= 3 })
	for _, r := range e.broker.Received() {
		switch r.Path {
		case "heartbeat":
			g := r.Body["gpus"].([]any)[0].(map[string]any)
			if g["model"] != "H100" || r.Body["cloud"] != "aws" && r.Body["cloud"] != "" {
				t.Fatalf("heartbeat %v", r.Body)
			}
		case "benchmarks":
			g := r.Body["gpus"].([]any)[0].(map[string]any)
			if g["model"] != "H100" || g["tflops_ratio"] != 0.708 || g["spec_bandwidth_gbs"] != 3350.0 {
				t.Fatalf("benchmark %v", r.Body)
			}
		}
	}
}

type fakeGPU struct{}

func (fakeGPU) Collect() ([]gpu.Stat, error) {
	return []gpu.Stat{{Index: 0, Name: "NVIDIA H100 80GB HBM3", Model: "H100", MemoryTotalMiB: 81559}}, nil
}
func (fakeGPU) Close() error { return nil }

func TestDetect(t *testing.T) {
	dmi := func(files map[string]string) string {
		d := t.TempDir()
		for k, v := range files {
			_ = os.WriteFile(filepath.Join(d, k), []byte(v+"\n"), 0o644)
		}
		return d
	}
	for _, tc := range []struct {
		name   string
		dmi    map[string]string
		server http.Handler
		want   string
	}{
		{"aws dmi", map[string]string{"sys_vendor": "Amazon EC2"}, nil, notice.AWS},
		{"gcp dmi", map[string]string{"sys_vendor": "Google", "product_name": "Google Compute Engine"}, nil, notice.GCP},
		{"azure dmi", map[string]string{"sys_vendor": "Microsoft Corporation", "chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77"}, nil, notice.Azure},
		{"aws imds", nil, fakecloud.NewAWS(), notice.AWS},
		{"gcp metadata", nil, fakecloud.NewGCP(), notice.GCP},
		{"azure imds", nil, fakecloud.NewAzure("vm0"), notice.Azure},
		{"nothing", map[string]string{"sys_vendor": "QEMU"}, http.NotFoundHandler(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := agent.DetectOptions{DMIDir: dmi(tc.dmi)}
			if tc.server != nil {
				srv := httptest.NewServer(tc.server)
				defer srv.Close()
				o.MetadataURL = srv.URL
			}
			got, err := agent.Detect(context.Background(), o)
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, c := range []config.Config{
		{Cloud: "oracle"},
		{Broker: "http://b"}, // no token file
		{Drain: []config.Step{{Kind: "signal", Signal: "SIGNOPE", PIDFile: "/x"}}},
		{Drain: []config.Step{{Kind: "teleport"}}},
	} {
		if _, err := agent.New(agent.Options{Config: c, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
			t.Errorf("New(%+v): want an error", c)
		}
	}
}

func TestStopDuringDrainStillReports(t *testing.T) {
	e := newEnv(t)
	imds := fakecloud.NewAWS()
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close)
	e.cfg.Cloud, e.cfg.MetadataURL = "aws", srv.URL
	marker := filepath.Join(e.dir, "drained")
	e.cfg.Drain = []config.Step{{Kind: "exec", Command: "sleep 0.3; touch " + marker, Timeout: 5 * time.Second}}
	a, err := agent.New(agent.Options{Config: e.cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OpenGPU:     func() (gpu.Collector, error) { return nil, gpu.ErrNoNVML },
		OnDrainStep: func(notice.Notice, int, string, time.Time) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	imds.SetInstanceAction(`{"action":"terminate","time":"` + time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339) + `"}`)
	waitFor(t, "notice reported", func() bool { return strings.HasPrefix(paths(e.broker.Received()), "notices") })
	cancel() // systemd stops the agent as the VM shuts down, mid-drain
	<-done
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the drain was cut short by the agent stopping")
	}
	if got := paths(e.broker.Received()); got != "notices,drains" {
		t.Fatalf("broker got %q; want the drain result delivered on the way out", got)
	}
}

func TestDrainDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		notice time.Time
		want   time.Time
	}{
		{time.Time{}, time.Time{}}, // no deadline: step timeouts only
		{now.Add(2 * time.Minute), now.Add(2*time.Minute - 5*time.Second)}, // AWS: 2 min minus the margin
		{now.Add(8 * time.Second), now.Add(agent.MinDrainTime)},            // margin would leave 3s: floor
		{now.Add(-time.Minute), now.Add(agent.MinDrainTime)},               // already past: still try
	} {
		if got := agent.DrainDeadline(tc.notice, 5*time.Second, now); !got.Equal(tc.want) {
			t.Errorf("DrainDeadline(%v) = %v, want %v", tc.notice, got, tc.want)
		}
	}
}

func TestAzureStartedEventStillDrains(t *testing.T) {
	e := newEnv(t)
	az := fakecloud.NewAzure("vm0")
	srv := httptest.NewServer(az)
	t.Cleanup(srv.Close)
	e.cfg.Cloud, e.cfg.MetadataURL = "azure", srv.URL
	e.start(t, agent.Options{})
	az.AddEvent("EV1", "Preempt", []string{"vm0"}, time.Time{}) // no NotBefore: the platform acts now
	waitFor(t, "workload told", func() bool { return len(e.work.got()) == 1 })
}

// TestTerminalEventsGetTheFullDrain: events after which the workload is
// gone (Azure Reboot and Redeploy, GCP TERMINATE_ON_HOST_MAINTENANCE, AWS
// stop) run the full drain even with no early drain configured.
func TestTerminalEventsGetTheFullDrain(t *testing.T) {
	for _, typ := range []string{"Reboot", "Redeploy"} {
		t.Run("azure "+typ, func(t *testing.T) {
			e := newEnv(t)
			az := fakecloud.NewAzure("vm0")
			srv := httptest.NewServer(az)
			t.Cleanup(srv.Close)
			e.cfg.Cloud, e.cfg.MetadataURL = "azure", srv.URL
			e.start(t, agent.Options{})
			az.AddEvent("EV-"+typ, typ, []string{"vm0"}, time.Now().Add(10*time.Minute))
			waitFor(t, "full drain", func() bool { return slices.Equal(e.work.got(), []string{"/drain azure/EV-" + typ}) })
			waitFor(t, "ack after the drain", func() bool { return len(az.AckedIDs()) == 1 })
		})
	}
	t.Run("gcp terminate on host maintenance", func(t *testing.T) {
		e := newEnv(t)
		md := fakecloud.NewGCP()
		srv := httptest.NewServer(md)
		t.Cleanup(srv.Close)
		e.cfg.Cloud, e.cfg.MetadataURL = "gcp", srv.URL
		e.start(t, agent.Options{})
		time.Sleep(100 * time.Millisecond)
		md.Set("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
		waitFor(t, "full drain", func() bool {
			got := e.work.got()
			return len(got) == 1 && strings.HasPrefix(got[0], "/drain gcp/maintenance/TERMINATE_ON_HOST_MAINTENANCE")
		})
	})
	t.Run("aws stop", func(t *testing.T) {
		e := newEnv(t)
		imds := fakecloud.NewAWS()
		srv := httptest.NewServer(imds)
		t.Cleanup(srv.Close)
		e.cfg.Cloud, e.cfg.MetadataURL = "aws", srv.URL
		e.start(t, agent.Options{})
		imds.SetInstanceAction(`{"action":"stop","time":"` + time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339) + `"}`)
		waitFor(t, "full drain", func() bool { return len(e.work.got()) == 1 && strings.HasPrefix(e.work.got()[0], "/drain aws/") })
	})
}

// TestAzureAckRetried: the acknowledgement is retried until Azure takes
// it, and only after the workload was told.
func TestAzureAckRetried(t *testing.T) {
	e := newEnv(t)
	az := fakecloud.NewAzure("vm0")
	az.FailAcks(2)
	srv := httptest.NewServer(az)
	t.Cleanup(srv.Close)
	e.cfg.Cloud, e.cfg.MetadataURL = "azure", srv.URL
	e.start(t, agent.Options{})
	az.AddEvent("EV1", "Preempt", []string{"vm0"}, time.Now().Add(time.Minute))
	waitFor(t, "workload told", func() bool { return len(e.work.got()) == 1 })
	waitFor(t, "ack after two failures", func() bool { return slices.Equal(az.AckedIDs(), []string{"EV1"}) })
	waitFor(t, "drain reported acked", func() bool {
		for _, r := range e.broker.Received() {
			if r.Path == "drains" && r.Body["acked"] == true {
				return true
			}
		}
		return false
	})
}

// TestBrokerHeartbeatIntervalHonoured: the agent's configured interval
// is an hour, the broker asks for 1 s: heartbeats come every second.
func TestBrokerHeartbeatIntervalHonoured(t *testing.T) {
	e := newEnv(t)
	e.broker.SetHeartbeatInterval(1)
	e.cfg.Cloud = "aws"
	e.start(t, agent.Options{Watcher: idleWatcher{}})
	beats := func() int {
		n := 0
		for _, r := range e.broker.Received() {
			if r.Path == "heartbeat" {
				n++
			}
		}
		return n
	}
	waitFor(t, "three heartbeats at the broker's 1 s interval", func() bool { return beats() >= 3 })
}

// idleWatcher never reports a notice.
type idleWatcher struct{}

func (idleWatcher) Watch(ctx context.Context) (<-chan notice.Notice, error) {
	ch := make(chan notice.Notice)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}
