module github.com/gpubroker/gpubroker

go 1.26

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
)
