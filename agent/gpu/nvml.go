//go:build cgo

package gpu

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// OpenSystem opens the machine's NVML (libnvidia-ml.so.1, loaded now).
func OpenSystem() (Collector, error) { return OpenNVML(nvml.New()) }

// NVML collects telemetry from an nvml.Interface: the real library
// (nvml.New()) in production, go-nvml's mock servers in tests.
type NVML struct {
	mu  sync.Mutex
	lib nvml.Interface
}

var _ Collector = (*NVML)(nil)

// OpenNVML initialises lib. It returns an error wrapping ErrNoNVML when the
// library is absent or fails to initialise; callers log it once and run
// without telemetry.
func OpenNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: %s", ErrNoNVML, errString(ret))
	}
	return &NVML{lib: lib}, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %s", errString(ret))
	}
	return nil
}

// Collect reads every GPU. A figure a GPU does not support is left nil; a
// GPU that cannot be read at all is an error.
func (n *NVML) Collect() ([]Stat, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("counting GPUs: %s", errString(ret))
	}
	out := make([]Stat, 0, count)
	for i := range count {
		d, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d: %s", i, errString(ret))
		}
		s := Stat{Index: i}
		if s.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("GPU %d name: %s", i, errString(ret))
		}
		s.UUID, _ = d.GetUUID()
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			s.MemoryTotalMiB, s.MemoryUsedMiB = mem.Total>>20, mem.Used>>20
		}
		s.Model, _ = ModelFromName(s.Name, s.MemoryTotalMiB)
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			s.UtilGPUPct, s.UtilMemPct = &u.Gpu, &u.Memory
		}
		s.TempC = u32(d.GetTemperature(nvml.TEMPERATURE_GPU))
		if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			w := float64(mw) / 1000
			s.PowerW = &w
		}
		if mw, ret := d.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
			w := float64(mw) / 1000
			s.PowerLimitW = &w
		}
		s.SMClockMHz = u32(d.GetClockInfo(nvml.CLOCK_SM))
		s.MemClockMHz = u32(d.GetClockInfo(nvml.CLOCK_MEM))
		s.ECCVolatileUncorrected = u64(d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC))
		s.ECCAggregateUncorrected = u64(d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC))
		out = append(out, s)
	}
	return out, nil
}

func u32(v uint32, ret nvml.Return) *uint32 {
	if ret != nvml.SUCCESS {
		return nil
	}
	return &v
}

func u64(v uint64, ret nvml.Return) *uint64 {
	if ret != nvml.SUCCESS {
		return nil
	}
	return &v
}

// errString names an NVML return code without calling into the library
// (nvml.ErrorString needs it loaded).
func errString(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to access the GPU"
	case nvml.ERROR_NOT_SUPPORTED:
		return "not supported"
	case nvml.ERROR_UNINITIALIZED:
		return "NVML not initialised"
	case nvml.ERROR_GPU_IS_LOST:
		return "GPU is lost"
	}
	return fmt.Sprintf("NVML error %d", int32(ret))
}
