package fleetsim

import (
	"path/filepath"
	"time"

	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// LoadTraceDir reads every trace file (.json as in the spot-traces data
// set, .csv as fleet/sim reads it) under dir, recursively, sorted by path.
// A trace is named by its path under dir ("1-node/aws-02-15-2023/us-east-1a_v100_1.json"),
// so names are unique.
func LoadTraceDir(dir string) ([]fake.Trace, error) {
	paths, err := sim.TraceFiles(dir)
	if err != nil {
		return nil, err
	}
	out := make([]fake.Trace, 0, len(paths))
	for _, p := range paths {
		t, err := sim.LoadTrace(p)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			rel = p
		}
		out = append(out, fake.Trace{Name: filepath.ToSlash(rel),
			Gap: time.Duration(t.Gap) * time.Second, Avail: t.Avail})
	}
	return out, nil
}
