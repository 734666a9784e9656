// Package cputime reads the process's own CPU time, which benchmarks
// report beside wall time: on a shared machine the wall clock measures the
// other tenants too.
package cputime

import "time"

// Process is the process's user+system CPU time so far, all threads and
// the garbage collector included; 0 where the platform does not say.
func Process() time.Duration { return process() }
