//go:build !agentonly

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// simPriceOptions are the price flags shared by both simulations.
type simPriceOptions struct {
	traces       []string
	onDemand     float64
	spot         float64
	instanceType string
	region       string
	output       string
	plot         string
	history      time.Duration
	// progressTo receives "still simulating" lines on long runs (stderr);
	// progressEvery is how often (default 5s).
	progressTo    io.Writer
	progressEvery time.Duration
}

func (o *simPriceOptions) register(f *pflag.FlagSet) {
	f.StringSliceVar(&o.traces, "trace", nil, "availability trace files, one spot pool (zone) each: JSON as in spot-traces or CSV seconds,available (repeat or comma-separate); a directory adds every trace file under it")
	f.Float64Var(&o.onDemand, "on-demand-price", sim.DefaultPrices.OnDemand, "on-demand USD per instance-hour")
	f.Float64Var(&o.spot, "spot-price", sim.DefaultPrices.Spot, "spot USD per instance-hour")
	f.StringVar(&o.instanceType, "instance-type", "", "take prices from the embedded catalog for this instance type (e.g. p3.2xlarge) unless the price flags are given")
	f.StringVar(&o.region, "region", "us-east-1", "region glob for --instance-type")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.history, "history", sim.DefaultHistory, "how much of the trace before a start the policies may see")
}

// load reads the traces and settles the prices.
func (o *simPriceOptions) load(f *pflag.FlagSet) (*sim.Pools, sim.Prices, error) {
	if o.output != "table" && o.output != "json" {
		return nil, sim.Prices{}, usageErr(fmt.Errorf("--output %q: want table or json", o.output))
	}
	if len(o.traces) == 0 {
		return nil, sim.Prices{}, usageErr(errors.New("--trace: give at least one trace file"))
	}
	var traces []*sim.Trace
	for _, path := range o.traces {
		ts, err := sim.LoadTraces(path)
		if err != nil {
			return nil, sim.Prices{}, usageErr(err)
		}
		traces = append(traces, ts...)
	}
	pools, err := sim.NewPools(traces)
	if err != nil {
		return nil, sim.Prices{}, usageErr(err)
	}
	prices := sim.Prices{OnDemand: o.onDemand, Spot: o.spot}
	if o.instanceType != "" {
		// The snapshot alone (no store): a simulation replays recorded
		// traces and must give the same answer on every machine.
		cat, err := catalog.Load(context.Background(), nil)
		if err != nil {
			return nil, prices, failErr(err)
		}
		od, sp, n := 0.0, 0.0, 0
		for _, off := range cat.Query(pricing.Query{Regions: []string{o.region}}) {
			if off.InstanceType != o.instanceType {
				continue
			}
			if off.OnDemandPrice > 0 && od == 0 {
				od = off.OnDemandPrice
			}
			if off.SpotPrice > 0 {
				sp += off.SpotPrice
				n++
			}
		}
		if od == 0 || n == 0 {
			return nil, prices, usageErr(fmt.Errorf("--instance-type %s --region %s: the catalog has no on-demand and spot price for it; give --on-demand-price and --spot-price", o.instanceType, o.region))
		}
		if !f.Changed("on-demand-price") {
			prices.OnDemand = od
		}
		if !f.Changed("spot-price") {
			prices.Spot = sp / float64(n) // mean over the region's zones
		}
	}
	if prices.OnDemand <= 0 || prices.Spot < 0 {
		return nil, prices, usageErr(errors.New("prices: --on-demand-price must be positive and --spot-price not negative"))
	}
	return pools, prices, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSimulateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Replay spot availability traces against the spot policies",
		Long: `Replay real spot availability traces (each file one spot pool: a zone, region or cloud)
against gpubroker's spot policies, to see what they cost and whether they keep deadlines
and service. See docs/simulate.md.`,
	}
	cmd.AddCommand(newSimulateTrainingCmd(), newSimulateInferenceCmd(), newSimulateFleetCmd())
	return cmd
}

type simTrainingOptions struct {
	simPriceOptions
	work, deadline, changeover time.Duration
	checkpoint                 time.Duration
	policies                   []string
	starts                     int
	seed                       uint64
	optimum                    bool
	plotStart                  int
	plotPolicy                 string
}

func newSimulateTrainingCmd() *cobra.Command {
	var o simTrainingOptions
	cmd := &cobra.Command{
		Use:   "training",
		Short: "Simulate a training job with a deadline over random start points",
		Example: `  gpubroker simulate training --trace ../shared/data/spot-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json \
      --work 48h --deadline 60h --changeover 12m --starts 300 --optimum
  gpubroker simulate training --trace a.json,b.json,c.json --policy adaptive --plot run.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pools, prices, err := o.load(cmd.Flags())
			if err != nil {
				return err
			}
			o.progressTo = cmd.ErrOrStderr()
			return runSimulateTraining(cmd.OutOrStdout(), pools, prices, o)
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.DurationVar(&o.work, "work", 48*time.Hour, "compute the job needs")
	f.DurationVar(&o.deadline, "deadline", 60*time.Hour, "time from start by which the work must be done")
	f.DurationVar(&o.changeover, "changeover", 12*time.Minute, "time lost each time an instance starts (provisioning, loading the checkpoint)")
	f.DurationVar(&o.checkpoint, "checkpoint", 0, "work between checkpoints; a preemption loses the work since the last one (0 = saved continuously)")
	f.StringSliceVar(&o.policies, "policy", spotpolicy.TrainingPolicies(), "policies to compare: "+strings.Join(spotpolicy.TrainingPolicies(), ", "))
	f.IntVar(&o.starts, "starts", 300, "random start points")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the start points")
	f.BoolVar(&o.optimum, "optimum", false, "also compute the exact offline optimum of every start (slow with many pools)")
	f.StringVar(&o.plot, "plot", "", "write an SVG timeline of one run to this file")
	f.StringVar(&o.plotPolicy, "plot-policy", spotpolicy.DefaultTraining, "policy of the plotted run")
	f.IntVar(&o.plotStart, "plot-start", -1, "start tick of the plotted run (default: the first random start)")
	return cmd
}

func runSimulateTraining(w io.Writer, pools *sim.Pools, prices sim.Prices, o simTrainingOptions) error {
	c := sim.Training{Work: o.work, Deadline: o.deadline, Changeover: o.changeover, Checkpoint: o.checkpoint, Prices: prices, History: o.history}
	for _, p := range o.policies {
		if _, err := spotpolicy.NewTraining(p); err != nil {
			return usageErr(fmt.Errorf("--policy: %w", err))
		}
	}
	if len(o.policies) == 0 {
		return usageErr(errors.New("--policy: give at least one policy"))
	}
	what := fmt.Sprintf("%s × %s", plural(o.starts, "start"), plural(len(o.policies), "policy"))
	if o.optimum {
		what += " with the exact optimum"
	}
	var rep sim.TrainingReport
	err := withProgress(o.progressTo, o.progressEvery, what,
		func() (err error) {
			rep, err = sim.BuildTrainingReport(c, pools, o.policies, o.starts, o.seed, o.optimum)
			return err
		})
	if err != nil {
		if errors.Is(err, sim.ErrSetting) || errors.Is(err, sim.ErrTooLarge) {
			return usageErr(err)
		}
		return failErr(err)
	}
	if o.plot != "" {
		start := o.plotStart
		if start < 0 {
			starts, _ := sim.Starts(c, pools, 1, o.seed)
			start = starts[0]
		}
		pol, err := spotpolicy.NewTraining(o.plotPolicy)
		if err != nil {
			return usageErr(fmt.Errorf("--plot-policy: %w", err))
		}
		run, err := sim.RunTraining(c, pools, pol, start, true)
		if err != nil {
			return usageErr(fmt.Errorf("--plot-start: %w", err))
		}
		if err := writeFile(o.plot, func(f io.Writer) error { return sim.WriteTrainingSVG(f, c, pools, run, o.plotPolicy) }); err != nil {
			return failErr(err)
		}
	}
	if o.output == "json" {
		return writeJSON(w, rep)
	}
	return rep.WriteTable(w)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing chart %s: %w", path, err)
	}
	return f.Close()
}

type simInferenceOptions struct {
	simPriceOptions
	target       int
	readyDelay   time.Duration
	policies     []string
	frontier     bool
	frontierPlot string
	timeline     string
	start        int
	duration     time.Duration
	goal         float64
}

func newSimulateInferenceCmd() *cobra.Command {
	var o simInferenceOptions
	cmd := &cobra.Command{
		Use:   "inference",
		Short: "Simulate an inference service keeping a target of ready replicas on spot",
		Example: `  gpubroker simulate inference --trace ../shared/data/spot-traces/availability/1-node/aws-02-15-2023/*.json \
      --target 4 --ready-delay 10m
  gpubroker simulate inference --trace ... --frontier --plot frontier.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pools, prices, err := o.load(cmd.Flags())
			if err != nil {
				return err
			}
			o.progressTo = cmd.ErrOrStderr()
			return runSimulateInference(cmd.OutOrStdout(), pools, prices, o)
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.IntVar(&o.target, "target", 4, "ready replicas to keep")
	f.DurationVar(&o.readyDelay, "ready-delay", 10*time.Minute, "time from launching a replica to it serving")
	f.StringSliceVar(&o.policies, "policy", spotpolicy.InferencePolicies(), "policies to compare: "+strings.Join(spotpolicy.InferencePolicies(), ", "))
	f.BoolVar(&o.frontier, "frontier", false, "also sweep the adaptive policy's knobs and report the availability–cost frontier")
	// --plot means what it means for training: an SVG timeline of one run.
	f.StringVar(&o.plot, "plot", "", "write an SVG timeline of one run (the default policy: zones, replicas, ready against target) to this file")
	f.StringVar(&o.frontierPlot, "frontier-plot", "", "write an SVG chart of the availability–cost frontier to this file (implies --frontier)")
	f.StringVar(&o.timeline, "timeline", "", "same as --plot")
	_ = f.MarkDeprecated("timeline", "use --plot (the run's timeline, as for simulate training)")
	f.IntVar(&o.start, "start-tick", 0, "first tick of the traces to simulate (in ticks of the finest trace where they differ)")
	f.DurationVar(&o.duration, "duration", 0, "how long to simulate (0 = to the end of the traces)")
	f.Float64Var(&o.goal, "goal", policy.DefaultAvailabilityGoal, "availability goal (share of time at target) whose error budget over the run the policies are told; 0 for none")
	return cmd
}

func runSimulateInference(w io.Writer, pools *sim.Pools, prices sim.Prices, o simInferenceOptions) error {
	c := sim.Inference{Target: o.target, ReadyDelay: o.readyDelay, Prices: prices, History: o.history, Start: o.start, Duration: o.duration, Goal: o.goal}
	for _, p := range o.policies {
		if _, err := spotpolicy.NewInference(p); err != nil {
			return usageErr(fmt.Errorf("--policy: %w", err))
		}
	}
	if o.timeline != "" && o.plot == "" {
		o.plot = o.timeline
	}
	var rep sim.InferenceReport
	err := withProgress(o.progressTo, o.progressEvery, fmt.Sprintf("%s × %s", plural(len(o.policies), "policy"), plural(len(pools.Traces), "zone")),
		func() (err error) { rep, err = sim.BuildInferenceReport(c, pools, o.policies); return err })
	if err != nil {
		if errors.Is(err, sim.ErrSetting) {
			return usageErr(err)
		}
		return failErr(err)
	}
	if o.frontier || o.frontierPlot != "" {
		var pts []sim.FrontierPoint
		err := withProgress(o.progressTo, o.progressEvery, fmt.Sprintf("frontier sweep of %s", plural(len(sim.FrontierConfigs()), "setting")),
			func() (err error) { pts, err = sim.Frontier(c, pools, sim.FrontierConfigs()); return err })
		if err != nil {
			return failErr(err)
		}
		rep.Frontier = sim.ParetoFront(pts)
		if o.frontierPlot != "" {
			var refs []sim.FrontierPoint
			for _, r := range rep.Policies {
				refs = append(refs, sim.FrontierPoint{Label: r.Policy, Cost: r.Normalized, AtTarget: r.AtTarget})
			}
			title := fmt.Sprintf("Inference on %d zones, target %d, ready delay %g min: the adaptive policy's knobs", len(pools.Traces), o.target, o.readyDelay.Minutes())
			if err := writeFile(o.frontierPlot, func(f io.Writer) error { return sim.WriteFrontierSVG(f, title, pts, refs) }); err != nil {
				return failErr(err)
			}
		}
	}
	if o.plot != "" {
		pol, _ := spotpolicy.NewInference(spotpolicy.DefaultInference)
		res, err := sim.RunInference(c, pools, pol, true)
		if err != nil {
			return usageErr(err)
		}
		if err := writeFile(o.plot, func(f io.Writer) error { return sim.WriteInferenceSVG(f, c, pools, res) }); err != nil {
			return failErr(err)
		}
	}
	if o.output == "json" {
		return writeJSON(w, rep)
	}
	return rep.WriteTable(w)
}

// withProgress runs fn and, while it runs longer than every, writes a line
// to w each time that passes, so a long simulation (many starts, the exact
// optimum, a frontier sweep) shows it is working and for how long. Short
// runs print nothing.
func withProgress(w io.Writer, every time.Duration, what string, fn func() error) error {
	if w == nil {
		return fn()
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "simulate: still working on %s (%s elapsed)\n", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	err := fn()
	close(done)
	<-finished
	if d := time.Since(start); d >= every {
		fmt.Fprintf(w, "simulate: %s done in %s\n", what, d.Round(100*time.Millisecond))
	}
	return err
}
