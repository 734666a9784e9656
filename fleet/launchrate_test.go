package fleet

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// TestLaunchRateCapCountsTheLastMinute: capHeld's per-minute count (a
// suffix of the launches while they are in time order, a scan otherwise)
// holds back exactly when the scan of every call would: the launches kept
// (those under a minute old at each call: a launch dropped is not counted
// again when the clock steps back) reach the cap.
func TestLaunchRateCapCountsTheLastMinute(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 13))
	for run := range 200 {
		capN := 1 + rng.IntN(6)
		r := &Reconciler{Options: Options{MaxInstances: 1 << 30, LaunchesPerMinute: capN}}
		var marks []time.Time // the launches kept, by the plain scan
		now := base
		for step := range 60 {
			switch d := rng.IntN(10); {
			case d == 0 && run%2 == 1:
				now = now.Add(-time.Duration(rng.IntN(90)) * time.Second) // the clock steps back
			default:
				now = now.Add(time.Duration(rng.IntN(40)) * time.Second)
			}
			p := &passState{r: r, now: now, alive: map[pricing.Cloud]int{}}
			kept := marks[:0]
			for _, at := range marks {
				if now.Sub(at) < time.Minute {
					kept = append(kept, at)
				}
			}
			marks = kept
			recent := len(marks)
			why := p.capHeld(pricing.AWS)
			if held := strings.Contains(why, "launch rate cap"); held != (recent >= capN) {
				t.Fatalf("run %d step %d: %d launches in the last minute under a cap of %d, capHeld says %q", run, step, recent, capN, why)
			}
			if why == "" {
				p.markLaunch(pricing.AWS)
				marks = append(marks, now)
			}
		}
	}
}
