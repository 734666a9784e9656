package gpu_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/gpu"
	"github.com/gpubroker/gpubroker/pricing"
)

func TestModelFromName(t *testing.T) {
	for _, tc := range []struct {
		name string
		mib  uint64
		want pricing.GPUModel
	}{
		{"NVIDIA H100 80GB HBM3", 81559, pricing.H100},
		{"NVIDIA H200", 143771, pricing.H200},
		{"NVIDIA A100-SXM4-40GB", 40960, pricing.A100_40},
		{"NVIDIA A100-SXM4-80GB", 81920, pricing.A100_80},
		{"NVIDIA A10G", 23028, pricing.A10G},
		{"NVIDIA A10", 23028, pricing.A10},
		{"NVIDIA L40S", 46068, pricing.L40S},
		{"NVIDIA L4", 23034, pricing.L4},
		{"Tesla T4", 15360, pricing.T4},
		{"Tesla V100-SXM2-32GB", 32768, pricing.V100_32},
		{"NVIDIA GeForce RTX 4090", 24564, ""},
	} {
		if got, _ := gpu.ModelFromName(tc.name, tc.mib); got != tc.want {
			t.Errorf("ModelFromName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	ms := []gpu.Measurement{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", DType: "bf16", TFLOPS: 712, BandwidthGBs: 2950},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", DType: "bf16", TFLOPS: 310, BandwidthGBs: 2950},
		{Index: 2, Name: "NVIDIA A100-SXM4-80GB", DType: "bf16", TFLOPS: 250}, // no bandwidth measured
		{Index: 3, Name: "Mystery GPU", DType: "fp16", TFLOPS: 10},
	}
	got := gpu.Compare(ms, map[int]uint64{2: 81920}, 0)
	want := []struct {
		model        pricing.GPUModel
		tfr, bwr     float64
		below        bool
		specTF, spBW float64
	}{
		{pricing.H100, 0.72, 0.881, false, 989, 3350},
		{pricing.H100, 0.313, 0.881, true, 989, 3350},
		{pricing.A100_80, 0.801, 0, false, 312, 2039},
		{"", 0, 0, false, 0, 0},
	}
	for i, w := range want {
		g := got[i]
		if g.Model != w.model || g.TFLOPSRatio != w.tfr || g.BandwidthRatio != w.bwr || g.BelowSpec != w.below ||
			g.SpecTFLOPS != w.specTF || g.SpecBandwidthGBs != w.spBW {
			t.Errorf("gpu %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestParseOutput(t *testing.T) {
	good := `{"schema":"gpubroker.benchmark/v1","gpus":[
 {"index":0,"name":"NVIDIA H100 80GB HBM3","dtype":"bf16","tflops":712.4,"bandwidth_gbs":2950.1,"matrix_n":8192,"iterations":50,"extra":{"tool":"x"}}]}`
	ms, err := gpu.ParseOutput([]byte(good))
	if err != nil || len(ms) != 1 || ms[0].TFLOPS != 712.4 || string(ms[0].Extra) != `{"tool":"x"}` {
		t.Fatalf("good: %+v, %v", ms, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"syntax", "{\"schema\":\n  \"gpubroker.benchmark/v1\",,}", "2:28"},
		{"type", "{\"schema\":\"gpubroker.benchmark/v1\",\n\"gpus\":[{\"index\":\"zero\"}]}", "2:23"},
		{"unknown field", `{"schema":"gpubroker.benchmark/v1","gpu":[]}`, `unknown field "gpu"`},
		{"schema", `{"schema":"v0","gpus":[]}`, `want "gpubroker.benchmark/v1"`},
		{"empty", `{"schema":"gpubroker.benchmark/v1","gpus":[]}`, "no GPUs"},
		{"dtype", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"x","dtype":"fp8","tflops":1}]}`, `dtype "fp8"`},
		{"tflops", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"x","dtype":"bf16","tflops":0}]}`, "tflops 0"},
		{"bw", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"x","dtype":"bf16","tflops":1,"bandwidth_gbs":-1}]}`, "bandwidth_gbs -1"},
		{"dup", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"x","dtype":"bf16","tflops":1},{"index":0,"name":"x","dtype":"bf16","tflops":1}]}`, "repeated"},
		{"name", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"dtype":"bf16","tflops":1}]}`, "name is empty"},
		{"trailing", `{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"x","dtype":"bf16","tflops":1}]} {}`, "more than one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gpu.ParseOutput([]byte(tc.in))
			if !errors.Is(err, gpu.ErrBadOutput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadOutput containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseOutput(f *testing.F) {
	f.Add([]byte(`{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"NVIDIA H100 80GB HBM3","dtype":"bf16","tflops":712.4,"bandwidth_gbs":2950.1}]}`))
	f.Add([]byte(`{"schema":"gpubroker.benchmark/v1","gpus":[{"index":1,"name":"x","dtype":"fp16","tflops":1e-3,"extra":null}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := gpu.ParseOutput(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !(m.TFLOPS > 0) || math.IsInf(m.TFLOPS, 0) || m.Name == "" {
				t.Fatalf("accepted %+v", m)
			}
		}
		_ = gpu.Compare(ms, nil, 0)
	})
}

func TestCommandRunner(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "bench.sh")
	_ = os.WriteFile(script, []byte(`#!/bin/sh
echo "warming up" >&2
cat <<'J'
{"schema":"gpubroker.benchmark/v1","gpus":[{"index":0,"name":"NVIDIA H200","dtype":"bf16","tflops":801.5,"bandwidth_gbs":4310}]}
J
`), 0o755)
	res, err := gpu.Run(context.Background(), &gpu.Command{Command: script}, nil, 0, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != "command" || len(res.GPUs) != 1 || res.GPUs[0].Model != pricing.H200 || res.GPUs[0].TFLOPSRatio != 0.81 {
		t.Fatalf("%+v", res)
	}
	for _, tc := range []struct{ name, cmd, want string }{
		{"fails", "echo broken >&2; exit 2", "broken"},
		{"hangs", "sleep 30", "overran"},
		{"garbage", "echo not json", "bad benchmark output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := gpu.Run(context.Background(), &gpu.Command{Command: tc.cmd, Timeout: 300 * time.Millisecond}, nil, 0, time.Now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if time.Since(start) > 3*time.Second {
				t.Fatal("hung benchmark not killed")
			}
		})
	}
}

func TestCUDANotFound(t *testing.T) {
	_, err := (&gpu.CUDA{LibDirs: []string{t.TempDir()}}).Measure(context.Background())
	if err == nil {
		t.Skip("this machine has the CUDA libraries")
	}
	if !errors.Is(err, gpu.ErrCUDANotFound) || !strings.Contains(err.Error(), "CUDA libraries not found") {
		t.Fatalf("err = %v", err)
	}
}
