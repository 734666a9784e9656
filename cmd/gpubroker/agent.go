package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/config"
	"github.com/gpubroker/gpubroker/agent/gpu"
)

// agentEnvPrefix prefixes the environment variable of each agent flag:
// --metadata-url is GPUBROKER_AGENT_METADATA_URL.
const agentEnvPrefix = "GPUBROKER_AGENT_"

type agentOptions struct {
	configFile   string
	cloud        string
	metadataURL  string
	vmName       string
	broker       string
	tokenFile    string
	stateDir     string
	pollInterval time.Duration
	safetyMargin time.Duration
	logLevel     string
	drainExec    []string
	drainSignal  []string
	drainHTTP    []string
	stepTimeout  time.Duration
}

func newAgentCmd() *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the in-VM agent: preemption notices, draining, GPU telemetry and benchmark",
		Long: `Run the agent inside a GPU VM. It watches the cloud's metadata service for
preemption and maintenance notices, drains the workload before the VM is taken
(signal, command and HTTP steps, in order, within the notice's deadline),
reports to the broker (spooling while it is unreachable), and sends GPU
telemetry and benchmark results.

Every flag can also be set through an environment variable: GPUBROKER_AGENT_
followed by the flag name in upper case with - as _ (GPUBROKER_AGENT_BROKER).
Repeated flags take newline-separated values from the environment. Flags and
environment override the config file. SIGUSR1 runs the GPU benchmark now.`,
		Example: `  gpubroker agent --broker https://broker:8443 --token-file /etc/gpubroker/agent-token \
      --drain-signal SIGTERM:/run/trainer.pid --drain-exec '/opt/train/checkpoint.sh'
  gpubroker agent --config /etc/gpubroker/agent.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyAgentEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return usageErr(err)
			}
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return usageErr(err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil && cfg.LogLevel != "" {
				return usageErr(fmt.Errorf("--log-level %q: want debug, info, warn or error", cfg.LogLevel))
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			bench := make(chan struct{}, 1)
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1)
			defer signal.Stop(usr1)
			go func() {
				for range usr1 {
					select {
					case bench <- struct{}{}:
					default:
					}
				}
			}()
			a, err := agent.New(agent.Options{Config: cfg, Logger: logger, Version: buildVersion(), BenchmarkNow: bench})
			if err != nil {
				return usageErr(err)
			}
			if err := a.Run(cmd.Context()); err != nil {
				return failErr(err)
			}
			return nil
		},
	}
	cmd.AddCommand(newAgentBenchmarkCmd())
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", "YAML config file (docs/agent.md)")
	f.StringVar(&o.cloud, "cloud", "", "cloud: aws, gcp, azure or auto (default auto)")
	f.StringVar(&o.metadataURL, "metadata-url", "", "metadata service base URL (default: the cloud's)")
	f.StringVar(&o.vmName, "vm-name", "", "Azure: this VM's resource name (default: read from IMDS)")
	f.StringVar(&o.broker, "broker", "", "broker base URL, e.g. https://broker.example:8443")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the bootstrap token for registering with the broker")
	f.StringVar(&o.stateDir, "state-dir", "", "directory for credentials and the report spool (default "+agent.DefaultStateDir+")")
	f.DurationVar(&o.pollInterval, "poll-interval", 0, "AWS/Azure metadata poll interval (default 500ms AWS, 1s Azure)")
	f.DurationVar(&o.safetyMargin, "safety-margin", 0, "end draining this long before the notice's deadline (default 5s)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error (default info)")
	f.StringArrayVar(&o.drainExec, "drain-exec", nil, "drain step: run this shell command (repeatable)")
	f.StringArrayVar(&o.drainSignal, "drain-signal", nil, "drain step: SIGNAL:PIDFILE, signal the process group and wait (repeatable)")
	f.StringArrayVar(&o.drainHTTP, "drain-http", nil, "drain step: POST the notice to this URL (repeatable)")
	f.DurationVar(&o.stepTimeout, "drain-step-timeout", 0, "timeout of each drain step given by flag (default 30s)")
	return cmd
}

// applyAgentEnv sets each flag not given on the command line from its
// environment variable.
func applyAgentEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err != nil || fl.Changed {
			return
		}
		name := agentEnvPrefix + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		vals := []string{v}
		if fl.Value.Type() == "stringArray" {
			vals = strings.Split(strings.TrimSpace(v), "\n")
		}
		for _, one := range vals {
			if serr := fs.Set(fl.Name, strings.TrimSpace(one)); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
				return
			}
		}
	})
	return err
}

// config reads the config file, then lets flags (and their environment
// variables) override it. Drain steps given by flag replace the file's.
func (o *agentOptions) config(fs *pflag.FlagSet) (config.Config, error) {
	var c config.Config
	if o.configFile != "" {
		var err error
		if c, err = config.Load(o.configFile); err != nil {
			return c, err
		}
	}
	set := func(name string, apply func()) {
		if fs.Changed(name) {
			apply()
		}
	}
	set("cloud", func() { c.Cloud = o.cloud })
	set("metadata-url", func() { c.MetadataURL = o.metadataURL })
	set("vm-name", func() { c.VMName = o.vmName })
	set("broker", func() { c.Broker = o.broker })
	set("token-file", func() { c.TokenFile = o.tokenFile })
	set("state-dir", func() { c.StateDir = o.stateDir })
	set("poll-interval", func() { c.PollInterval = o.pollInterval })
	set("safety-margin", func() { c.SafetyMargin = o.safetyMargin })
	set("log-level", func() { c.LogLevel = o.logLevel })
	if len(o.drainExec)+len(o.drainSignal)+len(o.drainHTTP) > 0 {
		// Order: signal the workload first, then commands, then HTTP.
		var steps []config.Step
		for _, v := range o.drainSignal {
			s, err := config.ParseSignalFlag(v)
			if err != nil {
				return c, err
			}
			steps = append(steps, s)
		}
		for _, v := range o.drainExec {
			if strings.TrimSpace(v) == "" {
				return c, fmt.Errorf("--drain-exec: empty command")
			}
			steps = append(steps, config.Step{Kind: "exec", Command: v})
		}
		for _, v := range o.drainHTTP {
			s, err := config.ParseHTTPFlag(v)
			if err != nil {
				return c, err
			}
			steps = append(steps, s)
		}
		for i := range steps {
			steps[i].Timeout = o.stepTimeout
		}
		c.Drain = steps
	}
	if c.Cloud != "" && c.Cloud != "auto" && c.Cloud != "aws" && c.Cloud != "gcp" && c.Cloud != "azure" {
		return c, fmt.Errorf("--cloud %q: want aws, gcp, azure or auto", c.Cloud)
	}
	// Flags get the config file's checks (a file is checked as it loads).
	for _, u := range []struct{ flag, v string }{{"metadata-url", o.metadataURL}, {"broker", o.broker}} {
		if fs.Changed(u.flag) && u.v != "" {
			if err := config.CheckURL(u.v); err != nil {
				return c, fmt.Errorf("--%s: %w", u.flag, err)
			}
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		r    [2]time.Duration
	}{{"poll-interval", o.pollInterval, config.PollIntervalRange}, {"safety-margin", o.safetyMargin, config.SafetyMarginRange}} {
		if fs.Changed(d.flag) {
			if err := config.CheckDuration(d.v, d.r); err != nil {
				return c, fmt.Errorf("--%s: %w", d.flag, err)
			}
		}
	}
	return c, nil
}

// buildVersion is the module version stamped by the Go toolchain. A build
// without VCS information says "(devel)", which the broker rejects as a
// label (parentheses), so it is reported as "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func newAgentBenchmarkCmd() *cobra.Command {
	var (
		configFile string
		b          config.Benchmark
	)
	cmd := &cobra.Command{
		Use:   "benchmark",
		Short: "Run the GPU benchmark once and print the result as JSON",
		Long: `Measure dense BF16/FP16 GEMM TFLOPS and device memory bandwidth on every GPU and
compare them with the spec table; print the result (the broker's BenchmarkReport,
docs/agent.md) on stdout. The CUDA runtime and cuBLAS are loaded at run time.`,
		Example: `  gpubroker agent benchmark
  gpubroker agent benchmark --method command --command '/opt/gpubench --json'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			if configFile != "" {
				c, err := config.Load(configFile)
				if err != nil {
					return usageErr(err)
				}
				file := c.Benchmark
				for name, apply := range map[string]func(){
					"method": func() { file.Method = b.Method }, "command": func() { file.Command = b.Command },
					"dtype": func() { file.DType = b.DType }, "cuda-lib-dir": func() { file.CUDALibDirs = b.CUDALibDirs },
					"timeout": func() { file.Timeout = b.Timeout },
				} {
					if fs.Changed(name) {
						apply()
					}
				}
				b = file
			}
			switch b.Method {
			case "", "auto", "cuda", "command":
			default:
				return usageErr(fmt.Errorf("--method %q: want auto, cuda or command", b.Method))
			}
			if b.DType != "" && b.DType != "bf16" && b.DType != "fp16" {
				return usageErr(fmt.Errorf("--dtype %q: want bf16 or fp16", b.DType))
			}
			if b.Method == "command" && b.Command == "" {
				return usageErr(fmt.Errorf("--method command needs --command"))
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			coll, err := gpu.OpenSystem()
			if err != nil {
				logger.Info("no GPU telemetry; GPU names unknown to the CUDA runner", "err", err)
				coll = nil
			} else {
				defer coll.Close()
			}
			res, err := agent.BenchmarkOnce(cmd.Context(), b, coll, time.Now)
			if err != nil {
				return failErr(err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "agent config file; its benchmark section is used")
	f.StringVar(&b.Method, "method", "", "auto, cuda or command (default: command if --command is set, else cuda)")
	f.StringVar(&b.Command, "command", "", "external benchmark printing gpubroker.benchmark/v1 JSON")
	f.StringVar(&b.DType, "dtype", "", "bf16 or fp16 (default bf16)")
	f.StringArrayVar(&b.CUDALibDirs, "cuda-lib-dir", nil, "directory searched for libcudart/libcublas first (repeatable)")
	f.DurationVar(&b.Timeout, "timeout", 0, "kill an external benchmark after this long (default 10m)")
	return cmd
}
