//go:build !agentonly

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/optimizer/cbc"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

func newPlanCmd() *cobra.Command {
	var file, output, db, solverMode string
	var timeLimit time.Duration
	cmd := &cobra.Command{
		Use:   "plan -f FILE",
		Short: "Plan where each workload of a policy runs, and what it costs",
		Long: `Place every workload of a policy file on the cheapest capacity across AWS, GCP
and Azure that meets its deadline, quotas, budgets and spreading. Prices are the
catalog 'prices' shows: the embedded snapshot, overlaid region by region with what
'gpubroker catalog refresh' stored (--db, default the user data directory when it
exists). Shows per placement the expected cost with preemption
loss, the all-on-demand baseline, the savings, and why it won over the runner-up.

Exit codes: 0 plan printed, 1 some workload cannot be placed (the plan of the
rest is printed, with each blocked workload and the constraint that blocks it),
2 bad flags or a bad policy file (every error printed).`,
		Example: `  gpubroker plan -f examples/fleet.yaml
  gpubroker plan -f examples/fleet.yaml --output json
  gpubroker plan -f examples/fleet.yaml --db postgres://gpubroker@db/gpubroker
  gpubroker plan -f examples/fleet.yaml --solver exact --time-limit 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErr(errors.New("plan: -f FILE is required"))
			}
			if output != "table" && output != "json" {
				return usageErr(fmt.Errorf("--output %q: want table or json", output))
			}
			p, err := loadPolicy(cmd.InOrStdin(), file)
			if err != nil {
				var list policy.ErrorList
				if errors.As(err, &list) {
					for _, e := range list {
						fmt.Fprintln(cmd.ErrOrStderr(), e)
					}
					return usageErr(fmt.Errorf("%s: %d error(s)", file, len(list)))
				}
				return usageErr(err)
			}
			cat, st, err := pricesCatalog(cmd.Context(), db)
			if err != nil {
				return failErr(err)
			}
			if st != nil {
				defer st.Close()
			}
			in := optimizer.Input{Catalog: cat, Policy: p, Speeds: optimizer.DefaultSpeeds(), Now: time.Now().UTC().Truncate(time.Second)}
			switch solverMode {
			case optimizer.SolverHeuristic:
			case optimizer.SolverExact, optimizer.SolverAuto:
				in.Solver = solverMode
				ex, err := cbc.Find()
				if err != nil && solverMode == optimizer.SolverExact {
					return failErr(fmt.Errorf("--solver exact: %w", err))
				}
				if err == nil {
					ex.TimeLimit = timeLimit
					in.Exact = ex
				}
			default:
				return usageErr(fmt.Errorf("--solver %q: want heuristic, exact or auto", solverMode))
			}
			return runPlan(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), in, output)
		},
	}
	cmd.Flags().StringVar(&solverMode, "solver", optimizer.SolverHeuristic, "heuristic, exact (CBC, warm-started from the heuristic) or auto (exact when cbc is installed and the fleet is small)")
	cmd.Flags().DurationVar(&timeLimit, "time-limit", time.Minute, "time limit of each exact solver run (fleets of up to 300 workloads run two, one per search trajectory; docs/plan.md)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "policy file (YAML); - reads standard input")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().StringVar(&db, "db", "", "store to read refreshed prices from: a SQLite path, sqlite://PATH or postgres://... (default: the user data directory, if it exists)")
	return cmd
}

// runPlan plans and adds what the catalog cannot show: clouds and
// places the policy allows where it has no offers, and prices of unknown
// date. An infeasible workload never hides the rest: the plan of what could
// be placed is printed (with its blocked list), then exit code 1. When no
// plan at all is found, the notes go to errw before the error.
func runPlan(ctx context.Context, w, errw io.Writer, in optimizer.Input, output string) error {
	cat := in.Catalog
	notes := optimizer.CoverageNotes(cat, in.Policy)
	undated := 0
	for _, o := range cat.Offers() {
		if pricing.DateUnknown(o) {
			undated++
		}
	}
	if undated > 0 {
		notes = append(notes, fmt.Sprintf("%s of unknown date (%s); run 'gpubroker catalog refresh' for current prices",
			plural(undated, "price"), cat.Source))
	}
	plan, err := optimizer.SolveContext(ctx, in)
	if plan == nil || (err != nil && len(plan.Placements) == 0) {
		// Nothing placed: there is no plan to print, only why.
		for _, n := range notes {
			fmt.Fprintln(errw, "note:", n)
		}
		return failErr(err)
	}
	plan.Warnings = append(plan.Warnings, notes...)
	var werr error
	if output == "json" {
		werr = plan.WriteJSON(w)
	} else {
		werr = plan.WriteTable(w)
	}
	if err != nil {
		return failErr(err)
	}
	return werr
}
