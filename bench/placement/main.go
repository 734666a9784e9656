// Command placement compares gpubroker's placement heuristic with CBC on
// hard generated fleets (optimizer/hardgen) and prints, per size and seed,
// the generator's CPU time, the heuristic's wall and CPU time, CBC's time,
// both costs, CBC's status and best bound, and the gap. docs/BENCHMARKS.md records its output.
// -no-cbc runs the heuristic alone; -cpuprofile profiles its first solve.
//
//	go run ./bench/placement -n 2000,10000 -seeds 1 -cbc-time 600s
//	go run ./bench/placement -n 10000 -no-cbc -cpuprofile /tmp/heur.prof
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/internal/cputime"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/optimizer/cbc"
	"github.com/gpubroker/gpubroker/optimizer/hardgen"
	"github.com/gpubroker/gpubroker/pricing"
)

func main() {
	sizes := flag.String("n", "200,2000", "fleet sizes, comma separated")
	seeds := flag.Int("seeds", 1, "seeds per size")
	first := flag.Int("first-seed", 1, "first seed of each size (seeds first-seed .. seeds)")
	tight := flag.Float64("tightness", 0.6, "quota and budget tightness (hardgen)")
	limit := flag.Duration("cbc-time", 5*time.Minute, "CBC time limit")
	threads := flag.Int("threads", 1, "CBC threads")
	noCBC := flag.Bool("no-cbc", false, "run the heuristic only (CBC columns empty)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the heuristic's solves to this file")
	warm := flag.Bool("cbc-warm", false, "start CBC from the heuristic's plan (default: CBC alone, its time its own)")
	ratioGap := flag.Float64("cbc-gap", 0, "stop CBC once it proves its plan within this fraction of the optimum (0.001 = 0.1%; 0 = CBC's default)")
	cbcDir := flag.String("cbc-dir", "", "keep CBC's model, start and log (cbc.log) in this directory")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "placement:", err)
			os.Exit(1)
		}
		defer f.Close()
		prof = f
	}
	if err := run(*sizes, *first, *seeds, *tight, *limit, *threads, *noCBC, cbcOptions{warm: *warm, ratioGap: *ratioGap, dir: *cbcDir}); err != nil {
		fmt.Fprintln(os.Stderr, "placement:", err)
		os.Exit(1)
	}
}

// prof, when set, receives a CPU profile of the heuristic's solves only
// (generation and CBC excluded).
var prof io.Writer

// cbcOptions are the bench's CBC settings beyond time and threads.
type cbcOptions struct {
	warm     bool
	ratioGap float64
	dir      string
}

// recorder is the solver's exact solver for a warm-started run: it keeps
// the model and CBC's result so the bench can report CBC's own figures.
type recorder struct {
	ex    *cbc.Solver
	model *optimizer.Model
	res   optimizer.ExactResult
	took  time.Duration
}

func (r *recorder) SolveModel(ctx context.Context, m *optimizer.Model, start []int) (optimizer.ExactResult, error) {
	r.model = m
	t0 := time.Now()
	res, err := r.ex.SolveModel(ctx, m, start)
	r.res, r.took = res, time.Since(t0)
	return res, err
}

func run(sizes string, first, seeds int, tight float64, limit time.Duration, threads int, noCBC bool, co cbcOptions) error {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		return err
	}
	var ex *cbc.Solver
	if !noCBC {
		if ex, err = cbc.Find(); err != nil {
			return err
		}
		ex.TimeLimit, ex.Threads = limit, threads
		ex.RatioGap, ex.Dir = co.ratioGap, co.dir
		if co.dir != "" {
			if err := os.MkdirAll(co.dir, 0o755); err != nil {
				return err
			}
		}
	}
	fmt.Println("n\tseed\tgen_cpu_s\theur_s\theur_cpu_s\theur_cost\theur_bound\tcbc_s\tcbc_status\tcbc_cost\tcbc_bound\tgap_vs_cbc_%\theur_gap_vs_best_bound_%")
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-n %q: %w", f, err)
		}
		for seed := first; seed <= seeds; seed++ {
			g0 := cputime.Process()
			p, err := hardgen.Generate(cat, n, uint64(seed), hardgen.Options{Tightness: tight})
			if err != nil {
				return err
			}
			gc := cputime.Process() - g0
			now := cat.GeneratedAt.Add(time.Hour)
			if prof != nil {
				if err := pprof.StartCPUProfile(prof); err != nil {
					return err
				}
			}
			t0, c0 := time.Now(), cputime.Process()
			h, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now})
			ht, hc := time.Since(t0), cputime.Process()-c0
			if prof != nil {
				pprof.StopCPUProfile()
				prof = nil // one profile: the first solve
			}
			heurNote := ""
			if err != nil {
				// A plan that leaves workloads out is reported (its cost
				// counts only what it placed) and CBC still runs: whether
				// the instance is feasible, and CBC's bound, are the
				// comparison's other half.
				var ie *optimizer.InfeasibleError
				if !errors.As(err, &ie) || h == nil {
					return fmt.Errorf("heuristic n=%d seed=%d: %w", n, seed, err)
				}
				heurNote = fmt.Sprintf(" (%d left out)", len(ie.Blocked))
				fmt.Fprintf(os.Stderr, "heuristic n=%d seed=%d: %v\n", n, seed, err)
			}
			if ex == nil {
				fmt.Printf("%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f%s\t%.2f\t\t\t\t\t\t%.3f\n", len(p.Workloads), seed, gc.Seconds(), ht.Seconds(), hc.Seconds(), h.Totals.ExpectedCost, heurNote,
					h.Bound.LowerBound, 100*(h.Totals.ExpectedCost-h.Bound.LowerBound)/h.Bound.LowerBound)
				continue
			}
			var (
				m   *optimizer.Model
				res optimizer.ExactResult
				ct  time.Duration
			)
			if co.warm {
				// CBC started from the heuristic's plan (the solver's
				// exact mode, which runs the heuristic again first); the
				// time is CBC's alone.
				rec := &recorder{ex: ex}
				if _, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now, Solver: optimizer.SolverExact, Exact: rec}); err != nil {
					var ie *optimizer.InfeasibleError
					if !errors.As(err, &ie) {
						return fmt.Errorf("cbc warm n=%d seed=%d: %w", n, seed, err)
					}
				}
				if rec.model == nil {
					return fmt.Errorf("cbc warm n=%d seed=%d: the solver did not run CBC", n, seed)
				}
				m, res, ct = rec.model, rec.res, rec.took
			} else {
				// CBC alone: the model built by the solver, no warm
				// start, so its time is CBC's own.
				if m, err = optimizer.BuildModel(optimizer.Input{Catalog: cat, Policy: p, Now: now}); err != nil {
					return err
				}
				t1 := time.Now()
				res, err = ex.SolveModel(context.Background(), m, nil)
				ct = time.Since(t1)
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					// CBC 2.10.8 aborts on some models (a Clp assertion
					// on options priced 10⁹ times the cheapest): the row
					// says so and the run goes on.
					fmt.Fprintf(os.Stderr, "cbc n=%d seed=%d: %v\n", n, seed, err)
					res.Status = "error"
				}
			}
			cbcCost, gap := 0.0, 0.0
			if res.Choice != nil {
				cbcCost = m.Cost(res.Choice)
				gap = 100 * (h.Totals.ExpectedCost - cbcCost) / cbcCost
			}
			best := max(h.Bound.LowerBound, res.BestBound)
			if res.Status == optimizer.ExactOptimal {
				best = cbcCost
			}
			fmt.Printf("%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f%s\t%.2f\t%.1f\t%s\t%.2f\t%.2f\t%.3f\t%.3f\n", len(p.Workloads), seed, gc.Seconds(), ht.Seconds(), hc.Seconds(), h.Totals.ExpectedCost, heurNote,
				h.Bound.LowerBound, ct.Seconds(), res.Status, cbcCost, res.BestBound, gap, 100*(h.Totals.ExpectedCost-best)/best)
		}
	}
	return nil
}
