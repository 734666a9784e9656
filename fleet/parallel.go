package fleet

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor calls f(i) for every i in [0, n), on up to workers
// goroutines (workers <= 0: GOMAXPROCS) and returns when all are done. f
// must touch only what belongs to i (results go into a slice by index), so
// the outcome is the same whatever the scheduling; small n runs inline.
func parallelFor(n, workers int, f func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n/parallelMin)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	run := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			f(i)
		}
	}
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
}

// parallelMin is the fewest items per goroutine worth starting one for.
const parallelMin = 8
