package heapprobe

import (
	"testing"
	"time"
)

var sink []byte

func TestPeakSeesAnAllocation(t *testing.T) {
	got := Peak(func() {
		sink = make([]byte, 64<<20)
		time.Sleep(20 * time.Millisecond) // let the sampler see it
	})
	sink = nil
	if got < 60<<20 {
		t.Fatalf("Peak = %d bytes, want at least 60 MiB for a 64 MiB allocation", got)
	}
}
