package pricing

import (
	"sort"
	"strings"

	"github.com/gpubroker/gpubroker/internal/suggest"
)

// GPUModel is a canonical GPU name such as "A100-80GB". Cloud-specific names
// ("nvidia-tesla-a100", "A100" with 80 GiB) are mapped onto these by
// NormalizeGPU.
type GPUModel string

// Canonical GPU models.
const (
	T4      GPUModel = "T4"
	L4      GPUModel = "L4"
	A10G    GPUModel = "A10G"
	A10     GPUModel = "A10"
	L40S    GPUModel = "L40S"
	P4      GPUModel = "P4"
	P100    GPUModel = "P100"
	V100    GPUModel = "V100"
	V100_32 GPUModel = "V100-32GB"
	A100_40 GPUModel = "A100-40GB"
	A100_80 GPUModel = "A100-80GB"
	H100    GPUModel = "H100"
	H200    GPUModel = "H200"
	B200    GPUModel = "B200"
	B300    GPUModel = "B300"
	GB200   GPUModel = "GB200"
	MI300X  GPUModel = "MI300X"
	// RTXPro6000 is the RTX PRO 6000 Blackwell Server Edition.
	RTXPro6000 GPUModel = "RTX-PRO-6000"
)

// GPUSpec is the public spec sheet of one GPU model. Figures are per GPU.
type GPUSpec struct {
	Model GPUModel
	// Family groups models for quotas ("A100" covers both memory sizes).
	Family string
	// MemoryGiB is device memory.
	MemoryGiB float64
	// TensorTFLOPS is dense (no sparsity) BF16 tensor throughput, or FP16
	// where the GPU has no BF16 (T4, V100) or no tensor cores (P100).
	TensorTFLOPS float64
	// MemoryBandwidthGBs is device memory bandwidth in GB/s.
	MemoryBandwidthGBs float64
	// Source names the public document the figures come from.
	Source string
	// Vendor is the GPU maker: "NVIDIA" or "AMD".
	Vendor string
}

// specs is the spec table. Each row cites the vendor document its figures
// come from; all tensor figures are the dense (non-sparse) ones.
var specs = []GPUSpec{
	// NVIDIA T4 datasheet: 16 GB GDDR6, 65 TFLOPS mixed-precision FP16, 320 GB/s.
	{T4, "T4", 16, 65, 320, "NVIDIA T4 Tensor Core GPU datasheet", "NVIDIA"},
	// NVIDIA L4 datasheet: 24 GB, 242 TFLOPS FP16/BF16 with sparsity (121 dense), 300 GB/s.
	{L4, "L4", 24, 121, 300, "NVIDIA L4 Tensor Core GPU datasheet", "NVIDIA"},
	// AWS G5 (A10G): 24 GB, 600 GB/s; NVIDIA publishes no A10G datasheet. The
	// A10G is an A10 variant with lower tensor clocks; 70 TFLOPS dense BF16 is
	// the figure AWS partners quote and what matmul benchmarks on g5 reach.
	{A10G, "A10", 24, 70, 600, "AWS EC2 G5 instance page (24 GB, 600 GB/s); tensor figure from g5 benchmarks", "NVIDIA"},
	// NVIDIA A10 datasheet: 24 GB GDDR6, 125 TFLOPS BF16 dense (250 sparse), 600 GB/s.
	{A10, "A10", 24, 125, 600, "NVIDIA A10 Tensor Core GPU datasheet", "NVIDIA"},
	// NVIDIA L40S datasheet: 48 GB GDDR6, 362.05 TFLOPS BF16 dense (733 sparse), 864 GB/s.
	{L40S, "L40S", 48, 362, 864, "NVIDIA L40S datasheet", "NVIDIA"},
	// NVIDIA Tesla P4 datasheet: 8 GB GDDR5, 192 GB/s, 5.5 TFLOPS FP32; no
	// tensor cores and FP16 at a fraction of FP32, so FP32 is the figure.
	{P4, "P4", 8, 5.5, 192, "NVIDIA Tesla P4 datasheet (FP32; no tensor cores)", "NVIDIA"},
	// NVIDIA Tesla P100 PCIe datasheet: 16 GB HBM2, 18.7 TFLOPS FP16 (no tensor cores), 732 GB/s.
	{P100, "P100", 16, 18.7, 732, "NVIDIA Tesla P100 PCIe datasheet", "NVIDIA"},
	// NVIDIA Tesla V100 SXM2 datasheet: 16/32 GB HBM2, 125 TFLOPS FP16 tensor, 900 GB/s.
	{V100, "V100", 16, 125, 900, "NVIDIA Tesla V100 datasheet (SXM2)", "NVIDIA"},
	{V100_32, "V100", 32, 125, 900, "NVIDIA Tesla V100 datasheet (SXM2, 32 GB)", "NVIDIA"},
	// NVIDIA A100 datasheet: 312 TFLOPS BF16 dense; 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s (SXM).
	{A100_40, "A100", 40, 312, 1555, "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB)", "NVIDIA"},
	{A100_80, "A100", 80, 312, 2039, "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)", "NVIDIA"},
	// NVIDIA H100 datasheet (SXM5): 80 GB HBM3, 989 TFLOPS BF16 dense (1,979 sparse), 3.35 TB/s.
	{H100, "H100", 80, 989, 3350, "NVIDIA H100 Tensor Core GPU datasheet (SXM5)", "NVIDIA"},
	// NVIDIA H200 datasheet (SXM): 141 GB HBM3e, 989 TFLOPS BF16 dense, 4.8 TB/s.
	{H200, "H200", 141, 989, 4800, "NVIDIA H200 Tensor Core GPU datasheet (SXM)", "NVIDIA"},
	// NVIDIA HGX B200 datasheet: 8 GPUs with 1,440 GB HBM3e (180 GB each),
	// 36 PFLOPS FP16/BF16 with sparsity per 8 GPUs (2,250 dense per GPU),
	// 8 TB/s per GPU.
	{B200, "B200", 180, 2250, 8000, "NVIDIA HGX B200 datasheet (per GPU, dense BF16)", "NVIDIA"},
	// NVIDIA HGX B300 datasheet: 2.3 TB HBM3e per 8 GPUs (288 GB each), the
	// same 36 PFLOPS sparse FP16/BF16 per 8 GPUs as B200, 8 TB/s per GPU.
	{B300, "B300", 288, 2250, 8000, "NVIDIA HGX B300 datasheet (per GPU, dense BF16)", "NVIDIA"},
	// NVIDIA GB200 NVL72 datasheet: 72 GPUs with 13.4 TB HBM3e (186 GB each),
	// 360 PFLOPS sparse FP16/BF16 (2,500 dense per GPU), 576 TB/s (8 TB/s per GPU).
	{GB200, "GB200", 186, 2500, 8000, "NVIDIA GB200 NVL72 datasheet (per Blackwell GPU, dense BF16)", "NVIDIA"},
	// AMD Instinct MI300X data sheet: 192 GB HBM3, 1,307.4 TFLOPS peak BF16
	// dense, 5.3 TB/s.
	{MI300X, "MI300X", 192, 1307.4, 5300, "AMD Instinct MI300X accelerator data sheet", "AMD"},
	// NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 96 GB GDDR7,
	// 1,597 GB/s; FP16/BF16 tensor with FP32 accumulate 503.8 dense (1,007.6
	// with sparsity).
	{RTXPro6000, "RTX-PRO-6000", 96, 503.8, 1597, "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet", "NVIDIA"},
}

// Spec returns the spec of a canonical GPU model.
func Spec(m GPUModel) (GPUSpec, bool) {
	for _, s := range specs {
		if s.Model == m {
			return s, true
		}
	}
	return GPUSpec{}, false
}

// Specs returns the whole spec table, ordered from smallest to largest tensor
// throughput. The slice is a copy.
func Specs() []GPUSpec {
	out := append([]GPUSpec(nil), specs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].TensorTFLOPS < out[j].TensorTFLOPS })
	return out
}

// GPUModels lists the canonical model names in spec-table order.
func GPUModels() []GPUModel {
	out := make([]GPUModel, len(specs))
	for i, s := range specs {
		out[i] = s.Model
	}
	return out
}

// aliases maps lower-cased cloud and colloquial names onto canonical models.
// Names whose memory size decides the model ("A100", "V100") are resolved by
// NormalizeGPU with the memory figure.
var aliases = map[string]GPUModel{
	"t4": T4, "nvidia-tesla-t4": T4, "tesla t4": T4,
	"l4": L4, "nvidia-l4": L4,
	"a10g": A10G,
	"a10":  A10, "nvidia-a10": A10,
	"l40s": L40S, "nvidia-l40s": L40S,
	"p4": P4, "nvidia-tesla-p4": P4,
	"p100": P100, "nvidia-tesla-p100": P100,
	"v100": V100, "nvidia-tesla-v100": V100, "v100-16gb": V100,
	"v100-32gb": V100_32,
	"a100":      A100_40, "a100-40gb": A100_40, "nvidia-tesla-a100": A100_40,
	"a100-80gb": A100_80, "nvidia-a100-80gb": A100_80,
	"h100": H100, "h100-80gb": H100, "h100-mega": H100, "nvidia-h100-80gb": H100, "nvidia-h100-mega-80gb": H100,
	"h200": H200, "h200-141gb": H200, "nvidia-h200-141gb": H200,
	"b200": B200, "nvidia-b200": B200, "b200-180gb": B200,
	"b300": B300, "nvidia-b300": B300, "nvidia-b300-288gb": B300,
	"gb200": GB200, "nvidia-gb200": GB200,
	"h100-plus": H100,
	"mi300x":    MI300X, "amd-mi300x": MI300X, "instinct-mi300x": MI300X,
	"rtx-pro-6000": RTXPro6000, "rtxpro6000": RTXPro6000, "rtx pro 6000": RTXPro6000,
	"nvidia-rtx-pro-6000": RTXPro6000, "rtx-pro-6000-blackwell": RTXPro6000,
}

// NormalizeGPU maps a cloud's GPU name onto a canonical model. memoryMiB, when
// known (>0), disambiguates names clouds share across memory sizes: AWS calls
// both A100 sizes "A100", and V100s come in 16 and 32 GB.
func NormalizeGPU(name string, memoryMiB int) (GPUModel, bool) {
	m, ok := aliases[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return "", false
	}
	switch {
	case m == A100_40 && memoryMiB >= 70*1024:
		m = A100_80
	case m == V100 && memoryMiB >= 30*1024:
		m = V100_32
	}
	return m, true
}

// ParseGPUModel resolves a user-written GPU name (case-insensitive canonical
// name or a known alias). It does not guess memory sizes: "A100" means the
// 40 GB model, as NVIDIA first shipped it.
func ParseGPUModel(name string) (GPUModel, bool) {
	for _, s := range specs {
		if strings.EqualFold(string(s.Model), name) {
			return s.Model, true
		}
	}
	return NormalizeGPU(name, 0)
}

// SuggestGPU returns the canonical model closest to a misspelt name, or ""
// when none is close. Policy and CLI errors use it for "did you mean".
func SuggestGPU(name string) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = string(s.Model)
	}
	return suggest.Closest(name, names, max(2, len(name)/3))
}
