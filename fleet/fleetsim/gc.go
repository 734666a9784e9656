package fleetsim

import (
	"os"
	"runtime/debug"
)

// BatchGCPercent is the garbage collector's target a simulation run uses
// (see BatchGC): a simulation allocates fast and keeps little, so collecting
// at 4 × the live heap instead of Go's default 2 × takes about a fifth to a
// third less CPU, for a peak heap about twice as large (docs/BENCHMARKS.md).
const BatchGCPercent = 400

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
