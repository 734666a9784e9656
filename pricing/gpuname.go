package pricing

import (
	"strconv"
	"strings"
)

// deviceTokens are the words of NVIDIA device names that name a model
// NormalizeGPU knows; memory decides between sizes.
var deviceTokens = []string{"H200", "H100", "A100", "A10G", "A10", "L40S", "L4", "T4", "V100", "P100"}

// ModelFromDeviceName maps a device name as NVML reports it ("NVIDIA H100
// 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4") to a canonical model.
// memoryMiB is the device's memory (0 when unknown: then a size written in
// the name, "80GB", decides). The agent names its GPUs with it and the
// broker reads reports that carry no model with it, so both agree.
func ModelFromDeviceName(name string, memoryMiB uint64) (GPUModel, bool) {
	fields := strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	if memoryMiB == 0 {
		for _, f := range fields {
			if gb, ok := strings.CutSuffix(f, "GB"); ok {
				if n, err := strconv.Atoi(gb); err == nil && n > 0 && n < 1024 {
					memoryMiB = uint64(n) * 1024
				}
			}
		}
	}
	for _, tok := range deviceTokens {
		for _, f := range fields {
			if f == tok {
				return NormalizeGPU(tok, int(memoryMiB))
			}
		}
	}
	return "", false
}
