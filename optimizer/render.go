package optimizer

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the plan as indented JSON, the documented stable form
// (docs/plan.schema.json).
func (p *Plan) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(p)
}

// WriteTable writes the plan for people: one row per placement, the "why"
// lines with each runner-up, totals, the optimality gap and warnings.
func (p *Plan) WriteTable(w io.Writer) error {
	var b strings.Builder
	age := fmt.Sprintf("%.0fh old", p.Catalog.AgeHours)
	if p.Catalog.UndatedOffers == p.Catalog.Offers && p.Catalog.Offers > 0 {
		age = "date unknown"
	} else if p.Catalog.UndatedOffers > 0 {
		age += fmt.Sprintf(", %d undated", p.Catalog.UndatedOffers)
	}
	fmt.Fprintf(&b, "Plan for %s: %s over %.0fh, prices from %s (%s, %d offers)\n\n",
		p.Policy, countOf(len(p.Placements), "workload"), p.HorizonHours, p.Catalog.Source, age, p.Catalog.Offers)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tKIND\tWHERE\tCAPACITY\tGPUS\t$/HOUR\tEXP HOURS\tEXP COST\tON-DEMAND\tSAVINGS")
	for _, pl := range p.Placements {
		where := string(pl.Cloud) + " " + pl.Region
		if pl.Zone != "" {
			where = string(pl.Cloud) + " " + pl.Zone
		}
		where += " " + pl.InstanceType
		if len(pl.Groups) > 1 {
			where += fmt.Sprintf(" +%d", len(pl.Groups)-1)
		}
		gpus := fmt.Sprintf("%d×%s", pl.GPUs, pl.GPU)
		if pl.Kind == "inference" {
			gpus = fmt.Sprintf("%d×%s (%d-%d rep)", pl.GPUs, pl.GPU, pl.MinReplicas, pl.MaxReplicas)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%s\t%s\t%s (%.0f%%)\n",
			pl.Workload, pl.Kind, where, pl.Capacity, gpus, pl.PricePerHour, pl.ExpectedHours,
			usd(pl.ExpectedCost), usd(pl.OnDemandBaseline), usd(pl.Savings), pl.SavingsPercent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nWhy:\n")
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "  %s\n", pl.Workload)
		for _, line := range pl.Explanation {
			fmt.Fprintf(&b, "    - %s\n", line)
		}
		if len(pl.Groups) > 1 {
			var gs []string
			for _, g := range pl.Groups {
				z := g.Zone
				if z == "" {
					z = g.Region
				}
				gs = append(gs, fmt.Sprintf("%d in %s %s", g.Instances, g.Cloud, z))
			}
			fmt.Fprintf(&b, "    - replicas: %s\n", strings.Join(gs, ", "))
		}
	}
	if len(p.Blocked) > 0 {
		b.WriteString("\nBlocked (not placed):\n")
		for _, x := range p.Blocked {
			pos := ""
			if x.Pos != "" {
				pos = x.Pos + ": "
			}
			fmt.Fprintf(&b, "  %s%s: %s (%s)\n    proof: %s\n", pos, x.Workload, x.Reason, x.Constraint, x.Proof)
		}
	}
	t := p.Totals
	fmt.Fprintf(&b, "\nTotal: expected %s vs all-on-demand %s: saves %s (%.1f%%), %d GPUs\n",
		usd(t.ExpectedCost), usd(t.OnDemandBaseline), usd(t.Savings), t.SavingsPercent, t.GPUs)
	fmt.Fprintf(&b, "Lower bound %s, gap %.3f%% (%s); solver: %s\n", usd(p.Bound.LowerBound), p.Bound.GapPercent, p.Bound.Method, p.Solver)
	if len(p.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, x := range p.Warnings {
			fmt.Fprintf(&b, "  ! %s\n", x)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// usd formats dollars with thousands separators and no cents above $100.
func usd(x float64) string {
	neg := x < 0
	if neg {
		x = -x
	}
	var s string
	if x < 100 {
		s = fmt.Sprintf("%.2f", x)
	} else {
		s = fmt.Sprintf("%.0f", x)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
	}
	if neg {
		return "-$" + s
	}
	return "$" + s
}

// countOf writes "1 workload" or "3 workloads".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
