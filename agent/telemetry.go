package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/agent/config"
	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/apiv1"
)

// heartbeats sends telemetry every HeartbeatInterval, the first at once.
// Heartbeats are not spooled: stale telemetry is worthless.
func (a *Agent) heartbeats(ctx context.Context, coll gpu.Collector, benchReq chan<- struct{}) {
	if a.reporter == nil {
		return
	}
	select {
	case <-a.identified:
	case <-ctx.Done():
		return
	}
	interval := a.o.Config.HeartbeatInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		hb := apiv1.Heartbeat{Time: a.o.Now(), Draining: a.isDraining(), SpoolDepth: a.spool.Len()}
		a.mu.Lock()
		hb.Cloud = a.cloud
		a.mu.Unlock()
		if coll == nil {
			hb.GPUError = "no GPU telemetry (NVML unavailable)"
		} else if stats, err := coll.Collect(); err != nil {
			hb.GPUError = err.Error()
		} else {
			hb.GPUs = APIStats(stats)
		}
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := a.reporter.Client.Heartbeat(hctx, hb)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				a.log.Warn("heartbeat failed", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				a.log.Info("heartbeats delivered again")
			}
			failing = false
			// The broker decides the cadence: it sizes its staleness
			// checks and its write load by the interval it returns.
			if bi := min(time.Duration(resp.HeartbeatIntervalSeconds)*time.Second, 10*time.Minute); bi >= time.Second && bi != interval {
				a.log.Info("heartbeat interval set by the broker", "interval", bi, "was", interval)
				interval = bi
				t.Reset(interval)
			}
			if resp.BenchmarkRequested {
				select {
				case benchReq <- struct{}{}:
				default:
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// benchmarks runs the benchmark at start-up (unless disabled) and whenever
// asked, never during a drain.
func (a *Agent) benchmarks(ctx context.Context, coll gpu.Collector, benchReq <-chan struct{}) {
	runner := a.benchRunner(coll)
	if runner == nil {
		return
	}
	b := a.o.Config.Benchmark
	if b.OnStart == nil || *b.OnStart {
		a.runBenchmark(ctx, runner, coll)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-benchReq:
		case <-a.o.BenchmarkNow:
		}
		a.runBenchmark(ctx, runner, coll)
	}
}

func (a *Agent) benchRunner(coll gpu.Collector) gpu.Runner {
	if a.o.Bench != nil {
		return a.o.Bench
	}
	r := BenchRunner(a.o.Config.Benchmark, coll != nil)
	if r == nil && a.o.Config.Benchmark.Method != "off" {
		a.log.Info("GPU benchmark disabled: no GPU")
	}
	return r
}

// BenchRunner chooses the benchmark runner for b: nil when it is off, or
// when the method is auto, no command is set and there is no GPU.
func BenchRunner(b config.Benchmark, haveGPU bool) gpu.Runner {
	switch {
	case b.Method == "off":
		return nil
	case b.Method == "command" || (b.Method != "cuda" && b.Command != ""):
		return &gpu.Command{Command: b.Command, Timeout: b.Timeout}
	case b.Method != "cuda" && !haveGPU:
		return nil
	}
	return &gpu.CUDA{LibDirs: b.CUDALibDirs, DType: b.DType}
}

// BenchmarkOnce runs the configured benchmark once (the CLI's
// "agent benchmark"), with telemetry from coll (may be nil) naming the GPUs.
func BenchmarkOnce(ctx context.Context, b config.Benchmark, coll gpu.Collector, now func() time.Time) (gpu.Result, error) {
	if b.Method == "off" {
		return gpu.Result{}, errors.New("benchmark method is off")
	}
	if (b.Method == "" || b.Method == "auto") && b.Command == "" {
		b.Method = "cuda" // asked for explicitly: try even without NVML
	}
	r := BenchRunner(b, true)
	mem := memoryAndNames(coll, r)
	return gpu.Run(ctx, r, mem, b.Threshold, now)
}

// memoryAndNames reads GPU memory sizes (to tell memory variants apart) and
// gives the CUDA runner the device names.
func memoryAndNames(coll gpu.Collector, r gpu.Runner) map[int]uint64 {
	mem := map[int]uint64{}
	if coll == nil {
		return mem
	}
	stats, err := coll.Collect()
	if err != nil {
		return mem
	}
	names := map[int]string{}
	for _, s := range stats {
		mem[s.Index], names[s.Index] = s.MemoryTotalMiB, s.Name
	}
	if c, ok := r.(*gpu.CUDA); ok && c.Names == nil {
		c.Names = names
	}
	return mem
}

func (a *Agent) runBenchmark(ctx context.Context, r gpu.Runner, coll gpu.Collector) {
	a.mu.Lock()
	if a.draining {
		a.mu.Unlock()
		return
	}
	bctx, cancel := context.WithCancel(ctx)
	a.benchStop = cancel
	a.mu.Unlock()
	defer cancel()
	mem := memoryAndNames(coll, r)
	a.log.Info("GPU benchmark starting", "method", r.Method())
	res, err := gpu.Run(bctx, r, mem, a.o.Config.Benchmark.Threshold, a.o.Now)
	if err != nil {
		if errors.Is(err, gpu.ErrCUDANotFound) {
			a.log.Info("GPU benchmark unavailable", "err", err)
		} else {
			a.log.Warn("GPU benchmark failed", "err", err)
		}
		return
	}
	for _, g := range res.GPUs {
		a.log.Info("GPU benchmark", "gpu", g.Index, "model", g.Model, "tflops", g.TFLOPS, "tflops_ratio", g.TFLOPSRatio,
			"bandwidth_gbs", g.BandwidthGBs, "bandwidth_ratio", g.BandwidthRatio, "below_spec", g.BelowSpec)
	}
	a.report(broker.KindBenchmark, fmt.Sprintf("benchmark/%d", res.Time.UnixNano()), BenchmarkReport(res))
}

// APIStats converts NVML telemetry into the apiv1 message.
func APIStats(stats []gpu.Stat) []apiv1.GPUStat {
	out := make([]apiv1.GPUStat, 0, len(stats))
	for _, s := range stats {
		out = append(out, apiv1.GPUStat{Index: s.Index, UUID: s.UUID, Name: s.Name, Model: string(s.Model),
			MemoryTotalMiB: s.MemoryTotalMiB, MemoryUsedMiB: s.MemoryUsedMiB, UtilGPUPct: s.UtilGPUPct,
			UtilMemPct: s.UtilMemPct, TempC: s.TempC, PowerW: s.PowerW, PowerLimitW: s.PowerLimitW,
			SMClockMHz: s.SMClockMHz, MemClockMHz: s.MemClockMHz, ECCVolatileUncorrected: s.ECCVolatileUncorrected,
			ECCAggregateUncorrected: s.ECCAggregateUncorrected})
	}
	return out
}

// BenchmarkReport converts a benchmark result into the apiv1 message.
func BenchmarkReport(r gpu.Result) apiv1.BenchmarkReport {
	out := apiv1.BenchmarkReport{Time: r.Time, Method: r.Method, DurationS: r.Duration, BelowSpecThreshold: r.Threshold,
		GPUs: make([]apiv1.BenchmarkGPU, 0, len(r.GPUs))}
	for _, g := range r.GPUs {
		out.GPUs = append(out.GPUs, apiv1.BenchmarkGPU{Index: g.Index, Name: g.Name, Model: string(g.Model), DType: g.DType,
			TFLOPS: g.TFLOPS, BandwidthGBs: g.BandwidthGBs, MatrixN: g.MatrixN, Iterations: g.Iterations, Extra: g.Extra,
			SpecTFLOPS: g.SpecTFLOPS, SpecBandwidthGBs: g.SpecBandwidthGBs, TFLOPSRatio: g.TFLOPSRatio,
			BandwidthRatio: g.BandwidthRatio, BelowSpec: g.BelowSpec})
	}
	return out
}
