package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// Measured speeds: the agents' benchmark results, per cloud and instance
// type, become the speed table the optimizer plans with. A median over
// recent runs resists one bad host; a minimum number of runs keeps a single
// result from overriding the spec sheet.
const (
	speedWindow  = 30 * 24 * time.Hour
	speedMinRuns = 3
	// slowHostRatio flags a benchmark below this share of its instance
	// type's median: a throttled or faulty host worth replacing.
	slowHostRatio = 0.7
)

// MeasuredSpeeds builds the speed table from the stored benchmarks of the
// last 30 days: the spec sheet per GPU model, overridden per cloud and
// instance type by the median of at least three runs.
func MeasuredSpeeds(ctx context.Context, b *store.Broker, now time.Time) (optimizer.SpeedTable, error) {
	t := optimizer.DefaultSpeeds()
	runs, err := b.ListBenchmarks(ctx, "")
	if err != nil {
		return t, fmt.Errorf("measured speeds: %w", err)
	}
	insts, err := b.ListInstances(ctx, "", "")
	if err != nil {
		return t, fmt.Errorf("measured speeds: %w", err)
	}
	cloudOf := map[string]string{}
	for _, i := range insts {
		cloudOf[i.ID] = i.Cloud
	}
	type series struct{ tflops, bw []float64 }
	by := map[string]*series{}
	for _, r := range runs {
		cloud := cloudOf[r.Instance]
		if r.InstanceType == "" || cloud == "" || now.Sub(r.At) > speedWindow || r.TFLOPS <= 0 {
			continue
		}
		k := optimizer.InstanceKey(pricing.Cloud(cloud), r.InstanceType)
		s := by[k]
		if s == nil {
			s = &series{}
			by[k] = s
		}
		s.tflops = append(s.tflops, r.TFLOPS)
		if r.MemBandwidthGB > 0 {
			s.bw = append(s.bw, r.MemBandwidthGB)
		}
	}
	t.ByInstance = map[string]optimizer.Throughput{}
	for k, s := range by {
		if len(s.tflops) < speedMinRuns {
			continue
		}
		th := optimizer.Throughput{TFLOPS: median(s.tflops), Source: fmt.Sprintf("measured: median of %d runs", len(s.tflops))}
		if len(s.bw) >= speedMinRuns {
			th.MemoryBandwidthGBs = median(s.bw)
		}
		t.ByInstance[k] = th
	}
	return t, nil
}

// median of a non-empty slice (the slice is sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// SlowHost is a benchmark far below its instance type's median.
type SlowHost struct {
	Instance     string
	InstanceType string
	TFLOPS       float64
	Median       float64
}

// SlowHosts returns the instances whose latest benchmark is below
// slowHostRatio of the median of their instance type (with at least
// speedMinRuns runs).
func SlowHosts(ctx context.Context, b *store.Broker, now time.Time) ([]SlowHost, error) {
	runs, err := b.ListBenchmarks(ctx, "")
	if err != nil {
		return nil, err
	}
	byType := map[string][]float64{}
	latest := map[string]store.BenchmarkRecord{}
	for _, r := range runs {
		if r.InstanceType == "" || now.Sub(r.At) > speedWindow || r.TFLOPS <= 0 {
			continue
		}
		byType[r.InstanceType] = append(byType[r.InstanceType], r.TFLOPS)
		if l, ok := latest[r.Instance]; !ok || r.At.After(l.At) {
			latest[r.Instance] = r
		}
	}
	var out []SlowHost
	for id, r := range latest {
		xs := byType[r.InstanceType]
		if len(xs) < speedMinRuns {
			continue
		}
		m := median(append([]float64(nil), xs...))
		if r.TFLOPS < slowHostRatio*m {
			out = append(out, SlowHost{Instance: id, InstanceType: r.InstanceType, TFLOPS: r.TFLOPS, Median: m})
		}
	}
	slices.SortFunc(out, func(a, b SlowHost) int {
		if a.Instance < b.Instance {
			return -1
		}
		if a.Instance > b.Instance {
			return 1
		}
		return 0
	})
	return out, nil
}

// flagSlowHosts records one slow_host event per slow instance and
// benchmark level, so the fleet and the reports can replace it.
func flagSlowHosts(ctx context.Context, b *store.Broker, now time.Time, replace func(ctx context.Context, id, reason string) error) error {
	slow, err := SlowHosts(ctx, b, now)
	if err != nil {
		return err
	}
	for _, h := range slow {
		prior, err := b.ListEvents(ctx, store.EventFilter{Kind: string(instance.EventSlowHost), Instance: h.Instance, Limit: 1})
		if err != nil {
			return err
		}
		if len(prior) > 0 {
			continue
		}
		what := fmt.Sprintf("benchmark %.0f TFLOPS is %.0f%% of the %s median %.0f TFLOPS", h.TFLOPS, 100*h.TFLOPS/h.Median, h.InstanceType, h.Median)
		advice := "; replace this host (gpubroker fleet replace " + h.Instance + ")"
		if replace != nil {
			advice = "; replacing it (fleet.replace_slow_hosts)"
		}
		// The request first: the event marks the host done, so a request
		// that failed is asked again next time.
		if replace != nil {
			if err := replace(ctx, h.Instance, "slow host: "+what); err != nil {
				return fmt.Errorf("replacing slow host %s: %w", h.Instance, err)
			}
		}
		_, err = b.AddEvent(ctx, store.EventRecord{At: now, Kind: string(instance.EventSlowHost), Instance: h.Instance, Message: what + advice})
		if err != nil {
			return err
		}
	}
	return nil
}
