// Package cputime reads the process's own CPU time, which benchmarks
// report beside wall time: on a shared machine the wall clock measures the
// other tenants too.
package cputime

import "time"

// Process is the process's user+system CPU time so far, all threads and
// the garbage collector included; 0 where the platform does not say.
func Process() time.Duration { return process() }

// Thread is the calling OS thread's user+system CPU time so far; 0 where
// the platform does not say (Linux only). A benchmark that locks its
// goroutine to its thread (runtime.LockOSThread) reads the CPU time of
// that goroutine alone: with the work it hands to other goroutines
// (the garbage collector's marking, parallel stages) on other cores, that
// is its critical path, the wall time on an otherwise idle machine.
func Thread() time.Duration { return thread() }
