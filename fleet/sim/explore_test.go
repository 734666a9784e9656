package sim

import (
	"fmt"
	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	dir := "/work/shared/data/spot-traces/availability/1-node/"
	files := strings.Split(os.Getenv("EXPLORE"), ",")
	var trs []*Trace
	for _, f := range files {
		tr, err := LoadTrace(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	p, _ := NewPools(trs)
	c := Training{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: chg(), Prices: DefaultPrices, History: DefaultHistory}
	n := 100
	if os.Getenv("N") != "" {
		fmt.Sscan(os.Getenv("N"), &n)
	}
	starts, _ := Starts(c, p, n, 1)
	for _, pol := range strings.Split(os.Getenv("POLS"), ",") {
		runs, err := SimulateTraining(c, p, pol, starts)
		if err != nil {
			t.Fatal(err)
		}
		s := Summarize(pol, runs)
		fmt.Printf("%-18s mean %.4f p90 %.4f max %.4f miss %d spot %.1f od %.1f pre %.1f ch %.1f\n", pol, s.MeanCost, s.P90Cost, s.MaxCost, s.Misses, s.MeanSpotHours, s.MeanOnDemandHours, s.MeanPreemptions, s.MeanChangeovers)
	}
	if os.Getenv("OPT") != "" {
		t0 := time.Now()
		sum := 0.0
		for _, s := range starts {
			o, err := Optimum(c, p, s)
			if err != nil {
				t.Fatal(err)
			}
			sum += o / c.OnDemandCost()
		}
		fmt.Printf("optimum mean %.4f (%v)\n", sum/float64(len(starts)), time.Since(t0))
	}
}

func chg() time.Duration {
	if s := os.Getenv("CH"); s != "" {
		d, _ := time.ParseDuration(s)
		return d
	}
	return 12 * time.Minute
}

func TestSweep(t *testing.T) {
	if os.Getenv("SWEEP") == "" {
		t.Skip()
	}
	dir := "/work/shared/data/spot-traces/availability/1-node/"
	files := strings.Split(os.Getenv("SWEEP"), ",")
	c := Training{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: 12 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	type setup struct {
		p      *Pools
		starts []int
		up     float64
	}
	var sets []setup
	for _, f := range files {
		tr, _ := LoadTrace(filepath.Join(dir, f))
		p, _ := NewPools([]*Trace{tr})
		starts, _ := Starts(c, p, 300, 1)
		runs, _ := SimulateTraining(c, p, "uniform-progress", starts)
		sets = append(sets, setup{p, starts, Summarize("", runs).MeanCost})
	}
	for _, risk := range []float64{0.4} {
		for _, leave := range []float64{3} {
			for _, stop := range []float64{0, 1.01, 1.02, 1.03, 1.05} {
				cfg := spotpolicy.AdaptiveConfig{Risk: risk, LeaveOnDemand: leave, StopOnDemand: 15, CostCap: stop}
				line := fmt.Sprintf("risk %.1f leave %.0f cap %.2f:", risk, leave, stop)
				worst := 1.0
				for _, s := range sets {
					var runs []Run
					for _, st := range s.starts {
						r, _ := RunTraining(c, s.p, spotpolicy.NewAdaptive(cfg), st, false)
						runs = append(runs, r)
					}
					m := Summarize("", runs).MeanCost
					line += fmt.Sprintf(" %.4f(%.3f)", m, m/s.up)
					worst = min(worst, 1-m/s.up)
				}
				fmt.Printf("%s worst %.3f\n", line, worst)
			}
		}
	}
}

func TestInfExplore(t *testing.T) {
	if os.Getenv("INF") == "" {
		t.Skip()
	}
	dir := "/work/shared/data/spot-traces/availability/1-node/aws-02-15-2023/"
	ents, _ := os.ReadDir(dir)
	var trs []*Trace
	for _, e := range ents {
		tr, _ := LoadTrace(filepath.Join(dir, e.Name()))
		trs = append(trs, tr)
	}
	p, _ := NewPools(trs)
	c := Inference{Target: 4, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	for _, name := range []string{"on-demand", "spot-hedge", "adaptive"} {
		pol, _ := spotpolicy.NewInference(name)
		r, err := RunInference(c, p, pol, false)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%-12s at %.4f cost %.4f spot %.0f od %.0f pre %d longest %.2fh\n", name, r.AtTarget, r.Normalized, r.SpotHours, r.OnDemandHours, r.Preemptions, r.LongestShortfallH)
	}
	if os.Getenv("INF") == "sweep" {
		for _, extra := range []int{1, 2, 3} {
			for _, spare := range []int{0, 1} {
				for _, zones := range []int{0, 5, 6} {
					for _, risk := range []float64{0.001, 0.005, 0.02, 0.05} {
						cfg := spotpolicy.AdaptiveInferenceConfig{Extra: extra, Spare: spare, Zones: zones, Calm: 0, Fresh: 0, Risk: risk}
						r, _ := RunInference(c, p, spotpolicy.NewAdaptiveInference(cfg), false)
						fmt.Printf("sweep %+v at %.4f cost %.4f\n", cfg, r.AtTarget, r.Normalized)
					}
				}
			}
		}
	}
}

func TestSeeds(t *testing.T) {
	if os.Getenv("SEEDS") == "" {
		t.Skip()
	}
	tr, _ := LoadTrace("/work/shared/data/spot-traces/availability/1-node/" + os.Getenv("SEEDS"))
	p, _ := NewPools([]*Trace{tr})
	c := Training{Work: 48 * time.Hour, Deadline: 60 * time.Hour, Changeover: 12 * time.Minute, Prices: DefaultPrices, History: DefaultHistory}
	for seed := uint64(1); seed <= 12; seed++ {
		starts, _ := Starts(c, p, 100, seed)
		g, _ := SimulateTraining(c, p, "greedy", starts)
		u, _ := SimulateTraining(c, p, "uniform-progress", starts)
		a, _ := SimulateTraining(c, p, "adaptive", starts)
		opt := 0.0
		for _, s := range starts {
			o, _ := Optimum(c, p, s)
			opt += o / c.OnDemandCost() / float64(len(starts))
		}
		fmt.Printf("seed %2d greedy %.3f up %.3f adaptive %.3f opt %.3f\n", seed, Summarize("", g).MeanCost, Summarize("", u).MeanCost, Summarize("", a).MeanCost, opt)
	}
}
