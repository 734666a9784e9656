//go:build !unix

package fleetsim

import "time"

func cpuTime() time.Duration { return 0 }
