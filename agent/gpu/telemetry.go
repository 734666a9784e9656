// Package gpu reads GPU telemetry through NVML and measures GPU speed (dense
// BF16/FP16 matrix-multiply TFLOPS and device memory bandwidth), comparing
// it with the spec table in package pricing.
//
// Nothing here needs a GPU or the CUDA toolkit to build: NVML
// (libnvidia-ml.so.1) and the CUDA runtime and cuBLAS are loaded at run
// time, and on a machine without them the callers get ErrNoNVML or
// ErrCUDANotFound and carry on without telemetry or benchmark.
package gpu

import (
	"errors"

	"github.com/gpubroker/gpubroker/pricing"
)

// Collector reads telemetry of every GPU on the machine.
type Collector interface {
	Collect() ([]Stat, error)
	Close() error
}

// ErrNoNVML means NVML could not be loaded or initialised (no NVIDIA
// driver, or no GPU).
var ErrNoNVML = errors.New("NVML unavailable")

// Stat is one GPU's telemetry. Pointer fields are nil when the GPU or
// driver does not report them.
type Stat struct {
	Index          int              `json:"index"`
	UUID           string           `json:"uuid"`
	Name           string           `json:"name"`
	Model          pricing.GPUModel `json:"model,omitempty"` // canonical model, when known
	MemoryTotalMiB uint64           `json:"memory_total_mib"`
	MemoryUsedMiB  uint64           `json:"memory_used_mib"`
	UtilGPUPct     *uint32          `json:"util_gpu_pct,omitempty"`
	UtilMemPct     *uint32          `json:"util_memory_pct,omitempty"`
	TempC          *uint32          `json:"temperature_c,omitempty"`
	PowerW         *float64         `json:"power_w,omitempty"`
	PowerLimitW    *float64         `json:"power_limit_w,omitempty"`
	SMClockMHz     *uint32          `json:"sm_clock_mhz,omitempty"`
	MemClockMHz    *uint32          `json:"memory_clock_mhz,omitempty"`
	// ECC error counts (uncorrected, volatile since the last driver load,
	// and aggregate over the GPU's life).
	ECCVolatileUncorrected  *uint64 `json:"ecc_volatile_uncorrected,omitempty"`
	ECCAggregateUncorrected *uint64 `json:"ecc_aggregate_uncorrected,omitempty"`
}

// ModelFromName maps an NVML device name to a canonical model
// (pricing.ModelFromDeviceName, shared with the broker).
func ModelFromName(name string, memoryMiB uint64) (pricing.GPUModel, bool) {
	return pricing.ModelFromDeviceName(name, memoryMiB)
}
