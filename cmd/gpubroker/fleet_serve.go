//go:build !agentonly

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// fleetSetup turns the fleet section of the broker config into the
// broker's FleetSetup. stop releases what it started (the fake cloud's
// metadata server and the user data it runs).
func fleetSetup(fc config.FleetConfig, log *slog.Logger) (setup *broker.FleetSetup, stop func(), err error) {
	stop = func() {}
	if !fc.Enabled {
		return nil, stop, nil
	}
	o := fleet.Options{Name: fc.Name, Mode: fleet.Mode(fc.Mode), MaxInstances: fc.MaxInstances, LaunchesPerMinute: fc.LaunchesPerMinute,
		OrphanGrace: fc.OrphanGrace, BootTimeout: fc.BootTimeout, HeartbeatTimeout: fc.HeartbeatTimeout, UnavailableBackoff: fc.UnavailableBackoff, BrokerURL: fc.BrokerURL,
		Commands: fc.Commands, MaxPerCloud: map[pricing.Cloud]int{}, UserData: map[pricing.Cloud]*template.Template{}}
	setup = &broker.FleetSetup{Options: o, Interval: fc.Interval, Computes: map[pricing.Cloud]providers.Compute{},
		Training:         fleet.TrainingConfig{Tick: fc.Training.Tick, MoveMargin: fc.Training.MoveMargin, PriceHalfLife: fc.Training.PriceHalfLife, Boot: fc.Training.Boot},
		ReplaceSlowHosts: fc.ReplaceSlowHosts}
	if fc.Hedge {
		setup.Hedge = &fleet.HedgeOptions{Tick: fc.HedgeTick, ReadyDelay: fc.ReadyDelay, MaxZones: fc.HedgeMaxZones}
	}
	names := make([]string, 0, len(fc.Clouds))
	for n := range fc.Clouds {
		names = append(names, n)
	}
	sort.Strings(names)
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for _, name := range names {
		c := fc.Clouds[name]
		if name != "fake" {
			cloud, comp, err := realCompute(context.Background(), name, c, log)
			if err != nil {
				stop()
				return nil, func() {}, err
			}
			if _, dup := setup.Computes[cloud]; dup {
				stop()
				return nil, func() {}, fmt.Errorf("fleet.clouds: %s is configured twice (a fake cloud pretends to be %s)", cloud, cloud)
			}
			setup.Computes[cloud] = comp
			if c.UserData != nil {
				setup.Options.UserData[cloud] = c.UserData
			}
			if c.MaxInstances > 0 {
				setup.Options.MaxPerCloud[cloud] = c.MaxInstances
			}
			continue
		}
		cloud := pricing.Cloud(c.FakeCloud)
		if cloud == "" {
			cloud = pricing.AWS
		}
		if _, dup := setup.Computes[cloud]; dup {
			stop()
			return nil, func() {}, fmt.Errorf("fleet.clouds: %s is configured twice (the fake pretends to be %s)", cloud, cloud)
		}
		comp, s, err := startFakeCloud(cloud, c, log)
		if err != nil {
			stop()
			return nil, func() {}, err
		}
		stops = append(stops, s)
		setup.Computes[cloud] = comp
		if c.UserData != nil {
			setup.Options.UserData[cloud] = c.UserData
		}
		if c.MaxInstances > 0 {
			setup.Options.MaxPerCloud[cloud] = c.MaxInstances
		}
	}
	return setup, stop, nil
}

// startFakeCloud runs the simulated cloud inside the broker process (test
// only, docs/fleet.md): offers from the embedded catalog, spot capacity
// from the traces, its metadata service (and console) on metadata_listen,
// and, with run_user_data, each instance's user data run as a local
// process once it is running and killed when it is gone.
func startFakeCloud(cloud pricing.Cloud, c config.FleetCloud, log *slog.Logger) (*fake.Compute, func(), error) {
	snap, err := pricing.EmbeddedCatalog()
	if err != nil {
		return nil, nil, err
	}
	offers := snap.Query(pricing.Query{Clouds: []pricing.Cloud{cloud}})
	var traces []fake.Trace
	if c.Traces != "" {
		files, _ := filepath.Glob(filepath.Join(c.Traces, "*.json"))
		if len(files) == 0 {
			return nil, nil, fmt.Errorf("fleet.clouds.fake.traces: no *.json traces in %s", c.Traces)
		}
		for _, f := range files {
			t, err := sim.LoadTrace(f)
			if err != nil {
				return nil, nil, fmt.Errorf("fleet.clouds.fake.traces: %w", err)
			}
			traces = append(traces, fake.Trace{Name: t.Name, Gap: time.Duration(t.Gap) * time.Second, Avail: t.Avail})
		}
	}
	comp := fake.NewCompute(fake.ComputeConfig{Cloud: cloud, Offers: offers, Traces: traces, Seed: c.Seed, SpotScale: c.SpotScale,
		TimeScale: float64(c.TimeScale), LaunchLatency: c.LaunchLatency, NoticeLead: c.NoticeLead})
	md := fake.NewMetadata(comp)
	comp.OnNotice(md.Deliver)
	listen := c.MetadataListen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet.clouds.fake.metadata_listen: %w", err)
	}
	srv := &http.Server{Handler: md, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	log.Warn("fleet: using the simulated test cloud; nothing real is launched", "pretends", cloud, "metadata", base, "traces", len(traces))
	run := &userDataRunner{base: base, log: log, procs: map[string]*exec.Cmd{}}
	if c.RunUserData {
		comp.SetLifecycle(fake.Lifecycle{OnRunning: run.start, OnGone: run.stop})
	}
	// A ticker drives the simulation between API calls, so notices reach
	// the metadata service on time.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				comp.Sync()
			}
		}
	}()
	stop := func() {
		cancel()
		run.stopAll()
		sctx, c2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer c2()
		_ = srv.Shutdown(sctx)
	}
	return comp, stop, nil
}

// userDataRunner runs fake instances' user data as local processes.
type userDataRunner struct {
	base string
	log  *slog.Logger
	mu   sync.Mutex
	dir  string
	// procs by instance id
	procs map[string]*exec.Cmd
}

func (u *userDataRunner) start(in providers.Instance, userData string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dir == "" {
		d, err := os.MkdirTemp("", "gpubroker-fake-instances-")
		if err != nil {
			u.log.Error("fake cloud: cannot run user data", "err", err)
			return
		}
		u.dir = d
	}
	dir := filepath.Join(u.dir, in.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		u.log.Error("fake cloud: cannot run user data", "err", err)
		return
	}
	script := filepath.Join(dir, "user-data")
	if err := os.WriteFile(script, []byte(userData), 0o700); err != nil {
		u.log.Error("fake cloud: cannot run user data", "err", err)
		return
	}
	logf, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		return
	}
	cmd := exec.Command("/bin/sh", script)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GPUBROKER_FAKE_INSTANCE_ID="+in.ID, "GPUBROKER_FAKE_METADATA_URL="+u.base+"/"+in.ID,
		"GPUBROKER_FAKE_INSTANCE_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		u.log.Error("fake cloud: user data did not start", "instance", in.ID, "err", err)
		_ = logf.Close()
		return
	}
	u.procs[in.ID] = cmd
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
	}()
}

func (u *userDataRunner) stop(in providers.Instance) {
	u.mu.Lock()
	cmd := u.procs[in.ID]
	delete(u.procs, in.ID)
	u.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		// The instance is gone: its whole process group goes with it.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			u.log.Warn("fake cloud: killing an instance's processes", "instance", in.ID, "err", err)
		}
	}
}

func (u *userDataRunner) stopAll() {
	u.mu.Lock()
	ids := make([]string, 0, len(u.procs))
	for id := range u.procs {
		ids = append(ids, id)
	}
	u.mu.Unlock()
	for _, id := range ids {
		u.stop(providers.Instance{InstanceRef: providers.InstanceRef{ID: id}})
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dir != "" {
		_ = os.RemoveAll(u.dir)
	}
}
