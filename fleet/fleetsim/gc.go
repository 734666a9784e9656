package fleetsim

import (
	"os"
	"runtime/debug"
)

// BatchGCPercent is the garbage collector's target a simulation run uses
// (see BatchGC): a simulation allocates fast, so collecting at 5 × the live
// heap instead of Go's default 2 × takes much less CPU. On the
// 1,000-workload month (docs/BENCHMARKS.md), once MemStore stopped keeping
// retired launch intents: 200 → 129 s, 0.57 GB peak; 400 → 96 s, 0.90 GB;
// 800 → 83 s, 1.5 GB.
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
