//go:build !agentonly

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/fleet/fleetsim"
)

type simFleetOptions struct {
	file       string
	traces     string
	days       float64
	seed       uint64
	output     string
	chart      string
	readyDelay time.Duration
	tick       time.Duration
	spotScale  int
	// progressTo receives "still simulating" lines (stderr).
	progressTo    io.Writer
	progressEvery time.Duration
}

func newSimulateFleetCmd() *cobra.Command {
	var o simFleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Run the whole fleet controller in virtual time against trace-driven fake clouds",
		Long: `Run the fleet controller (optimizer, reconciler, autoscaling, spend ledger) in virtual time
on the embedded catalog, with every spot pool replaying a trace file of --traces (each pool draws one
trace and a start offset from --seed), and report per workload and in total: cost against the
all-on-demand cost of the same work, deadline misses, time at target, launches, preemptions,
migrations and cloud API calls. See docs/simulate.md.`,
		Example: `  gpubroker simulate fleet -f policy.yaml --traces ../shared/data/spot-traces/availability/1-node/aws-02-15-2023 --days 30
  gpubroker simulate fleet -f policy.yaml --traces traces/ --days 7 --seed 3 --output json --chart spend.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.progressTo = cmd.ErrOrStderr()
			return runSimulateFleet(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "policy file (YAML); - reads standard input")
	f.StringVar(&o.traces, "traces", "", "directory of availability trace files (.json as in spot-traces, .csv seconds,available), read recursively")
	f.Float64Var(&o.days, "days", 30, "simulated days")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the trace each spot pool draws and its start offset")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.StringVar(&o.chart, "chart", "", "write an SVG chart of spend and replicas over time to this file")
	f.DurationVar(&o.readyDelay, "ready-delay", 5*time.Minute, "time from an instance running to its agent registering")
	f.DurationVar(&o.tick, "tick", 10*time.Minute, "longest time between two reconcile passes (the policy tick)")
	f.IntVar(&o.spotScale, "spot-scale", 1, "multiply the traces' instance counts (for fleets larger than the traces measured)")
	return cmd
}

func runSimulateFleet(ctx context.Context, stdin io.Reader, w io.Writer, o simFleetOptions) error {
	switch {
	case o.output != "table" && o.output != "json":
		return usageErr(fmt.Errorf("--output %q: want table or json", o.output))
	case o.file == "":
		return usageErr(errors.New("-f/--file: give the policy file to simulate"))
	case o.traces == "":
		return usageErr(errors.New("--traces: give a directory of trace files"))
	case !(o.days > 0 && o.days <= 366):
		return usageErr(fmt.Errorf("--days %v: want more than 0 and at most 366", o.days))
	case o.readyDelay <= 0 || o.readyDelay >= 14*time.Minute:
		return usageErr(fmt.Errorf("--ready-delay %s: want more than 0 and under 14m (the boot timeout is 15m)", o.readyDelay))
	case o.tick < time.Minute:
		return usageErr(fmt.Errorf("--tick %s: want at least 1m", o.tick))
	case o.spotScale < 1:
		return usageErr(fmt.Errorf("--spot-scale %d: want 1 or more", o.spotScale))
	}
	pol, err := loadPolicy(stdin, o.file)
	if err != nil {
		return usageErr(err)
	}
	traces, err := fleetsim.LoadTraceDir(o.traces)
	if err != nil {
		return usageErr(fmt.Errorf("--traces: %w", err))
	}
	// The embedded snapshot alone (no store): a simulation replays recorded
	// traces and must give the same answer on every machine.
	cat, err := catalog.Load(ctx, nil)
	if err != nil {
		return failErr(err)
	}
	s, err := fleetsim.New(fleetsim.Config{Policy: pol, Catalog: cat, Traces: traces, Seed: o.seed,
		Duration: time.Duration(o.days * float64(24*time.Hour)), ReadyDelay: o.readyDelay, Tick: o.tick, SpotScale: o.spotScale})
	if err != nil {
		return usageErr(err)
	}
	// A batch run: trade memory for less garbage collection.
	defer fleetsim.BatchGC()()
	var rep *fleetsim.Report
	what := fmt.Sprintf("%s × %g days", plural(len(pol.Workloads), "workload"), o.days)
	if err := withProgress(o.progressTo, o.progressEvery, what, func() (err error) {
		rep, err = s.Run(ctx)
		return err
	}); err != nil {
		return failErr(err)
	}
	if o.chart != "" {
		title := fmt.Sprintf("gpubroker simulate fleet: %s, %g days, seed %d", o.file, o.days, o.seed)
		if err := writeFile(o.chart, func(f io.Writer) error { return rep.WriteSVG(f, title) }); err != nil {
			return failErr(err)
		}
	}
	if o.output == "json" {
		return writeJSON(w, rep)
	}
	return rep.WriteTable(w)
}
