package fleetsim

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestBatchGC(t *testing.T) {
	before := gcPercent()
	t.Run("GOGC unset", func(t *testing.T) {
		if v, set := os.LookupEnv("GOGC"); set {
			t.Setenv("GOGC", v) // restored after the test
			os.Unsetenv("GOGC")
		}
		restore := BatchGC()
		if got := gcPercent(); got != BatchGCPercent {
			t.Errorf("target %d during the run, want %d", got, BatchGCPercent)
		}
		restore()
		if got := gcPercent(); got != before {
			t.Errorf("target %d after restore, want %d", got, before)
		}
	})
	t.Run("GOGC set", func(t *testing.T) {
		t.Setenv("GOGC", "150")
		restore := BatchGC()
		if got := gcPercent(); got != before {
			t.Errorf("GOGC set: target %d, want it left at %d", got, before)
		}
		restore()
	})
}
