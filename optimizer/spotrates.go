package optimizer

import (
	"math"
	"strconv"
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// Default spot interruption rates, per instance-hour, derived from the
// shared preemption traces (../shared/data/spot-traces/preemption, the
// NSDI'24 "Can't Be Late" measurements): preemptions counted as drops in
// the number of running instances, divided by the instance-hours run.
// TestSpotRatesFromTraces recomputes them; docs/plan.md "Spot reality" has
// the derivation and the command.
//
//   - GPU (AWS p3.2xlarge, 1×V100; 7 pools, 1-node and 4-node runs): 802
//     preemptions over 3,497 instance-hours = 0.229/h. The traces hold no
//     GCP or Azure GPU measurement, so every cloud's GPU default is this
//     figure until one exists; the CPU traces show the clouds differ
//     (AWS r5 0.60/h, GCP c3 0.017/h), which is why a policy can set
//     spot_defaults per cloud.
const (
	TraceGPUInterruptionsPerHour = 0.229
)

// DefaultInterruptionRate is the rate assumed for a spot offer without an
// observed signal.
func DefaultInterruptionRate(c pricing.Cloud, m pricing.GPUModel) float64 {
	return TraceGPUInterruptionsPerHour
}

// BucketInterruptionRate converts an observed interruption-frequency bucket
// (AWS Spot Advisor "<5%", "5-10%", …, ">20%"; Azure eviction rate "0-5",
// …, "20+") into a rate consistent with the traces. The buckets are the
// share of instances interrupted in a month; read literally as a constant
// hazard they give about 1e-4/h, three orders of magnitude below the
// measured GPU rate, because the share counts all instances of the type in
// the region, idle fleets included. They rank pools, so they are scaled
// to the trace: the traced p3.2xlarge pools sit in Spot Advisor's ">20%"
// bucket, so a bucket's rate is the trace rate × its midpoint share ÷ the
// top bucket's (25%): "<5%" 0.023/h, "5-10%" 0.069/h, "10-15%" 0.115/h,
// "15-20%" 0.160/h, ">20%" 0.229/h. ok is false for an unknown label.
func BucketInterruptionRate(bucket string) (rate float64, ok bool) {
	b := strings.ReplaceAll(strings.TrimSpace(bucket), " ", "")
	b = strings.TrimSuffix(b, "%")
	var mid float64
	switch {
	case strings.HasPrefix(b, "<"):
		hi, err := strconv.ParseFloat(strings.TrimSuffix(b[1:], "%"), 64)
		if err != nil || hi <= 0 {
			return 0, false
		}
		mid = hi / 2
	case strings.HasPrefix(b, ">"), strings.HasSuffix(b, "+"):
		mid = 25
	default:
		lo, hi, found := strings.Cut(b, "-")
		if !found {
			return 0, false
		}
		l, e1 := strconv.ParseFloat(strings.TrimSuffix(lo, "%"), 64)
		h, e2 := strconv.ParseFloat(strings.TrimSuffix(hi, "%"), 64)
		if e1 != nil || e2 != nil || h <= l || l < 0 {
			return 0, false
		}
		mid = (l + h) / 2
	}
	if math.IsNaN(mid) || mid <= 0 || mid > 100 {
		return 0, false
	}
	return TraceGPUInterruptionsPerHour * min(mid, 25) / 25, true
}
