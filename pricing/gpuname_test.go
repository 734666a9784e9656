package pricing

import "testing"

func TestModelFromDeviceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		mib  uint64
		want GPUModel
	}{
		{"NVIDIA H100 80GB HBM3", 81559, H100},
		{"NVIDIA H200", 143771, H200},
		{"NVIDIA A100-SXM4-40GB", 40960, A100_40},
		{"NVIDIA A100-SXM4-80GB", 81920, A100_80},
		{"NVIDIA A100-SXM4-80GB", 0, A100_80}, // size from the name
		{"NVIDIA A100-PCIE-40GB", 0, A100_40},
		{"NVIDIA A10G", 23028, A10G},
		{"NVIDIA A10", 23028, A10},
		{"NVIDIA L40S", 46068, L40S},
		{"NVIDIA L4", 23034, L4},
		{"Tesla T4", 15360, T4},
		{"Tesla V100-SXM2-32GB", 32768, V100_32},
		{"Tesla V100-SXM2-32GB", 0, V100_32},
		{"NVIDIA GeForce RTX 4090", 24564, ""},
		{"", 0, ""},
	} {
		if got, _ := ModelFromDeviceName(tc.name, tc.mib); got != tc.want {
			t.Errorf("ModelFromDeviceName(%q, %d) = %q, want %q", tc.name, tc.mib, got, tc.want)
		}
	}
}
