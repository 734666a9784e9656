package cputime

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD (not in package syscall).
const rusageThread = 1

func thread() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
