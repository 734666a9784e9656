// Package heapprobe measures the peak heap of a piece of code, for benchmarks
// that must show memory stays bounded (streaming, not whole-document copies).
package heapprobe

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Peak samples the heap every 2 ms while f runs and returns the highest
// HeapAlloc seen above the heap before f started (the caller's own fixtures),
// in bytes. Sampling can miss a short spike; it is a figure for a benchmark,
// not a bound.
func Peak(f func()) uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var ms runtime.MemStats
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load() - min(peak.Load(), base.HeapAlloc)
}
