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
