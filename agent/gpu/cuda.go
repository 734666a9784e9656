//go:build cgo

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Our own prototypes of the few CUDA runtime and cuBLAS entry points used,
// so no CUDA header or toolkit is needed to build. Handles, streams and
// events are opaque pointers; enums are ints with the values from the CUDA
// headers (stable across CUDA 11-13).
typedef int (*cudaGetDeviceCount_t)(int *);
typedef int (*cudaSetDevice_t)(int);
typedef int (*cudaMalloc_t)(void **, size_t);
typedef int (*cudaFree_t)(void *);
typedef int (*cudaMemset_t)(void *, int, size_t);
typedef int (*cudaMemcpy_t)(void *, const void *, size_t, int);
typedef int (*cudaDeviceSynchronize_t)(void);
typedef int (*cudaEventCreate_t)(void **);
typedef int (*cudaEventRecord_t)(void *, void *);
typedef int (*cudaEventSynchronize_t)(void *);
typedef int (*cudaEventElapsedTime_t)(float *, void *, void *);
typedef int (*cudaEventDestroy_t)(void *);
typedef const char *(*cudaGetErrorString_t)(int);
typedef int (*cublasCreate_t)(void **);
typedef int (*cublasDestroy_t)(void *);
typedef int (*cublasGemmEx_t)(void *, int, int, int, int, int, const void *, const void *, int, int,
                              const void *, int, int, const void *, void *, int, int, int, int);

enum {
	gpb_cudaMemcpyDeviceToDevice = 3,
	gpb_CUDA_R_16F = 2,
	gpb_CUDA_R_16BF = 14,
	gpb_CUBLAS_OP_N = 0,
	gpb_CUBLAS_COMPUTE_32F = 68,
	gpb_CUBLAS_GEMM_DEFAULT = -1,
};

typedef struct {
	cudaGetDeviceCount_t getDeviceCount;
	cudaSetDevice_t setDevice;
	cudaMalloc_t malloc_;
	cudaFree_t free_;
	cudaMemset_t memset_;
	cudaMemcpy_t memcpy_;
	cudaDeviceSynchronize_t sync;
	cudaEventCreate_t eventCreate;
	cudaEventRecord_t eventRecord;
	cudaEventSynchronize_t eventSync;
	cudaEventElapsedTime_t eventElapsed;
	cudaEventDestroy_t eventDestroy;
	cudaGetErrorString_t errorString;
	cublasCreate_t blasCreate;
	cublasDestroy_t blasDestroy;
	cublasGemmEx_t gemmEx;
} gpb_cuda;

#define GPB_SYM(lib, field, name) \
	do { *(void **)(&c->field) = dlsym(lib, name); \
	     if (!c->field) { snprintf(err, errlen, "symbol %s missing", name); return -1; } } while (0)

static int gpb_load(void *rt, void *blas, gpb_cuda *c, char *err, int errlen) {
	GPB_SYM(rt, getDeviceCount, "cudaGetDeviceCount");
	GPB_SYM(rt, setDevice, "cudaSetDevice");
	GPB_SYM(rt, malloc_, "cudaMalloc");
	GPB_SYM(rt, free_, "cudaFree");
	GPB_SYM(rt, memset_, "cudaMemset");
	GPB_SYM(rt, memcpy_, "cudaMemcpy");
	GPB_SYM(rt, sync, "cudaDeviceSynchronize");
	GPB_SYM(rt, eventCreate, "cudaEventCreate");
	GPB_SYM(rt, eventRecord, "cudaEventRecord");
	GPB_SYM(rt, eventSync, "cudaEventSynchronize");
	GPB_SYM(rt, eventElapsed, "cudaEventElapsedTime");
	GPB_SYM(rt, eventDestroy, "cudaEventDestroy");
	GPB_SYM(rt, errorString, "cudaGetErrorString");
	GPB_SYM(blas, blasCreate, "cublasCreate_v2");
	GPB_SYM(blas, blasDestroy, "cublasDestroy_v2");
	GPB_SYM(blas, gemmEx, "cublasGemmEx");
	return 0;
}

static void *gpb_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

static const char *gpb_dlerror(void) { const char *e = dlerror(); return e ? e : ""; }

static int gpb_device_count(gpb_cuda *c, int *n, char *err, int errlen) {
	int rc = c->getDeviceCount(n);
	if (rc) { snprintf(err, errlen, "cudaGetDeviceCount: %s", c->errorString(rc)); return -1; }
	return 0;
}

#define GPB_CK(call, what) \
	do { int rc_ = (call); if (rc_) { snprintf(err, errlen, "%s: %s", what, c->errorString(rc_)); goto out; } } while (0)
#define GPB_BK(call, what) \
	do { int rc_ = (call); if (rc_) { snprintf(err, errlen, "%s: cuBLAS status %d", what, rc_); goto out; } } while (0)

// gpb_bench times iters dense n×n×n GEMMs (bf16 or fp16 inputs and output,
// fp32 accumulation) and bw_iters device-to-device copies of bw_bytes.
static int gpb_bench(gpb_cuda *c, int dev, int bf16, int n, int iters, size_t bw_bytes, int bw_iters,
                     double *tflops, double *gbs, char *err, int errlen) {
	int ret = -1;
	void *a = NULL, *b = NULL, *d = NULL, *src = NULL, *dst = NULL, *h = NULL, *e0 = NULL, *e1 = NULL;
	float alpha = 1.0f, beta = 0.0f, ms = 0;
	int dt = bf16 ? gpb_CUDA_R_16BF : gpb_CUDA_R_16F;
	size_t mat = (size_t)n * (size_t)n * 2;
	GPB_CK(c->setDevice(dev), "cudaSetDevice");
	GPB_CK(c->malloc_(&a, mat), "cudaMalloc A");
	GPB_CK(c->malloc_(&b, mat), "cudaMalloc B");
	GPB_CK(c->malloc_(&d, mat), "cudaMalloc C");
	// 0x3C bytes: small non-zero values in both formats, so the tensor
	// cores do real work (all-zero inputs run cooler and faster).
	GPB_CK(c->memset_(a, 0x3C, mat), "cudaMemset");
	GPB_CK(c->memset_(b, 0x3C, mat), "cudaMemset");
	GPB_BK(c->blasCreate(&h), "cublasCreate");
	GPB_CK(c->eventCreate(&e0), "cudaEventCreate");
	GPB_CK(c->eventCreate(&e1), "cudaEventCreate");
	for (int i = 0; i < 3; i++) // warm-up: clocks up, heuristics chosen
		GPB_BK(c->gemmEx(h, gpb_CUBLAS_OP_N, gpb_CUBLAS_OP_N, n, n, n, &alpha, a, dt, n, b, dt, n, &beta, d, dt, n,
		                 gpb_CUBLAS_COMPUTE_32F, gpb_CUBLAS_GEMM_DEFAULT), "cublasGemmEx");
	GPB_CK(c->sync(), "cudaDeviceSynchronize");
	GPB_CK(c->eventRecord(e0, NULL), "cudaEventRecord");
	for (int i = 0; i < iters; i++)
		GPB_BK(c->gemmEx(h, gpb_CUBLAS_OP_N, gpb_CUBLAS_OP_N, n, n, n, &alpha, a, dt, n, b, dt, n, &beta, d, dt, n,
		                 gpb_CUBLAS_COMPUTE_32F, gpb_CUBLAS_GEMM_DEFAULT), "cublasGemmEx");
	GPB_CK(c->eventRecord(e1, NULL), "cudaEventRecord");
	GPB_CK(c->eventSync(e1), "cudaEventSynchronize");
	GPB_CK(c->eventElapsed(&ms, e0, e1), "cudaEventElapsedTime");
	if (ms <= 0) { snprintf(err, errlen, "GEMM timing: elapsed %f ms", ms); goto out; }
	*tflops = 2.0 * (double)n * (double)n * (double)n * (double)iters / ((double)ms / 1e3) / 1e12;
	c->free_(a); c->free_(b); c->free_(d); a = b = d = NULL;

	*gbs = 0;
	if (bw_bytes > 0 && bw_iters > 0) {
		GPB_CK(c->malloc_(&src, bw_bytes), "cudaMalloc copy source");
		GPB_CK(c->malloc_(&dst, bw_bytes), "cudaMalloc copy destination");
		GPB_CK(c->memset_(src, 1, bw_bytes), "cudaMemset");
		GPB_CK(c->memcpy_(dst, src, bw_bytes, gpb_cudaMemcpyDeviceToDevice), "cudaMemcpy warm-up");
		GPB_CK(c->sync(), "cudaDeviceSynchronize");
		GPB_CK(c->eventRecord(e0, NULL), "cudaEventRecord");
		for (int i = 0; i < bw_iters; i++)
			GPB_CK(c->memcpy_(dst, src, bw_bytes, gpb_cudaMemcpyDeviceToDevice), "cudaMemcpy");
		GPB_CK(c->eventRecord(e1, NULL), "cudaEventRecord");
		GPB_CK(c->eventSync(e1), "cudaEventSynchronize");
		GPB_CK(c->eventElapsed(&ms, e0, e1), "cudaEventElapsedTime");
		if (ms <= 0) { snprintf(err, errlen, "copy timing: elapsed %f ms", ms); goto out; }
		// Each copy reads and writes bw_bytes.
		*gbs = 2.0 * (double)bw_bytes * (double)bw_iters / ((double)ms / 1e3) / 1e9;
	}
	ret = 0;
out:
	if (e0) c->eventDestroy(e0);
	if (e1) c->eventDestroy(e1);
	if (h) c->blasDestroy(h);
	if (a) c->free_(a);
	if (b) c->free_(b);
	if (d) c->free_(d);
	if (src) c->free_(src);
	if (dst) c->free_(dst);
	return ret;
}
*/
import "C"

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unsafe"
)

// Library names tried, newest CUDA first.
var (
	cudartNames = []string{"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}
	cublasNames = []string{"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
)

func dlopenFirst(dirs, names []string) (unsafe.Pointer, []string) {
	var tried []string
	cands := []string{}
	for _, d := range dirs {
		for _, n := range names {
			cands = append(cands, filepath.Join(d, n))
		}
	}
	cands = append(cands, names...) // the dynamic linker's own search path
	for _, p := range cands {
		cs := C.CString(p)
		h := C.gpb_dlopen(cs)
		C.free(unsafe.Pointer(cs))
		if h != nil {
			return h, nil
		}
		tried = append(tried, p+" ("+C.GoString(C.gpb_dlerror())+")")
	}
	return nil, tried
}

// Measure implements Runner by loading libcudart and libcublas at run time.
// It blocks in the GPU for the length of the benchmark; ctx is checked
// between GPUs.
func (c *CUDA) Measure(ctx context.Context) ([]Measurement, error) {
	c.defaults()
	rt, tried := dlopenFirst(c.LibDirs, cudartNames)
	if rt == nil {
		return nil, fmt.Errorf("%w: libcudart: tried %s", ErrCUDANotFound, strings.Join(shortList(tried), "; "))
	}
	blas, tried := dlopenFirst(c.LibDirs, cublasNames)
	if blas == nil {
		return nil, fmt.Errorf("%w: libcublas: tried %s", ErrCUDANotFound, strings.Join(shortList(tried), "; "))
	}
	// Library handles stay open: unloading the CUDA runtime in a live
	// process is not safe, and dlopen is reference-counted on the next run.
	var fns C.gpb_cuda
	errBuf := (*C.char)(C.calloc(256, 1))
	defer C.free(unsafe.Pointer(errBuf))
	if C.gpb_load(rt, blas, &fns, errBuf, 256) != 0 {
		return nil, fmt.Errorf("%w: %s", ErrCUDANotFound, C.GoString(errBuf))
	}
	var n C.int
	if C.gpb_device_count(&fns, &n, errBuf, 256) != 0 {
		return nil, fmt.Errorf("cuda: %s", C.GoString(errBuf))
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: no GPUs")
	}
	bf16 := C.int(0)
	if c.DType == "bf16" {
		bf16 = 1
	}
	var out []Measurement
	for i := range int(n) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var tf, gbs C.double
		if C.gpb_bench(&fns, C.int(i), bf16, C.int(c.MatrixN), C.int(c.Iterations), C.size_t(c.CopyBytes),
			C.int(c.CopyIterations), &tf, &gbs, errBuf, 256) != 0 {
			return nil, fmt.Errorf("cuda GPU %d: %s", i, C.GoString(errBuf))
		}
		name := ""
		if c.Names != nil {
			name = c.Names[i]
		}
		out = append(out, Measurement{Index: i, Name: name, DType: c.DType, TFLOPS: round3(float64(tf)),
			BandwidthGBs: round3(float64(gbs)), MatrixN: c.MatrixN, Iterations: c.Iterations})
	}
	return out, nil
}

func shortList(s []string) []string {
	if len(s) > 6 {
		return append(s[:6:6], fmt.Sprintf("and %d more", len(s)-6))
	}
	return s
}
