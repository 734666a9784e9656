// Package agent is the in-VM daemon: it watches the cloud's metadata
// service for preemption and maintenance notices, drains the workload before
// the VM is taken, reports notices and drain results to the broker (spooling
// them while the broker is unreachable), and sends heartbeats with GPU
// telemetry and GPU benchmark results.
//
//	metadata ──► notice/{aws,gcp,azure} ──► Agent ──► drain.Runner ──► workload
//	                                          │
//	NVML ──► gpu (telemetry, benchmark) ──────┴──► broker.Reporter ──► broker (or spool)
//
// Draining never waits on the broker.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/agent/config"
	"github.com/gpubroker/gpubroker/agent/drain"
	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/aws"
	"github.com/gpubroker/gpubroker/agent/notice/azure"
	"github.com/gpubroker/gpubroker/agent/notice/gcp"
	"github.com/gpubroker/gpubroker/apiv1"
)

// Defaults for zero config values.
const (
	DefaultHeartbeat    = 30 * time.Second
	DefaultSafetyMargin = 5 * time.Second
	DefaultStateDir     = "/var/lib/gpubroker-agent"
)

// Options wire an agent. Config carries the user's settings; the other
// fields are seams for tests and measurements (nil = the real thing).
type Options struct {
	Config  config.Config
	Logger  *slog.Logger
	Now     func() time.Time
	Version string

	// MetadataClient and BrokerClient send HTTP requests (defaults: 2s
	// and 10s timeouts; GCP's hanging GETs use a client without one).
	MetadataClient *http.Client
	BrokerClient   *http.Client
	// Watcher replaces the cloud's watcher.
	Watcher notice.Watcher
	// GPU replaces NVML; OpenGPU is called when GPU is nil (default
	// gpu.OpenSystem).
	GPU     gpu.Collector
	OpenGPU func() (gpu.Collector, error)
	// Bench replaces the benchmark runner chosen from Config.Benchmark.
	Bench gpu.Runner
	// BenchmarkNow triggers a benchmark on demand (the CLI wires SIGUSR1).
	BenchmarkNow <-chan struct{}
	// OnDrainStep is called as each drain step starts.
	OnDrainStep func(n notice.Notice, step int, name string, at time.Time)
	// DMIDir overrides /sys/class/dmi/id for cloud detection.
	DMIDir string
}

// Agent is a running agent. Create with New, then Run.
type Agent struct {
	o        Options
	log      *slog.Logger
	cloud    string
	watcher  notice.Watcher
	reporter *broker.Reporter
	spool    *broker.Spool
	// azureClient has a longer timeout (see New).
	azureClient *http.Client

	// identified is closed once the cloud and the instance's identity are
	// known (or could not be), so the first registration carries them.
	identified chan struct{}

	mu        sync.Mutex
	draining  bool // a full drain has started: the VM is going
	earlyStop context.CancelFunc
	benchStop context.CancelFunc
	wg        sync.WaitGroup
}

// New checks the configuration and builds the parts that need no network.
func New(o Options) (*Agent, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	azureClient := o.MetadataClient
	if o.MetadataClient == nil {
		o.MetadataClient = &http.Client{Timeout: 2 * time.Second}
		// Azure's first Scheduled Events call enables the service and may
		// take a while to answer.
		azureClient = &http.Client{Timeout: 10 * time.Second}
	}
	c := &o.Config
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeat
	}
	if c.SafetyMargin <= 0 {
		c.SafetyMargin = DefaultSafetyMargin
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.Cloud == "" {
		c.Cloud = "auto"
	}
	if !slices.Contains(config.Clouds, c.Cloud) {
		return nil, fmt.Errorf("cloud %q: want one of auto, aws, gcp, azure", c.Cloud)
	}
	for _, list := range [][]config.Step{c.Drain, c.EarlyDrain.Steps} {
		if _, err := Steps(list); err != nil {
			return nil, err
		}
	}
	a := &Agent{o: o, log: o.Logger, azureClient: azureClient, identified: make(chan struct{})}
	if len(c.Drain) == 0 {
		a.log.Warn("no drain steps configured: notices are reported but the workload is not told")
	}
	if c.Broker != "" {
		if c.TokenFile == "" {
			return nil, errors.New("a broker is set but no token file: set --token-file")
		}
		sp, err := broker.NewSpool(filepath.Join(c.StateDir, "spool"), 256)
		if err != nil {
			a.log.Warn("spool directory unusable; keeping undelivered reports in memory", "err", err)
			sp, _ = broker.NewSpool("", 256)
		}
		spoolLog := a.log.With("part", "spool")
		sp.OnFallback = func(err error) {
			spoolLog.Warn("spool directory cannot take a report; keeping it in memory until delivered (lost if the agent stops first)", "err", err)
		}
		host, _ := os.Hostname()
		client := &broker.Client{BaseURL: c.Broker, HTTP: o.BrokerClient, TokenFile: c.TokenFile,
			StateFile: filepath.Join(c.StateDir, "agent.json"),
			Register:  apiv1.RegisterRequest{Hostname: host, AgentVersion: o.Version}}
		a.spool = sp
		a.reporter = &broker.Reporter{Client: client, Spool: sp, Logger: a.log.With("part", "broker")}
	} else {
		a.log.Warn("no broker configured: notices and drains are only logged")
	}
	return a, nil
}

// Steps converts configured steps into drain steps.
func Steps(list []config.Step) ([]drain.Step, error) {
	var out []drain.Step
	for i, s := range list {
		switch s.Kind {
		case "signal":
			sig, err := drain.ParseSignal(s.Signal)
			if err != nil {
				return nil, fmt.Errorf("drain step %d: %w", i+1, err)
			}
			if s.PIDFile == "" {
				return nil, fmt.Errorf("drain step %d: signal step without a PID file", i+1)
			}
			out = append(out, &drain.Signal{Signal: sig, PIDFile: s.PIDFile, Limit: s.Timeout, KillOnTimeout: s.KillOnTimeout})
		case "exec":
			out = append(out, &drain.Exec{Command: s.Command, Limit: s.Timeout})
		case "http":
			out = append(out, &drain.HTTP{URL: s.URL, Limit: s.Timeout})
		default:
			return nil, fmt.Errorf("drain step %d: unknown kind %q (want signal, exec or http)", i+1, s.Kind)
		}
	}
	return out, nil
}

// Run runs the agent until ctx is done. It returns nil on a clean stop.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reporter outlives the rest: a drain still running when the agent
	// is stopped (the VM shutting down) must get its result out.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	var rwg sync.WaitGroup
	coll := a.openGPU()
	if coll != nil {
		defer coll.Close()
		if a.reporter != nil {
			if stats, err := coll.Collect(); err == nil {
				a.reporter.Client.SetRegistration(func(r *apiv1.RegisterRequest) { r.GPUs = APIStats(stats) })
			}
		}
	}
	if a.reporter != nil {
		rwg.Go(func() {
			// Reports wait for the identity so that the registration
			// they trigger is complete; Enqueue never blocks meanwhile.
			select {
			case <-a.identified:
			case <-ctx.Done():
			}
			a.reporter.Run(rctx)
		})
	}
	defer func() { rcancel(); rwg.Wait() }()
	benchReq := make(chan struct{}, 1)
	a.wg.Go(func() { a.heartbeats(ctx, coll, benchReq) })
	a.wg.Go(func() { a.benchmarks(ctx, coll, benchReq) })
	a.wg.Go(func() { a.notices(ctx) })
	a.wg.Go(func() { a.progress(ctx) })
	<-ctx.Done()
	a.wg.Wait()
	return nil
}

func (a *Agent) openGPU() gpu.Collector {
	if a.o.GPU != nil {
		return a.o.GPU
	}
	open := a.o.OpenGPU
	if open == nil {
		open = gpu.OpenSystem
	}
	c, err := open()
	if err != nil {
		// Said once: notices and drains still matter without a GPU.
		a.log.Info("no GPU telemetry; continuing without it", "err", err)
		return nil
	}
	return c
}

// watcher resolves the cloud (detecting it, with retries) and builds its
// watcher.
func (a *Agent) resolveWatcher(ctx context.Context) (notice.Watcher, string, bool) {
	if a.o.Watcher != nil {
		return a.o.Watcher, a.o.Config.Cloud, true
	}
	c := a.o.Config
	cloud := c.Cloud
	bo := notice.Backoff{Min: time.Second, Max: time.Minute}
	for cloud == "auto" {
		got, err := Detect(ctx, DetectOptions{MetadataURL: c.MetadataURL, DMIDir: a.o.DMIDir, Client: a.o.MetadataClient})
		if err == nil {
			cloud = got
			a.log.Info("cloud detected", "cloud", cloud)
			break
		}
		a.log.Warn("cloud detection failed; retrying", "err", err)
		if !notice.Sleep(ctx, bo.Next()) {
			return nil, "", false
		}
	}
	log := a.log.With("part", "watcher")
	switch cloud {
	case notice.AWS:
		return aws.New(aws.Options{Endpoint: c.MetadataURL, Client: a.o.MetadataClient, Interval: c.PollInterval, Now: a.o.Now, Logger: log}), cloud, true
	case notice.GCP:
		return gcp.New(gcp.Options{Endpoint: c.MetadataURL, Now: a.o.Now, Logger: log}), cloud, true
	default:
		return azure.New(azure.Options{Endpoint: c.MetadataURL, Client: a.azureClient, Interval: c.PollInterval,
			VMName: c.VMName, Now: a.o.Now, Logger: log}), cloud, true
	}
}

func (a *Agent) notices(ctx context.Context) {
	w, cloud, ok := a.resolveWatcher(ctx)
	if !ok {
		close(a.identified)
		return
	}
	a.mu.Lock()
	a.watcher, a.cloud = w, cloud
	a.mu.Unlock()
	a.identify(ctx, cloud)
	close(a.identified)
	ch, err := w.Watch(ctx)
	if err != nil {
		a.log.Error("cannot watch for notices", "err", err)
		return
	}
	a.log.Info("watching for preemption and maintenance notices", "cloud", cloud)
	for n := range ch {
		a.handle(ctx, n)
	}
}

// identify reads the instance's identity from the metadata service for
// the registration. A failure is logged and the agent registers with what
// it knows (the host name stands in for the instance id).
func (a *Agent) identify(ctx context.Context, cloud string) {
	if a.reporter == nil {
		return
	}
	var id Identity
	if a.o.Watcher == nil || a.o.Config.MetadataURL != "" {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var err error
		id, err = Identify(ictx, cloud, a.o.Config.MetadataURL, a.o.MetadataClient)
		cancel()
		if err != nil {
			a.log.Warn("instance identity unavailable; registering without region, zone and instance type", "err", err)
		} else {
			a.log.Info("instance identity", "instance", id.InstanceID, "region", id.Region, "zone", id.Zone,
				"type", id.InstanceType, "capacity", id.Capacity)
		}
	}
	a.reporter.Client.SetRegistration(func(r *apiv1.RegisterRequest) {
		r.Cloud = cloud
		if id.InstanceID != "" {
			r.InstanceID = id.InstanceID
		}
		r.Region, r.Zone, r.InstanceType, r.Capacity = id.Region, id.Zone, id.InstanceType, id.Capacity
		r.Identity = id.Signed
	})
}

// handle reacts to one notice: report it, and drain (fully for terminal
// kinds, gently for configured warnings).
func (a *Agent) handle(ctx context.Context, n notice.Notice) {
	a.log.Warn("notice", "kind", n.Kind, "id", n.ID, "deadline", n.Deadline, "detail", n.Detail)
	full := n.Kind.Terminal()
	early := !full && slices.Contains(a.o.Config.EarlyDrain.On, string(n.Kind)) && len(a.o.Config.EarlyDrain.Steps) > 0
	a.mu.Lock()
	already := a.draining
	busy := early && a.earlyStop != nil // one gentle drain at a time
	if full && !already {
		a.draining = true
		if a.earlyStop != nil {
			a.earlyStop() // the real thing supersedes a gentle drain
		}
		if a.benchStop != nil {
			a.benchStop() // free the GPU for the workload's checkpoint
		}
	}
	var dctx context.Context
	var dcancel context.CancelFunc
	if early && !already && !busy {
		dctx, dcancel = context.WithCancel(ctx)
		a.earlyStop = dcancel
	}
	a.mu.Unlock()

	act := action(full, early, already)
	if busy && !already {
		act = "none: early drain already running"
	}
	// Queued before the drain starts, so the broker hears of the notice
	// before the drain result (Enqueue does not block).
	a.report(broker.KindNotice, n.ID, NoticeReport(n, act))
	switch {
	case full && !already:
		a.wg.Go(func() { a.drain(context.WithoutCancel(ctx), n, a.o.Config.Drain, false) })
	case early && !already && !busy:
		a.wg.Go(func() {
			a.drain(dctx, n, a.o.Config.EarlyDrain.Steps, true)
			a.mu.Lock()
			a.earlyStop = nil
			a.mu.Unlock()
			dcancel()
		})
	}
}

func action(full, early, already bool) string {
	switch {
	case already:
		return "none: already draining"
	case full:
		return "drain"
	case early:
		return "early_drain"
	}
	return "none"
}

// NoticeReport is the apiv1 message for notice n and what the agent does
// about it.
func NoticeReport(n notice.Notice, action string) apiv1.NoticeReport {
	return apiv1.NoticeReport{Kind: string(n.Kind), ID: n.ID, Cloud: n.Cloud, Deadline: n.Deadline,
		Observed: n.Observed, Detail: n.Detail, Raw: n.Raw, Action: action}
}

// DrainReport is the apiv1 message for a drain's result; runErr is the
// runner's own error (e.g. no steps configured).
func DrainReport(res drain.Result, runErr error, acked bool) apiv1.DrainReport {
	out := apiv1.DrainReport{Info: apiv1.DrainInfo{NoticeID: res.Info.NoticeID, Kind: res.Info.Kind, Cloud: res.Info.Cloud,
		Deadline: res.Info.Deadline, Early: res.Info.Early}, Started: res.Started, Finished: res.Finished,
		Deadline: res.Deadline, Steps: []apiv1.DrainStep{}, OK: runErr == nil && res.OK(), Acked: acked}
	for _, st := range res.Steps {
		out.Steps = append(out.Steps, apiv1.DrainStep{Name: st.Name, Status: string(st.Status), Error: st.Error,
			Started: st.Started, DurationNS: int64(st.Duration)})
	}
	if runErr != nil {
		out.Error = runErr.Error()
	}
	return out
}

// drain runs steps for n; a full drain is not cancelled by the agent
// stopping (systemd may stop it as the VM shuts down: the drain is the point).
func (a *Agent) drain(ctx context.Context, n notice.Notice, list []config.Step, early bool) {
	steps, _ := Steps(list) // checked in New
	deadline := DrainDeadline(n.Deadline, a.o.Config.SafetyMargin, a.o.Now())
	r := &drain.Runner{Steps: steps, Now: a.o.Now}
	if a.o.OnDrainStep != nil {
		r.OnStepStart = func(i int, name string, at time.Time) { a.o.OnDrainStep(n, i, name, at) }
	}
	info := drain.Info{NoticeID: n.ID, Kind: string(n.Kind), Cloud: n.Cloud, Deadline: n.Deadline, Early: early}
	res, runErr := r.Run(ctx, info, deadline)
	acked := false
	for _, s := range res.Steps {
		a.log.Info("drain step", "step", s.Name, "status", s.Status, "took", s.Duration, "err", s.Error)
	}
	// Azure waits for approval. Approve only a drain that completed: the
	// platform may then act at once instead of at NotBefore. A failed or
	// unconfigured drain is not approved, so the workload keeps every
	// second until NotBefore.
	a.mu.Lock()
	acker, _ := a.watcher.(notice.Acker)
	a.mu.Unlock()
	if acker != nil && ctx.Err() == nil {
		if runErr == nil && res.OK() {
			acked = a.ack(ctx, acker, n)
		} else {
			a.log.Warn("drain did not complete; not acknowledging the event, the platform acts at its NotBefore", "id", n.ID, "not_before", n.Deadline)
		}
	}
	rep := DrainReport(res, runErr, acked)
	a.log.Warn("drain finished", "id", n.ID, "early", early, "ok", rep.OK, "took", res.Finished.Sub(res.Started))
	a.report(broker.KindDrain, n.ID, rep)
}

// ack approves n, retrying with back-off until it succeeds, the event's
// deadline passes (the platform acts then anyway) or ctx ends.
func (a *Agent) ack(ctx context.Context, acker notice.Acker, n notice.Notice) bool {
	bo := notice.Backoff{Min: 500 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := acker.Ack(actx, n)
		cancel()
		if err == nil {
			if attempt > 1 {
				a.log.Info("event acknowledged", "id", n.ID, "attempts", attempt)
			}
			return true
		}
		wait := bo.Next()
		if attempt >= 20 || (!n.Deadline.IsZero() && a.o.Now().Add(wait).After(n.Deadline)) {
			a.log.Warn("acknowledging event failed; giving up, the platform acts at its NotBefore", "id", n.ID, "attempts", attempt, "err", err)
			return false
		}
		a.log.Warn("acknowledging event failed; retrying", "id", n.ID, "attempt", attempt, "err", err)
		if !notice.Sleep(ctx, wait) {
			return false
		}
	}
}

// MinDrainTime is the least time a drain is given, even when the notice's
// deadline is (nearly) past: a late notice (an Azure event already
// Started, a clock off by a few seconds) must still tell the workload.
const MinDrainTime = 5 * time.Second

// DrainDeadline is the overall drain deadline for a notice deadline: the
// deadline minus the safety margin, but never sooner than MinDrainTime from
// now. Zero (no deadline) stays zero.
func DrainDeadline(noticeDeadline time.Time, margin time.Duration, now time.Time) time.Time {
	if noticeDeadline.IsZero() {
		return time.Time{}
	}
	d := noticeDeadline.Add(-margin)
	if floor := now.Add(MinDrainTime); d.Before(floor) {
		d = floor
	}
	return d
}

func (a *Agent) report(kind, id string, body any) {
	if a.reporter == nil {
		return
	}
	r, err := broker.NewReport(kind, id, body)
	if err != nil {
		a.log.Error("cannot encode report", "err", err)
		return
	}
	a.reporter.Enqueue(r)
}

func (a *Agent) isDraining() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}
