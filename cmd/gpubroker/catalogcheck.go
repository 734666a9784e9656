//go:build !agentonly

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/pricing"
)

func newCatalogCheckCmd() *cobra.Command {
	var db, output string
	var limit int
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report prices that cannot be believed as they stand",
		Long: `Check the catalog (embedded snapshot, overlaid with the store as 'prices' does)
for prices that cannot be believed as they stand, and count them per issue and
cloud:

  spot-not-below-on-demand  the spot price is at or above on-demand: no discount
  no-on-demand-price        only a spot price is known: its discount cannot be checked
  regional-outlier          on-demand is 1.75x or more above or below the same
                            instance type's median over 3 or more regions

The planner never treats the first two as discounts: it buys such offers on
demand, or leaves spot-only offers out. 'prices' marks flagged rows.

Exit codes: 0 report printed (flagged offers are not an error), 2 bad flags.`,
		Example: `  gpubroker catalog check
  gpubroker catalog check --output json --limit 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErr(fmt.Errorf("--output %q: want table or json", output))
			}
			if limit < 0 {
				return usageErr(fmt.Errorf("--limit %d: want 0 (all) or more", limit))
			}
			if err := checkDBPath(db); err != nil {
				return usageErr(err)
			}
			cat, st, err := pricesCatalog(cmd.Context(), db)
			if err != nil {
				return failErr(err)
			}
			if st != nil {
				defer st.Close()
			}
			return writeCatalogCheck(cmd.OutOrStdout(), cat, output, limit)
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "store to overlay: a SQLite path, sqlite://PATH or postgres://... (default: the user data directory, if it exists)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.Flags().IntVar(&limit, "limit", 20, "list at most this many flagged offers (0 = all)")
	return cmd
}

// checkReport is the JSON form of `catalog check`.
type checkReport struct {
	CatalogSource string                       `json:"catalog_source"`
	Offers        int                          `json:"offers"`
	Flagged       int                          `json:"flagged"`
	Counts        map[pricing.Issue]int        `json:"counts"`
	ByCloud       map[pricing.Cloud]issueCount `json:"by_cloud"`
	Listed        []checkRow                   `json:"listed"`
}

type issueCount map[pricing.Issue]int

type checkRow struct {
	Key      string          `json:"key"`
	Issues   []pricing.Issue `json:"issues"`
	OnDemand float64         `json:"on_demand_usd_per_hour"`
	Spot     float64         `json:"spot_usd_per_hour"`
}

func writeCatalogCheck(w io.Writer, cat *pricing.Catalog, output string, limit int) error {
	s := cat.CheckSanity()
	byKey := map[string]pricing.Offer{}
	for _, o := range cat.Offers() {
		byKey[o.Key()] = o
	}
	r := checkReport{CatalogSource: cat.Source, Offers: s.Offers, Flagged: len(s.ByKey), Counts: map[pricing.Issue]int{},
		ByCloud: map[pricing.Cloud]issueCount{}, Listed: []checkRow{}}
	for _, is := range pricing.Issues() {
		r.Counts[is] = s.Counts[is]
	}
	for _, c := range pricing.Clouds() {
		r.ByCloud[c] = issueCount{}
		for _, is := range pricing.Issues() {
			r.ByCloud[c][is] = 0
		}
	}
	for _, k := range s.Flagged() {
		o := byKey[k]
		for _, is := range s.ByKey[k] {
			r.ByCloud[o.Cloud][is]++
		}
		if limit == 0 || len(r.Listed) < limit {
			r.Listed = append(r.Listed, checkRow{Key: k, Issues: s.ByKey[k], OnDemand: o.OnDemandPrice, Spot: o.SpotPrice})
		}
	}
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "Catalog: %s\n%s checked, %s flagged\n\n", r.CatalogSource, plural(r.Offers, "offer"), groupThousands(r.Flagged))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ISSUE\tAWS\tGCP\tAZURE\tTOTAL")
	for _, is := range pricing.Issues() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", is, r.ByCloud[pricing.AWS][is], r.ByCloud[pricing.GCP][is], r.ByCloud[pricing.Azure][is], r.Counts[is])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Listed) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OFFER\tON-DEMAND\tSPOT\tISSUES")
		for _, row := range r.Listed {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", row.Key, money(row.OnDemand), money(row.Spot), joinIssues(row.Issues))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(r.Listed) < r.Flagged {
			fmt.Fprintf(w, "... and %s more (--limit 0 lists all)\n", groupThousands(r.Flagged-len(r.Listed)))
		}
	}
	return nil
}

func money(p float64) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4f", p)
}

func joinIssues(is []pricing.Issue) string {
	s := ""
	for i, x := range is {
		if i > 0 {
			s += ", "
		}
		s += string(x)
	}
	return s
}
