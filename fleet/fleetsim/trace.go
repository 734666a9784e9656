package fleetsim

import (
	"container/heap"
	"time"

	"github.com/gpubroker/gpubroker/providers/fake"
)

// traceIndex answers "when does this pool's capacity next change" in O(1):
// dist[i] is the ticks from i to the next tick with another count (0: the
// trace never changes).
type traceIndex struct {
	t    *fake.Trace
	dist []int
}

func newTraceIndex(t *fake.Trace) *traceIndex {
	n := len(t.Avail)
	ti := &traceIndex{t: t, dist: make([]int, n)}
	if n == 0 {
		return ti
	}
	// Walk the ring backwards twice so the wrap-around is seen.
	for pass := 0; pass < 2; pass++ {
		for i := n - 1; i >= 0; i-- {
			j := (i + 1) % n
			switch {
			case t.Avail[j] != t.Avail[i]:
				ti.dist[i] = 1
			case ti.dist[j] > 0:
				ti.dist[i] = ti.dist[j] + 1
			}
		}
	}
	return ti
}

// nextChange is when a pool replaying the trace from offset (tick 0 at
// start, as providers/fake counts) next changes capacity after now.
func (ti *traceIndex) nextChange(start, now time.Time, offset int) (time.Time, bool) {
	n := len(ti.t.Avail)
	if n == 0 || ti.t.Gap <= 0 {
		return time.Time{}, false
	}
	tick := int(now.Sub(start) / ti.t.Gap)
	if tick < 0 {
		tick = 0
	}
	d := ti.dist[(offset+tick)%n]
	if d == 0 {
		return time.Time{}, false
	}
	return start.Add(time.Duration(tick+d) * ti.t.Gap), true
}

// timeHeap is a min-heap of times.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h *timeHeap) push(t time.Time) { heap.Push(h, t) }
