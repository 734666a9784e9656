package gpu

import "errors"

// ErrCUDANotFound means the CUDA runtime or cuBLAS could not be loaded.
var ErrCUDANotFound = errors.New("CUDA libraries not found")

// CUDA measures with cuBLAS GEMMs and device-to-device copies, loading
// libcudart and libcublas at run time (dlopen): no CUDA toolkit at build
// time, and a clear ErrCUDANotFound on machines without them.
type CUDA struct {
	// LibDirs are searched before the dynamic linker's path (e.g. a pip
	// nvidia-cublas-cu12 install's lib directory).
	LibDirs []string
	// DType is "bf16" (default) or "fp16".
	DType string
	// MatrixN is the GEMM size (default 8192).
	MatrixN int
	// Iterations timed (default 50).
	Iterations int
	// CopyBytes per copy for the bandwidth test (default 1 GiB) and
	// CopyIterations (default 20).
	CopyBytes      int64
	CopyIterations int
	// Names maps GPU index to device name (from NVML) so results can be
	// compared with the spec table.
	Names map[int]string
}

// Method implements Runner.
func (c *CUDA) Method() string { return "cuda-dlopen" }

func (c *CUDA) defaults() {
	if c.DType != "fp16" {
		c.DType = "bf16"
	}
	if c.MatrixN <= 0 {
		c.MatrixN = 8192
	}
	if c.Iterations <= 0 {
		c.Iterations = 50
	}
	if c.CopyBytes <= 0 {
		c.CopyBytes = 1 << 30
	}
	if c.CopyIterations <= 0 {
		c.CopyIterations = 20
	}
}
