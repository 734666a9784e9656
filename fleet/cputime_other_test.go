//go:build !unix

package fleet

import "time"

func cpuTime() time.Duration { return 0 }
