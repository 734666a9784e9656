// Package config reads the agent's YAML configuration file. Decoding is
// strict: unknown keys, wrong types and bad values are errors that name the
// file, line and column, and say what would be right.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/agent/drain"
)

// Config is the agent's configuration. Zero values mean "use the default"
// (documented in docs/agent.md).
type Config struct {
	Cloud             string        // aws, gcp, azure or auto
	MetadataURL       string        // metadata service base URL
	VMName            string        // Azure resource name (default: from IMDS)
	PollInterval      time.Duration // AWS and Azure poll interval
	Broker            string        // broker base URL; empty = no broker
	TokenFile         string        // bootstrap token file
	StateDir          string        // credentials and spool
	HeartbeatInterval time.Duration
	SafetyMargin      time.Duration // drain deadline = notice deadline - margin
	LogLevel          string        // debug, info, warn, error
	Drain             []Step
	EarlyDrain        EarlyDrain
	Benchmark         Benchmark
	Progress          Progress
}

// Progress configures where the agent reads its job's progress
// (docs/agent.md, "Progress").
type Progress struct {
	File     string        // JSON file the job rewrites; empty = none
	Interval time.Duration // how often the file is checked (default 30s)
}

// Step is one drain step as configured.
type Step struct {
	Kind          string // "signal", "exec" or "http"
	Signal        string // signal name, e.g. SIGTERM
	PIDFile       string
	Command       string
	URL           string
	Timeout       time.Duration
	KillOnTimeout bool
}

// EarlyDrain configures the gentle drain run on warnings.
type EarlyDrain struct {
	On    []string // notice kinds: rebalance, maintenance
	Steps []Step
}

// Benchmark configures the GPU benchmark.
type Benchmark struct {
	OnStart     *bool  // default true
	Method      string // auto (default), cuda, command, off
	Command     string
	Timeout     time.Duration
	DType       string // bf16 (default) or fp16
	CUDALibDirs []string
	Threshold   float64
}

// Clouds accepted by Cloud.
var Clouds = []string{"auto", "aws", "gcp", "azure"}

// EarlyKinds accepted in early_drain.on.
var EarlyKinds = []string{"rebalance", "maintenance"}

// Load reads and parses a config file.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, b)
}

// ErrInvalid wraps every problem found in a config file.
var ErrInvalid = errors.New("invalid agent config")

// Parse parses config text; name is used in error positions.
func Parse(name string, b []byte) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrInvalid, name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	d := &decoder{file: name}
	var c Config
	if len(root.Content) == 0 {
		return c, nil // empty file: all defaults
	}
	d.mapping(root.Content[0], map[string]func(*yaml.Node){
		"cloud":              func(n *yaml.Node) { c.Cloud = d.oneOf(n, Clouds) },
		"metadata_url":       func(n *yaml.Node) { c.MetadataURL = d.url(n) },
		"vm_name":            func(n *yaml.Node) { c.VMName = d.str(n) },
		"poll_interval":      func(n *yaml.Node) { c.PollInterval = d.duration(n, PollIntervalRange[0], PollIntervalRange[1]) },
		"broker":             func(n *yaml.Node) { c.Broker = d.url(n) },
		"token_file":         func(n *yaml.Node) { c.TokenFile = d.str(n) },
		"state_dir":          func(n *yaml.Node) { c.StateDir = d.str(n) },
		"heartbeat_interval": func(n *yaml.Node) { c.HeartbeatInterval = d.duration(n, time.Second, time.Hour) },
		"safety_margin":      func(n *yaml.Node) { c.SafetyMargin = d.duration(n, SafetyMarginRange[0], SafetyMarginRange[1]) },
		"log_level":          func(n *yaml.Node) { c.LogLevel = d.oneOf(n, []string{"debug", "info", "warn", "error"}) },
		"drain":              func(n *yaml.Node) { c.Drain = d.steps(n) },
		"early_drain": func(n *yaml.Node) {
			d.mapping(n, map[string]func(*yaml.Node){
				"on": func(n *yaml.Node) {
					for _, it := range d.seq(n) {
						c.EarlyDrain.On = append(c.EarlyDrain.On, d.oneOf(it, EarlyKinds))
					}
				},
				"steps": func(n *yaml.Node) { c.EarlyDrain.Steps = d.steps(n) },
			})
		},
		"progress": func(n *yaml.Node) {
			d.mapping(n, map[string]func(*yaml.Node){
				"file":     func(n *yaml.Node) { c.Progress.File = d.str(n) },
				"interval": func(n *yaml.Node) { c.Progress.Interval = d.duration(n, time.Second, time.Hour) },
			})
		},
		"benchmark": func(n *yaml.Node) {
			d.mapping(n, map[string]func(*yaml.Node){
				"on_start": func(n *yaml.Node) { v := d.boolean(n); c.Benchmark.OnStart = &v },
				"method":   func(n *yaml.Node) { c.Benchmark.Method = d.oneOf(n, []string{"auto", "cuda", "command", "off"}) },
				"command":  func(n *yaml.Node) { c.Benchmark.Command = d.str(n) },
				"timeout":  func(n *yaml.Node) { c.Benchmark.Timeout = d.duration(n, time.Second, 2*time.Hour) },
				"dtype":    func(n *yaml.Node) { c.Benchmark.DType = d.oneOf(n, []string{"bf16", "fp16"}) },
				"cuda_lib_dirs": func(n *yaml.Node) {
					for _, it := range d.seq(n) {
						c.Benchmark.CUDALibDirs = append(c.Benchmark.CUDALibDirs, d.str(it))
					}
				},
				"threshold": func(n *yaml.Node) { c.Benchmark.Threshold = d.float(n, 0, 1) },
			})
		},
	})
	if c.Benchmark.Method == "command" && c.Benchmark.Command == "" {
		d.errs = append(d.errs, fmt.Errorf("%s: benchmark.method is command but benchmark.command is empty; set the command that prints the benchmark JSON", name))
	}
	if len(d.errs) > 0 {
		return Config{}, fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(d.errs...))
	}
	return c, nil
}

type decoder struct {
	file string
	errs []error
}

func (d *decoder) errf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("%s:%d:%d: %s", d.file, n.Line, n.Column, fmt.Sprintf(format, args...)))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

func (d *decoder) mapping(n *yaml.Node, fields map[string]func(*yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.errf(n, "got %s, want a mapping of keys to values", kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fields[k.Value]
		switch {
		case !ok:
			d.errf(k, "unknown key %q; known keys: %s", k.Value, keys(fields))
		case seen[k.Value]:
			d.errf(k, "key %q repeated", k.Value)
		default:
			seen[k.Value] = true
			f(v)
		}
	}
}

func keys(m map[string]func(*yaml.Node)) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func (d *decoder) scalar(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errf(n, "got %s, want a single value", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node) string {
	s, _ := d.scalar(n)
	return s
}

func (d *decoder) seq(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.errf(n, "got %s, want a list", kindName(n))
		return nil
	}
	return n.Content
}

func (d *decoder) oneOf(n *yaml.Node, allowed []string) string {
	s, ok := d.scalar(n)
	if !ok {
		return ""
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	d.errf(n, "%q is not allowed; want one of %s", s, strings.Join(allowed, ", "))
	return ""
}

func (d *decoder) url(n *yaml.Node) string {
	s, ok := d.scalar(n)
	if !ok || s == "" {
		return s
	}
	if err := CheckURL(s); err != nil {
		d.errf(n, "%v", err)
		return ""
	}
	return s
}

// Ranges of the durations the file and the flags accept alike.
var (
	PollIntervalRange = [2]time.Duration{10 * time.Millisecond, time.Minute}
	SafetyMarginRange = [2]time.Duration{0, 10 * time.Minute}
)

// CheckURL checks a broker or metadata URL: http(s) with a host.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL; want e.g. http://127.0.0.1:8080", s)
	}
	return nil
}

// CheckDuration checks v against an inclusive range.
func CheckDuration(v time.Duration, r [2]time.Duration) error {
	if v < r[0] || v > r[1] {
		return fmt.Errorf("%s is out of range; want %v to %v", v, r[0], r[1])
	}
	return nil
}

func (d *decoder) duration(n *yaml.Node, lo, hi time.Duration) time.Duration {
	s, ok := d.scalar(n)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.errf(n, "%q is not a duration; want e.g. 500ms, 30s or 2m", s)
		return 0
	}
	if v < lo || v > hi {
		d.errf(n, "%s is out of range; want %v to %v", s, lo, hi)
		return 0
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node) bool {
	s, ok := d.scalar(n)
	if !ok {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		d.errf(n, "%q is not true or false", s)
	}
	return v
}

func (d *decoder) float(n *yaml.Node, lo, hi float64) float64 {
	s, ok := d.scalar(n)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < lo || v > hi {
		d.errf(n, "%q is not a number from %v to %v", s, lo, hi)
		return 0
	}
	return v
}

func (d *decoder) steps(n *yaml.Node) []Step {
	var out []Step
	for _, it := range d.seq(n) {
		var s Step
		kinds := 0
		d.mapping(it, map[string]func(*yaml.Node){
			"signal": func(n *yaml.Node) {
				kinds++
				s.Kind, s.Signal = "signal", d.str(n)
				if _, err := drain.ParseSignal(s.Signal); err != nil {
					d.errf(n, "%v", err)
				}
			},
			"pid_file":        func(n *yaml.Node) { s.PIDFile = d.str(n) },
			"exec":            func(n *yaml.Node) { kinds++; s.Kind, s.Command = "exec", d.str(n) },
			"http":            func(n *yaml.Node) { kinds++; s.Kind, s.URL = "http", d.url(n) },
			"timeout":         func(n *yaml.Node) { s.Timeout = d.duration(n, 10*time.Millisecond, time.Hour) },
			"kill_on_timeout": func(n *yaml.Node) { s.KillOnTimeout = d.boolean(n) },
		})
		if it.Kind != yaml.MappingNode {
			continue
		}
		switch {
		case kinds != 1:
			d.errf(it, "a drain step needs exactly one of signal, exec or http")
		case s.Kind == "signal" && s.PIDFile == "":
			d.errf(it, "a signal step needs pid_file: the file holding the workload's PID")
		case s.Kind != "signal" && s.PIDFile != "":
			d.errf(it, "pid_file belongs to signal steps only")
		case s.Kind == "exec" && strings.TrimSpace(s.Command) == "":
			d.errf(it, "exec needs a command")
		}
		out = append(out, s)
	}
	return out
}

// ParseSignalFlag parses a --drain-signal value "SIG:PIDFILE".
func ParseSignalFlag(v string) (Step, error) {
	sig, pidFile, ok := strings.Cut(v, ":")
	if !ok || pidFile == "" {
		return Step{}, fmt.Errorf("--drain-signal %q: want SIGNAL:PIDFILE, e.g. SIGTERM:/run/trainer.pid", v)
	}
	if _, err := drain.ParseSignal(sig); err != nil {
		return Step{}, fmt.Errorf("--drain-signal %q: %w", v, err)
	}
	return Step{Kind: "signal", Signal: sig, PIDFile: pidFile}, nil
}

// ParseHTTPFlag parses a --drain-http value.
func ParseHTTPFlag(v string) (Step, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Step{}, fmt.Errorf("--drain-http %q: want an http(s) URL, e.g. http://127.0.0.1:8080/drain", v)
	}
	return Step{Kind: "http", URL: v}, nil
}
