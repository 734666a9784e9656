package fleetsim

import (
	"os"
	"runtime/debug"
)

// BatchGCPercent is the garbage collector's target a simulation run uses
// (see BatchGC): a simulation allocates fast, so collecting at 3 × the live
// heap instead of Go's default 2 × takes much less CPU. 400 took a tenth
// less CPU again but peaked at 2.4 GB on the 1,000-workload month, 200 at
// 1.3 GB (docs/BENCHMARKS.md).
const BatchGCPercent = 200

// BatchGC sets the process's garbage collector target to BatchGCPercent
// unless the GOGC environment variable chooses one, and returns the function
// that restores the previous target. It is for the process that runs a
// simulation as a batch job (`gpubroker simulate fleet`, the benchmarks);
// the simulation itself never changes process-wide settings.
func BatchGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(BatchGCPercent)
	return func() { debug.SetGCPercent(old) }
}
