package sim

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

// TraceInfo describes a replayed trace.
type TraceInfo struct {
	Name       string `json:"name"`
	Ticks      int    `json:"ticks"`
	GapSeconds int    `json:"gap_seconds"`
	// MeasuredGapSeconds is the file's tick where it differs from the
	// simulation's (the trace was resampled to the finest tick of the set).
	MeasuredGapSeconds int     `json:"measured_gap_seconds,omitempty"`
	Availability       float64 `json:"availability"`
}

// Infos describes the pools' traces.
func (p *Pools) Infos() []TraceInfo {
	out := make([]TraceInfo, len(p.Traces))
	for i, t := range p.Traces {
		out[i] = TraceInfo{Name: t.Name, Ticks: len(t.Avail), GapSeconds: t.Gap, MeasuredGapSeconds: t.Measured, Availability: round(t.Fraction(), 4)}
	}
	return out
}

func (t TraceInfo) resampled() string {
	if t.MeasuredGapSeconds == 0 {
		return ""
	}
	return fmt.Sprintf(" (resampled from %d s)", t.MeasuredGapSeconds)
}

// OptimumSummary is the exact optimum over the same starts.
type OptimumSummary struct {
	MeanCost float64 `json:"mean_cost_vs_on_demand"`
	P90Cost  float64 `json:"p90_cost_vs_on_demand"`
	// LowerBound is set when checkpoints are not continuous: the optimum
	// then ignores the work preemptions lose, so it is a lower bound.
	LowerBound bool `json:"lower_bound,omitempty"`
}

// TrainingReport is the output of `gpubroker simulate training`.
type TrainingReport struct {
	Traces          []TraceInfo     `json:"traces"`
	WorkHours       float64         `json:"work_hours"`
	DeadlineHours   float64         `json:"deadline_hours"`
	ChangeoverHours float64         `json:"changeover_hours"`
	CheckpointHours float64         `json:"checkpoint_hours,omitempty"`
	OnDemandPrice   float64         `json:"on_demand_usd_per_hour"`
	SpotPrice       float64         `json:"spot_usd_per_hour"`
	Starts          int             `json:"starts"`
	Seed            uint64          `json:"seed"`
	OnDemandCostUSD float64         `json:"on_demand_cost_usd"`
	Policies        []Summary       `json:"policies"`
	Optimum         *OptimumSummary `json:"optimum,omitempty"`
}

// BuildTrainingReport simulates every policy over the same starts and, with
// optimum, the exact optimum too.
func BuildTrainingReport(c Training, p *Pools, policies []string, nStarts int, seed uint64, optimum bool) (TrainingReport, error) {
	starts, err := Starts(c, p, nStarts, seed)
	if err != nil {
		return TrainingReport{}, err
	}
	r := TrainingReport{Traces: p.Infos(), WorkHours: c.Work.Hours(), DeadlineHours: c.Deadline.Hours(),
		ChangeoverHours: c.Changeover.Hours(), CheckpointHours: c.Checkpoint.Hours(), OnDemandPrice: c.Prices.OnDemand, SpotPrice: c.Prices.Spot,
		Starts: nStarts, Seed: seed, OnDemandCostUSD: round(c.OnDemandCost(), 4)}
	if optimum {
		costs := make([]float64, len(starts))
		mean := 0.0
		for i, s := range starts {
			o, err := Optimum(c, p, s)
			if err != nil {
				return TrainingReport{}, err
			}
			costs[i] = o / c.OnDemandCost()
			mean += costs[i]
		}
		sort.Float64s(costs)
		r.Optimum = &OptimumSummary{MeanCost: round(mean/float64(len(costs)), 4), P90Cost: round(quantile(costs, 0.9), 4), LowerBound: c.Checkpoint > 0}
	}
	for _, name := range policies {
		runs, err := SimulateTraining(c, p, name, starts)
		if err != nil {
			return TrainingReport{}, err
		}
		s := Summarize(name, runs)
		if r.Optimum != nil && r.Optimum.MeanCost > 0 {
			s.VsOptimum = s.MeanCost / r.Optimum.MeanCost
		}
		r.Policies = append(r.Policies, s.rounded())
	}
	return r, nil
}

func round(f float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if f < 0 {
		return -float64(int64(-f*p+0.5)) / p
	}
	return float64(int64(f*p+0.5)) / p
}

func (s Summary) rounded() Summary {
	s.MeanCost, s.P90Cost, s.MaxCost = round(s.MeanCost, 4), round(s.P90Cost, 4), round(s.MaxCost, 4)
	s.MeanCostUSD = round(s.MeanCostUSD, 2)
	s.MeanSpotHours, s.MeanOnDemandHours = round(s.MeanSpotHours, 2), round(s.MeanOnDemandHours, 2)
	s.MeanPreemptions, s.MeanChangeovers, s.MeanLostHours = round(s.MeanPreemptions, 2), round(s.MeanChangeovers, 2), round(s.MeanLostHours, 3)
	s.VsOptimum = round(s.VsOptimum, 4)
	return s
}

// WriteTable writes the report for people.
func (r TrainingReport) WriteTable(w io.Writer) error {
	ckpt := "continuous checkpoints"
	if r.CheckpointHours > 0 {
		ckpt = fmt.Sprintf("checkpoint every %.4g h of work", r.CheckpointHours)
	}
	fmt.Fprintf(w, "Training: %.4g h of work, deadline %.4g h, changeover %.4g h, %s; on-demand $%.4g/h, spot $%.4g/h; %d starts (seed %d)\n",
		r.WorkHours, r.DeadlineHours, r.ChangeoverHours, ckpt, r.OnDemandPrice, r.SpotPrice, r.Starts, r.Seed)
	for _, t := range r.Traces {
		fmt.Fprintf(w, "  pool %-28s %d ticks of %d s%s, spot available %.1f%% of the time\n", t.Name, t.Ticks, t.GapSeconds, t.resampled(), t.Availability*100)
	}
	fmt.Fprintf(w, "Costs are fractions of on-demand only ($%.2f per job).\n\n", r.OnDemandCostUSD)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POLICY\tMEAN\tP90\tMAX\tMISSES\tSPOT H\tON-DEMAND H\tPREEMPTIONS\tCHANGEOVERS\tVS OPTIMUM\t")
	for _, s := range r.Policies {
		vs := "-"
		if s.VsOptimum > 0 {
			vs = fmt.Sprintf("%.3f", s.VsOptimum)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", s.Policy, s.MeanCost, s.P90Cost, s.MaxCost, s.Misses,
			s.MeanSpotHours, s.MeanOnDemandHours, s.MeanPreemptions, s.MeanChangeovers, vs)
	}
	if r.Optimum != nil {
		name := "exact optimum"
		if r.Optimum.LowerBound {
			name = "optimum (lower bound)"
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t\t\t\t\t\t\t1.000\t\n", name, r.Optimum.MeanCost, r.Optimum.P90Cost)
	}
	return tw.Flush()
}

// InferenceReport is the output of `gpubroker simulate inference`.
type InferenceReport struct {
	Traces            []TraceInfo `json:"traces"`
	Target            int         `json:"target"`
	ReadyDelayMinutes float64     `json:"ready_delay_minutes"`
	OnDemandPrice     float64     `json:"on_demand_usd_per_hour"`
	SpotPrice         float64     `json:"spot_usd_per_hour"`
	// Goal is the availability goal whose error budget the policies were
	// told (Inference.Goal); 0 for none.
	Goal     float64           `json:"availability_goal,omitempty"`
	Policies []InferenceResult `json:"policies"`
	Frontier []FrontierPoint   `json:"frontier,omitempty"`
}

// BuildInferenceReport runs each inference policy over the whole traces.
func BuildInferenceReport(c Inference, p *Pools, policies []string) (InferenceReport, error) {
	r := InferenceReport{Traces: p.Infos(), Target: c.Target, ReadyDelayMinutes: c.ReadyDelay.Minutes(),
		OnDemandPrice: c.Prices.OnDemand, SpotPrice: c.Prices.Spot, Goal: c.Goal}
	for _, name := range policies {
		pol, err := spotpolicy.NewInference(name)
		if err != nil {
			return r, err
		}
		res, err := RunInference(c, p, pol, false)
		if err != nil {
			return r, err
		}
		res.AtTarget, res.Normalized, res.Cost = round(res.AtTarget, 5), round(res.Normalized, 4), round(res.Cost, 2)
		res.SpotHours, res.OnDemandHours, res.Hours = round(res.SpotHours, 1), round(res.OnDemandHours, 1), round(res.Hours, 2)
		res.MeanReady, res.LongestShortfallH = round(res.MeanReady, 3), round(res.LongestShortfallH, 3)
		r.Policies = append(r.Policies, res)
	}
	return r, nil
}

// WriteTable writes the report for people.
func (r InferenceReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Inference: target %d ready replicas, ready delay %.4g min; on-demand $%.4g/h, spot $%.4g/h; %d zones\n",
		r.Target, r.ReadyDelayMinutes, r.OnDemandPrice, r.SpotPrice, len(r.Traces))
	for _, t := range r.Traces {
		if t.MeasuredGapSeconds > 0 {
			fmt.Fprintf(w, "  zone %-28s %d ticks of %d s%s\n", t.Name, t.Ticks, t.GapSeconds, t.resampled())
		}
	}
	if r.Goal > 0 {
		fmt.Fprintf(w, "Availability goal %.4g%% of the run at target: the policies hedge harder as its error budget runs low.\n", r.Goal*100)
	}
	fmt.Fprintf(w, "Costs are fractions of %d on-demand replicas.\n\n", r.Target)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POLICY\tAT TARGET\tCOST\tSPOT REPLICA-H\tON-DEMAND REPLICA-H\tPREEMPTIONS\tLAUNCHES\tLONGEST BELOW (H)\t")
	for _, s := range r.Policies {
		fmt.Fprintf(tw, "%s\t%.3f%%\t%.3f\t%.0f\t%.0f\t%d\t%d\t%.2f\t\n", s.Policy, s.AtTarget*100, s.Normalized, s.SpotHours, s.OnDemandHours, s.Preemptions, s.Launches, s.LongestShortfallH)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Frontier) > 0 {
		fmt.Fprintln(w, "\nAvailability–cost frontier of the adaptive policy's knobs:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KNOBS\tAT TARGET\tCOST\t")
		for _, f := range r.Frontier {
			fmt.Fprintf(tw, "%s\t%.3f%%\t%.3f\t\n", f.Label, f.AtTarget*100, f.Cost)
		}
		return tw.Flush()
	}
	return nil
}

// FrontierConfigs are the knob settings the frontier sweeps.
func FrontierConfigs() []spotpolicy.AdaptiveInferenceConfig {
	var out []spotpolicy.AdaptiveInferenceConfig
	for extra := 0; extra <= 3; extra++ {
		for spare := 0; spare <= 2; spare++ {
			for _, risk := range []float64{0, 0.005, 0.02, 0.05, 0.1} {
				d := spotpolicy.DefaultAdaptiveInferenceConfig()
				out = append(out, spotpolicy.AdaptiveInferenceConfig{Extra: extra, Spare: spare, Risk: risk,
					Budget: d.Budget, Ample: d.Ample})
			}
		}
	}
	return out
}

// Frontier runs the adaptive inference policy with each config.
func Frontier(c Inference, p *Pools, cfgs []spotpolicy.AdaptiveInferenceConfig) ([]FrontierPoint, error) {
	var out []FrontierPoint
	for _, cfg := range cfgs {
		res, err := RunInference(c, p, spotpolicy.NewAdaptiveInference(cfg), false)
		if err != nil {
			return nil, err
		}
		out = append(out, FrontierPoint{Label: fmt.Sprintf("extra=%d spare=%d risk=%g", cfg.Extra, cfg.Spare, cfg.Risk),
			Cost: round(res.Normalized, 4), AtTarget: round(res.AtTarget, 5)})
	}
	return out, nil
}
