// A stand-in for libcudart and libcublas, built by the tests with gcc, so the
// dlopen path, the prototypes and the arithmetic are exercised without a GPU.
// Timings are fixed: each GEMM batch "takes" 100 ms in BF16 and 200 ms in
// FP16, each copy batch 100 ms.
#include <stdlib.h>
#include <string.h>

static int last_dtype = 0;
static int last_kind = 0; // 1 gemm, 2 copy

int cudaGetDeviceCount(int *n) { *n = 2; return 0; }
int cudaSetDevice(int d) { return d < 2 ? 0 : 101; }
int cudaMalloc(void **p, size_t n) { *p = malloc(n); return *p ? 0 : 2; }
int cudaFree(void *p) { free(p); return 0; }
int cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return 0; }
int cudaMemcpy(void *d, const void *s, size_t n, int kind) {
	if (kind != 3) return 21; // cudaErrorInvalidMemcpyDirection
	memcpy(d, s, n);
	last_kind = 2;
	return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
int cudaEventCreate(void **e) { *e = malloc(1); return 0; }
int cudaEventRecord(void *e, void *s) { (void)e; (void)s; return 0; }
int cudaEventSynchronize(void *e) { (void)e; return 0; }
int cudaEventElapsedTime(float *ms, void *a, void *b) {
	(void)a; (void)b;
	if (last_kind == 1) *ms = last_dtype == 14 ? 100.0f : 200.0f;
	else *ms = 100.0f;
	return 0;
}
int cudaEventDestroy(void *e) { free(e); return 0; }
const char *cudaGetErrorString(int rc) { (void)rc; return "fake cuda error"; }
int cublasCreate_v2(void **h) { *h = malloc(1); return 0; }
int cublasDestroy_v2(void *h) { free(h); return 0; }
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo) {
	(void)h; (void)A; (void)B; (void)C; (void)algo;
	if (ta != 0 || tb != 0 || m != n || n != k || lda != m || ldb != k || ldc != m) return 7;
	if (at != bt || bt != ct || (at != 2 && at != 14) || compute != 68) return 7;
	if (*(const float *)alpha != 1.0f || *(const float *)beta != 0.0f) return 7;
	last_dtype = at;
	last_kind = 1;
	return 0;
}
