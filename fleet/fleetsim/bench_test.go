package fleetsim

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/cputime"
	"github.com/gpubroker/gpubroker/pricing"
)

// benchCatalog is p3.2xlarge (V100) and p3.8xlarge in the nine zones of
// the aws-02-15-2023 traces, spot a third of on-demand.
func benchCatalog() *pricing.Catalog {
	var offers []pricing.Offer
	zones := []string{"us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-east-2b", "us-west-2a", "us-west-2b", "us-west-2c"}
	for i, z := range zones {
		o := p3(z, 0.92+0.01*float64(i))
		offers = append(offers, o)
		o8 := o
		o8.InstanceType, o8.GPUCount, o8.VCPUs, o8.MemoryGiB = "p3.8xlarge", 4, 32, 244
		o8.OnDemandPrice, o8.SpotPrice = 12.24, 4*o.SpotPrice
		offers = append(offers, o8)
	}
	return pricing.NewCatalog(offers, DefaultStart, "bench")
}

// benchPolicy is n workloads: seven in ten training jobs of 1–4 V100s,
// 10–200 GPU-hours, deadlines of twice to four times their work; the rest
// services of 1–3 replicas with a daily load.
func benchPolicy(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString("clouds: [aws]\nworkloads:\n")
	for i := 0; i < n; i++ {
		if rng.IntN(10) < 7 {
			gpus := 1 << rng.IntN(3)
			work := 10 + rng.IntN(190)
			hours := float64(work) / float64(gpus)
			fmt.Fprintf(&b, "  - name: job-%d\n    kind: training\n    gpu: {models: [V100], count: %d}\n    work: {gpu_hours: %d, reference_gpu: V100}\n    deadline: %dh\n    checkpoint_interval: 30m\n    restart_overhead: 5m\n    spot: prefer\n",
				i, gpus, work, int(hours*float64(2+rng.IntN(3)))+6)
			continue
		}
		lo := 1 + rng.IntN(2)
		fmt.Fprintf(&b, "  - name: svc-%d\n    kind: inference\n    gpu: {models: [V100], count: 1}\n    replicas: {min: %d, max: %d}\n    spot: prefer\n", i, lo, lo+2)
	}
	return b.String()
}

func benchFleet(b *testing.B, n int, days int) {
	traces, err := LoadTraceDir(sharedTraces(b, "availability/1-node/aws-02-15-2023"))
	if err != nil {
		b.Fatal(err)
	}
	pol := mustPolicy(b, benchPolicy(n, 1))
	// As `gpubroker simulate fleet` runs (GOGC in the environment wins).
	defer BatchGC()()
	if *benchMainCPU {
		// The simulation's own goroutine on one thread, so that its CPU
		// time (main-cpu-ms/op) is the run's critical path: about the wall
		// time on an idle machine whose other cores take the garbage
		// collector and the goroutines the simulation starts
		// (docs/BENCHMARKS.md). Off by default: handing the processor over
		// whenever that goroutine waits costs a little wall time.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	b.ResetTimer()
	cpu0, main0 := cputime.Process(), cputime.Thread()
	for i := 0; i < b.N; i++ {
		s, err := New(Config{Policy: pol, Catalog: benchCatalog(), Traces: traces, Seed: 1, SpotScale: n / 10, Duration: time.Duration(days) * 24 * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Total.Passes), "passes")
		b.ReportMetric(float64(rep.Total.Preemptions), "preemptions")
		b.ReportMetric(float64(rep.Total.DeadlineMisses), "misses")
		b.ReportMetric(rep.Total.Ratio, "cost/od")
		b.ReportMetric(100*rep.Total.TimeAtTarget, "%at-target")
		if *benchReport != "" {
			writeBenchReport(b, rep)
		}
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	if *benchMainCPU {
		b.ReportMetric(float64((cputime.Thread()-main0).Milliseconds())/float64(b.N), "main-cpu-ms/op")
	}
}

// BenchmarkFleet1000x30d is the target: 1,000 workloads × 30 days.
func BenchmarkFleet1000x30d(b *testing.B) { benchFleet(b, 1000, 30) }

// BenchmarkFleet100x30d is a tenth of it.
func BenchmarkFleet100x30d(b *testing.B) { benchFleet(b, 100, 30) }

var benchMainCPU = flag.Bool("bench-main-cpu", false, "lock the fleet benchmarks' goroutine to its thread and report that thread's CPU time (main-cpu-ms/op), the run's critical path")

var benchReport = flag.String("bench-report", "", "write each fleet benchmark's whole report as JSON to this file (to check that a speed change leaves every figure identical)")

// writeBenchReport writes rep as indented JSON to -bench-report.
func writeBenchReport(b *testing.B, rep *Report) {
	buf, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(*benchReport, buf, 0o644); err != nil {
		b.Fatal(err)
	}
}

var writeBenchPolicy = flag.String("write-bench-policy", "", "write the 1,000-workload benchmark policy to this file (for timing `gpubroker simulate fleet` itself)")

// TestWriteBenchPolicy writes benchPolicy(1000, 1) where -write-bench-policy
// says, so the CLI can be timed on the benchmark's fleet (docs/BENCHMARKS.md).
func TestWriteBenchPolicy(t *testing.T) {
	if *writeBenchPolicy == "" {
		t.Skip("no -write-bench-policy file given")
	}
	src := "regions: [\"us-*\"]\n" + benchPolicy(1000, 1)
	mustPolicy(t, src)
	if err := os.WriteFile(*writeBenchPolicy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkFleetSlice1000w2d is the first two days of the 1,000-workload
// fleet: a quick check of a speed change before the 30-day run.
func BenchmarkFleetSlice1000w2d(b *testing.B) { benchFleet(b, 1000, 2) }
