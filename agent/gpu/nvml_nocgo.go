//go:build !cgo

package gpu

import "fmt"

// OpenSystem reports ErrNoNVML: NVML is reached through cgo, and this binary
// was built without it.
func OpenSystem() (Collector, error) {
	return nil, fmt.Errorf("%w: this binary was built without cgo", ErrNoNVML)
}
