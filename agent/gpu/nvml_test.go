//go:build cgo

package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/pricing"
)

// dgxh100Device is the mock server's device type (shared by every DGX mock).
type dgxh100Device = server.Device

// withReadings gives a mock device the telemetry calls go-nvml's mock server
// leaves unset; supported=false answers ERROR_NOT_SUPPORTED, as consumer
// GPUs do for ECC.
func withReadings(d *mock.Device, supported bool) {
	ns := nvml.ERROR_NOT_SUPPORTED
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 41}, nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 64, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 512345, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700000, nvml.SUCCESS }
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t == nvml.CLOCK_SM {
			return 1980, nvml.SUCCESS
		}
		return 2619, nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(_ nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if !supported {
			return 0, ns
		}
		if c == nvml.VOLATILE_ECC {
			return 0, nvml.SUCCESS
		}
		return 3, nvml.SUCCESS
	}
}

func TestNVMLCollectOnMockDGX(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lib   func() nvml.Interface
		model pricing.GPUModel
	}{
		{"dgxh100", func() nvml.Interface {
			s := dgxh100.New()
			for i, d := range s.Devices {
				withReadings(&d.(*dgxh100Device).Device, i != 7)
			}
			return s
		}, pricing.H100},
		{"dgxa100", func() nvml.Interface {
			s := dgxa100.New()
			for i, d := range s.Devices {
				withReadings(&d.(*dgxh100Device).Device, i != 7)
			}
			return s
		}, pricing.A100_40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := gpu.OpenNVML(tc.lib())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stats, err := c.Collect()
			if err != nil {
				t.Fatal(err)
			}
			if len(stats) != 8 {
				t.Fatalf("%d GPUs, want 8", len(stats))
			}
			s := stats[0]
			if s.Model != tc.model || s.MemoryTotalMiB == 0 || s.UUID == "" || *s.TempC != 64 || *s.PowerW != 512.345 ||
				*s.PowerLimitW != 700 || *s.SMClockMHz != 1980 || *s.MemClockMHz != 2619 || *s.UtilGPUPct != 87 ||
				*s.ECCAggregateUncorrected != 3 {
				t.Fatalf("stat %+v", s)
			}
			if stats[7].ECCAggregateUncorrected != nil || stats[7].Index != 7 {
				t.Fatalf("unsupported ECC should be nil: %+v", stats[7])
			}
		})
	}
}

func TestOpenNVMLFailure(t *testing.T) {
	lib := dgxh100.New()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := gpu.OpenNVML(lib)
	if !errors.Is(err, gpu.ErrNoNVML) || !strings.Contains(err.Error(), "libnvidia-ml.so.1 not found") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenSystemWithoutDriver(t *testing.T) {
	c, err := gpu.OpenSystem()
	if err == nil {
		c.Close()
		t.Skip("this machine has an NVIDIA driver")
	}
	if !errors.Is(err, gpu.ErrNoNVML) {
		t.Fatalf("err = %v, want ErrNoNVML", err)
	}
}
