package fleet

import (
	"sync/atomic"
	"testing"
)

// TestParallelFor: every index is called exactly once, whatever the number
// of items and workers (inline below parallelMin items per worker).
func TestParallelFor(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{
		{0, 4}, {1, 4}, {7, 2}, {16, 2}, {17, 0}, {100, 1}, {100, 3}, {1000, 8},
	} {
		calls := make([]atomic.Int32, tc.n)
		parallelFor(tc.n, tc.workers, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Fatalf("n=%d workers=%d: index %d called %d times", tc.n, tc.workers, i, c)
			}
		}
	}
}

// TestPipelineFor: every index is produced once, in order, and consumed
// once, after its produce, whatever the number of items and workers.
func TestPipelineFor(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{
		{0, 4}, {1, 4}, {7, 2}, {16, 2}, {17, 0}, {100, 1}, {100, 3}, {1000, 8}, {1001, 2},
	} {
		produced := make([]atomic.Bool, tc.n)
		consumed := make([]atomic.Int32, tc.n)
		next := 0 // only the calling goroutine produces
		pipelineFor(tc.n, tc.workers, func(i int) {
			if i != next {
				t.Errorf("n=%d workers=%d: produced %d, want %d", tc.n, tc.workers, i, next)
			}
			next++
			produced[i].Store(true)
		}, func(i int) {
			if !produced[i].Load() {
				t.Errorf("n=%d workers=%d: consumed %d before it was produced", tc.n, tc.workers, i)
			}
			consumed[i].Add(1)
		})
		if next != tc.n {
			t.Fatalf("n=%d workers=%d: produced %d items", tc.n, tc.workers, next)
		}
		for i := range consumed {
			if c := consumed[i].Load(); c != 1 {
				t.Fatalf("n=%d workers=%d: index %d consumed %d times", tc.n, tc.workers, i, c)
			}
		}
	}
}
