package gpu_test

import "github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

// dgxh100Device is the mock server's device type (shared by every DGX mock).
type dgxh100Device = server.Device
