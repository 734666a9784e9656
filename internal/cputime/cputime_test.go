package cputime

import (
	"runtime"
	"testing"
	"time"
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

// TestThreadGrows: burning CPU on a locked thread moves its figure on
// Linux (it is 0 elsewhere), and by no more than the process's.
func TestThreadGrows(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, pbefore := Thread(), Process()
	x := 0
	for i := range 200_000_000 {
		x += i % 7
	}
	th, pr := Thread()-before, Process()-pbefore
	if x == 0 || th <= 0 {
		t.Fatalf("thread CPU time moved by %s after a busy loop", th)
	}
	if th > pr+10*time.Millisecond {
		t.Fatalf("thread CPU time %s above the process's %s", th, pr)
	}
}
