//go:build !cgo

package gpu

import (
	"context"
	"fmt"
)

// Measure implements Runner; without cgo nothing can be loaded.
func (c *CUDA) Measure(context.Context) ([]Measurement, error) {
	return nil, fmt.Errorf("%w: this binary was built without cgo", ErrCUDANotFound)
}
