package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"syscall"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// Measurement is what a benchmark measured on one GPU.
type Measurement struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// DType of the matrix multiply: "bf16" or "fp16".
	DType string `json:"dtype"`
	// TFLOPS achieved by a dense N×N×N GEMM (2·N³ flops per multiply).
	TFLOPS float64 `json:"tflops"`
	// BandwidthGBs is device memory bandwidth (bytes read + written per
	// second, 1 GB = 1e9 bytes); 0 when not measured.
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	MatrixN      int     `json:"matrix_n,omitempty"`
	Iterations   int     `json:"iterations,omitempty"`
	// Extra is free-form detail from an external benchmark (clocks, tool
	// version); passed through to the broker.
	Extra json.RawMessage `json:"extra,omitempty"`
}

// Runner measures every GPU on the machine.
type Runner interface {
	// Method names the way of measuring ("cuda-dlopen", "command").
	Method() string
	Measure(ctx context.Context) ([]Measurement, error)
}

// GPUResult compares one GPU's measurement with its spec.
type GPUResult struct {
	Measurement
	Model            pricing.GPUModel `json:"model,omitempty"`
	SpecTFLOPS       float64          `json:"spec_tflops,omitempty"`
	SpecBandwidthGBs float64          `json:"spec_bandwidth_gbs,omitempty"`
	// Ratios are measured ÷ spec; 0 when the model or figure is unknown.
	TFLOPSRatio    float64 `json:"tflops_ratio,omitempty"`
	BandwidthRatio float64 `json:"bandwidth_ratio,omitempty"`
	// BelowSpec is set when a ratio is under the Result's threshold: the GPU
	// is throttled, misconfigured or sharing.
	BelowSpec bool `json:"below_spec"`
}

// Result is a whole benchmark run, as reported to the broker.
type Result struct {
	Time      time.Time   `json:"time"`
	Method    string      `json:"method"`
	Duration  float64     `json:"duration_s"`
	Threshold float64     `json:"below_spec_threshold"`
	GPUs      []GPUResult `json:"gpus"`
}

// DefaultThreshold: well-tuned GEMMs reach 60-80% of the datasheet's dense
// tensor figure and a copy kernel 80-90% of the memory bandwidth; under 50%
// something is wrong.
const DefaultThreshold = 0.5

// Compare matches measurements with the spec table. The model comes from
// the measurement's name (memory size from telemetry, if given, decides
// between memory variants).
func Compare(ms []Measurement, memoryMiB map[int]uint64, threshold float64) []GPUResult {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	out := make([]GPUResult, 0, len(ms))
	for _, m := range ms {
		r := GPUResult{Measurement: m}
		if model, ok := ModelFromName(m.Name, memoryMiB[m.Index]); ok {
			r.Model = model
			if spec, ok := pricing.Spec(model); ok {
				r.SpecTFLOPS, r.SpecBandwidthGBs = spec.TensorTFLOPS, spec.MemoryBandwidthGBs
				r.TFLOPSRatio = round3(m.TFLOPS / spec.TensorTFLOPS)
				if m.BandwidthGBs > 0 {
					r.BandwidthRatio = round3(m.BandwidthGBs / spec.MemoryBandwidthGBs)
				}
				r.BelowSpec = r.TFLOPSRatio < threshold || (m.BandwidthGBs > 0 && r.BandwidthRatio < threshold)
			}
		}
		out = append(out, r)
	}
	return out
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Run measures with r and compares with the spec.
func Run(ctx context.Context, r Runner, memoryMiB map[int]uint64, threshold float64, now func() time.Time) (Result, error) {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	start := now()
	ms, err := r.Measure(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("benchmark (%s): %w", r.Method(), err)
	}
	return Result{
		Time: start, Method: r.Method(), Duration: round3(now().Sub(start).Seconds()),
		Threshold: threshold, GPUs: Compare(ms, memoryMiB, threshold),
	}, nil
}

// Schema is the value of "schema" in an external benchmark's output.
const Schema = "gpubroker.benchmark/v1"

// output is the JSON an external benchmark command prints on stdout.
type output struct {
	Schema string        `json:"schema"`
	GPUs   []Measurement `json:"gpus"`
}

// ErrBadOutput marks benchmark output that does not follow the schema.
var ErrBadOutput = errors.New("bad benchmark output")

// ParseOutput parses and checks an external benchmark's JSON output
// (schema in docs/agent.md). Errors name the line and column.
func ParseOutput(b []byte) ([]Measurement, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var o output
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadOutput, jsonErrorAt(b, dec, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: more than one JSON value", ErrBadOutput, position(b, dec.InputOffset()))
	}
	if o.Schema != Schema {
		return nil, fmt.Errorf("%w: schema is %q, want %q", ErrBadOutput, o.Schema, Schema)
	}
	if len(o.GPUs) == 0 {
		return nil, fmt.Errorf("%w: no GPUs measured (\"gpus\" is empty)", ErrBadOutput)
	}
	seen := map[int]bool{}
	for i, m := range o.GPUs {
		where := fmt.Sprintf("gpus[%d]", i)
		switch {
		case m.Index < 0 || seen[m.Index]:
			return nil, fmt.Errorf("%w: %s: index %d is negative or repeated", ErrBadOutput, where, m.Index)
		case m.Name == "":
			return nil, fmt.Errorf("%w: %s: name is empty; want the NVML device name, e.g. \"NVIDIA H100 80GB HBM3\"", ErrBadOutput, where)
		case m.DType != "bf16" && m.DType != "fp16":
			return nil, fmt.Errorf("%w: %s: dtype %q, want \"bf16\" or \"fp16\"", ErrBadOutput, where, m.DType)
		case !(m.TFLOPS > 0) || math.IsInf(m.TFLOPS, 0) || m.TFLOPS > 1e5:
			return nil, fmt.Errorf("%w: %s: tflops %v, want a positive number of TFLOPS", ErrBadOutput, where, m.TFLOPS)
		case !(m.BandwidthGBs >= 0) || math.IsInf(m.BandwidthGBs, 0) || m.BandwidthGBs > 1e6:
			return nil, fmt.Errorf("%w: %s: bandwidth_gbs %v, want GB/s >= 0", ErrBadOutput, where, m.BandwidthGBs)
		case m.MatrixN < 0 || m.Iterations < 0:
			return nil, fmt.Errorf("%w: %s: matrix_n and iterations must not be negative", ErrBadOutput, where)
		}
		seen[m.Index] = true
	}
	return o.GPUs, nil
}

func jsonErrorAt(b []byte, dec *json.Decoder, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return position(b, se.Offset-1) + ": " + se.Error()
	case errors.As(err, &te):
		return position(b, te.Offset-1) + ": " + te.Error()
	}
	return position(b, dec.InputOffset()) + ": " + err.Error()
}

// position turns a byte offset into "line:col" (1-based).
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%d:%d", line, col)
}

// Command runs an external benchmark program that prints the JSON in
// docs/agent.md ("schema": "gpubroker.benchmark/v1") on stdout.
type Command struct {
	// Command is run with /bin/sh -c.
	Command string
	// Timeout kills the program (and its process group) when it overruns
	// (default 10 minutes).
	Timeout time.Duration
}

// Method implements Runner.
func (c *Command) Method() string { return "command" }

// Measure implements Runner.
func (c *Command) Measure(ctx context.Context) ([]Measurement, error) {
	to := c.Timeout
	if to <= 0 {
		to = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", c.Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout limitedBuffer
	var stderr limitedBuffer
	stdout.max, stderr.max = 1<<20, 4<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("benchmark command overran %v and was killed", to)
		}
		return nil, fmt.Errorf("benchmark command failed: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return ParseOutput(stdout.Bytes())
}

// limitedBuffer keeps the first max bytes written and discards the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
