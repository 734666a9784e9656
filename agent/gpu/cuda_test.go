//go:build cgo

package gpu_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpubroker/gpubroker/agent/gpu"
)

// TestCUDAWithFakeLibraries builds stand-ins for libcudart and libcublas and
// runs the dlopen path against them: symbol lookup, argument passing
// (dtype, compute type, leading dimensions) and the TFLOPS/GB/s arithmetic.
func TestCUDAWithFakeLibraries(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	// One library behind both names, as the fake keeps state across the
	// GEMM and the timing calls.
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libfakecuda.so"), "testdata/fakecuda.c").CombinedOutput()
	if err != nil {
		t.Fatalf("building fake CUDA: %v\n%s", err, out)
	}
	for _, lib := range []string{"libcudart.so", "libcublas.so"} {
		if err := os.Symlink("libfakecuda.so", filepath.Join(dir, lib)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dtype string
		ms    float64
	}{{"bf16", 100}, {"fp16", 200}} {
		c := &gpu.CUDA{LibDirs: []string{dir}, DType: tc.dtype, MatrixN: 2048, Iterations: 10, CopyBytes: 1 << 20, CopyIterations: 10,
			Names: map[int]string{0: "NVIDIA H200", 1: "NVIDIA H200"}}
		ms, err := c.Measure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wantTF := math.Round(2*2048*2048*2048*10/(tc.ms/1e3)/1e12*1000) / 1000
		wantBW := math.Round(2*float64(1<<20)*10/0.1/1e9*1000) / 1000
		if len(ms) != 2 || ms[1].TFLOPS != wantTF || ms[1].BandwidthGBs != wantBW || ms[1].DType != tc.dtype || ms[1].Name != "NVIDIA H200" || ms[1].MatrixN != 2048 {
			t.Fatalf("%s: %+v, want %v TFLOPS, %v GB/s", tc.dtype, ms, wantTF, wantBW)
		}
	}
}
