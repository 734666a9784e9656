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

// pipelineFor calls produce(i) for every i in [0, n) in order on the
// calling goroutine, and consume(i) once produce(i) has returned, on up to
// workers goroutines (workers <= 0: GOMAXPROCS; the caller joins them once
// it has produced everything); it returns when all are done. consume(i)
// must read nothing that a later produce writes, and touch only what
// belongs to i, so the outcome is the same as producing everything first
// and then consuming (which is what one worker, or few items, do).
//
// The fleet simulator's hedging stage feeds the shared pool tracker in
// service order (produce) while the other core already takes the decisions
// of the services fed (consume): the feeding was all on the critical path.
func pipelineFor(n, workers int, produce, consume func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n/parallelMin)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			produce(i)
		}
		for i := 0; i < n; i++ {
			consume(i)
		}
		return
	}
	// Produced items go out in small batches: a send per item would wake a
	// parked worker per item.
	const batch = 4
	ready := make(chan [2]int, n/batch+1)
	var wg sync.WaitGroup
	run := func() {
		for r := range ready {
			for i := r[0]; i < r[1]; i++ {
				consume(i)
			}
		}
	}
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			run()
		}()
	}
	lo := 0
	for i := 0; i < n; i++ {
		produce(i)
		if i+1-lo == batch || i == n-1 {
			ready <- [2]int{lo, i + 1}
			lo = i + 1
		}
	}
	close(ready)
	run()
	wg.Wait()
}
