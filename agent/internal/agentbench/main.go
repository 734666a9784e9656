// Command agentbench measures the agent against local fake metadata servers
// and a fake broker (all on 127.0.0.1):
//
//	agentbench latency   [-runs N] [-parallel P] [-cloud aws,gcp,azure]
//	    time from a notice appearing on the metadata server to the first
//	    drain step starting, p50/p90/p99/max per cloud, default intervals.
//	agentbench footprint -bin PATH [-duration 60s] [-cloud aws,gcp,azure] [-poll D]
//	    runs the built gpubroker binary as `gpubroker agent` and reads its
//	    resident memory and CPU time from /proc.
//
// Results are recorded in docs/BENCHMARKS.md ("## Agent").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/config"
	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/agent/internal/fakebroker"
	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/agent/notice"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agentbench latency|footprint [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "latency":
		err = latency(os.Args[2:])
	case "footprint":
		err = footprint(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want latency or footprint)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

// fake is one cloud's metadata server with a way to raise a notice.
type fake struct {
	handler http.Handler
	raise   func()
}

func newFake(cloud string) fake {
	switch cloud {
	case notice.AWS:
		f := fakecloud.NewAWS()
		return fake{f, func() {
			f.SetInstanceAction(`{"action":"terminate","time":"` + time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339) + `"}`)
		}}
	case notice.GCP:
		f := fakecloud.NewGCP()
		return fake{f, func() { f.Set("instance/preempted", "TRUE") }}
	default:
		f := fakecloud.NewAzure("vm0")
		return fake{f, func() { f.AddEvent("ev", "Preempt", []string{"vm0"}, time.Now().Add(30*time.Second)) }}
	}
}

func latency(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	runs := fs.Int("runs", 200, "runs per cloud")
	parallel := fs.Int("parallel", 8, "agents running at once")
	clouds := fs.String("cloud", "aws,gcp,azure", "clouds to measure")
	_ = fs.Parse(args)
	fb := fakebroker.New("boot")
	bs := httptest.NewServer(fb)
	defer bs.Close()
	dir, err := os.MkdirTemp("", "agentbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tf := filepath.Join(dir, "token")
	_ = os.WriteFile(tf, []byte("boot"), 0o600)
	fmt.Printf("| cloud | runs | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, cloud := range strings.Split(*clouds, ",") {
		lat := make([]time.Duration, *runs)
		sem := make(chan struct{}, *parallel)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for i := range *runs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				d, err := oneRun(cloud, bs.URL, tf, filepath.Join(dir, strconv.Itoa(i)))
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat[i] = d
			})
		}
		wg.Wait()
		if firstErr != nil {
			return fmt.Errorf("%s: %w", cloud, firstErr)
		}
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		fmt.Printf("| %s | %d | %v | %v | %v | %v |\n", cloud, *runs, r(q(0.5)), r(q(0.9)), r(q(0.99)), r(lat[len(lat)-1]))
	}
	return nil
}

func r(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// oneRun starts an agent with default intervals, raises a notice at a
// random moment and returns the time until the first drain step starts.
func oneRun(cloud, brokerURL, tokenFile, stateDir string) (time.Duration, error) {
	f := newFake(cloud)
	ms := httptest.NewServer(f.handler)
	defer ms.Close()
	started := make(chan time.Time, 1)
	cfg := config.Config{Cloud: cloud, MetadataURL: ms.URL, Broker: brokerURL, TokenFile: tokenFile, StateDir: stateDir,
		Drain: []config.Step{{Kind: "exec", Command: "true", Timeout: 5 * time.Second}}, Benchmark: config.Benchmark{Method: "off"}}
	a, err := agent.New(agent.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OpenGPU: func() (gpu.Collector, error) { return nil, gpu.ErrNoNVML },
		OnDrainStep: func(_ notice.Notice, step int, _ string, at time.Time) {
			if step == 0 {
				started <- at
			}
		}})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Warm up (token, first reads), then raise the notice at a random
	// phase of the poll cycle.
	time.Sleep(300*time.Millisecond + rand.N(1500*time.Millisecond))
	t0 := time.Now()
	f.raise()
	select {
	case at := <-started:
		return at.Sub(t0), nil
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no drain within 10s")
	}
}

func footprint(args []string) error {
	fs := flag.NewFlagSet("footprint", flag.ExitOnError)
	bin := fs.String("bin", "", "gpubroker binary (go build -o /tmp/gpubroker ./cmd/gpubroker)")
	dur := fs.Duration("duration", 60*time.Second, "idle time measured, after a 5s warm-up")
	clouds := fs.String("cloud", "aws,gcp,azure", "clouds")
	poll := fs.Duration("poll", 0, "--poll-interval for the agent (0 = its default)")
	_ = fs.Parse(args)
	if *bin == "" {
		return fmt.Errorf("-bin is required")
	}
	hz := 100.0 // USER_HZ on Linux
	fmt.Printf("| cloud | idle CPU (%% of one core) | VmRSS | VmHWM | metadata requests/s | new connections |\n|---|---|---|---|---|---|\n")
	for _, cloud := range strings.Split(*clouds, ",") {
		f := newFake(cloud)
		var reqs, conns counter
		ms := httptest.NewUnstartedServer(countRequests(f.handler, &reqs))
		ms.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.mu.Lock()
				conns.n++
				conns.mu.Unlock()
			}
		}
		ms.Start()
		fb := fakebroker.New("boot")
		bs := httptest.NewServer(fb)
		dir, err := os.MkdirTemp("", "agentfoot")
		if err != nil {
			return err
		}
		tf := filepath.Join(dir, "token")
		_ = os.WriteFile(tf, []byte("boot"), 0o600)
		argv := []string{"agent", "--cloud", cloud, "--metadata-url", ms.URL, "--broker", bs.URL,
			"--token-file", tf, "--state-dir", dir, "--drain-exec", "true"}
		if *poll > 0 {
			argv = append(argv, "--poll-interval", poll.String())
		}
		cmd := exec.Command(*bin, argv...)
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		t0, n0, c0 := cpuTicks(cmd.Process.Pid), reqs.get(), conns.get()
		time.Sleep(*dur)
		t1, n1, c1 := cpuTicks(cmd.Process.Pid), reqs.get(), conns.get()
		rss, hwm := memStatus(cmd.Process.Pid)
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		ms.Close()
		bs.Close()
		os.RemoveAll(dir)
		cpu := (t1 - t0) / hz / dur.Seconds() * 100
		fmt.Printf("| %s | %.3f%% | %s | %s | %.1f | %d |\n", cloud, cpu, rss, hwm, float64(n1-n0)/dur.Seconds(), c1-c0)
	}
	return nil
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) get() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func countRequests(h http.Handler, c *counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// cpuTicks returns utime+stime of pid in clock ticks.
func cpuTicks(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	// After the command name: state is field 3; utime and stime are 14, 15.
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return u + s
}

func memStatus(pid int) (rss, hwm string) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return rss, hwm
}
