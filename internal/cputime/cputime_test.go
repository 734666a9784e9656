package cputime

import (
	"runtime"
	"testing"
)

// TestProcessGrows: burning CPU moves the figure on unix (it is 0 elsewhere).
func TestProcessGrows(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no rusage on " + runtime.GOOS)
	}
	before := Process()
	x := 0
	for i := range 200_000_000 {
		x += i % 7
	}
	if x == 0 || Process() <= before {
		t.Fatalf("CPU time %s then %s after a busy loop", before, Process())
	}
}
