//go:build !agentonly

package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/pricing"
)

type pricesOptions struct {
	gpus       []string
	clouds     []string
	regions    []string
	minCount   int
	minMemory  float64
	spot       bool
	onDemand   bool
	maxPrice   float64
	sortBy     string
	output     string
	limit      int
	staleAfter time.Duration
	db         string
	history    bool
	since      time.Duration
}

func newPricesCmd() *cobra.Command {
	var o pricesOptions
	cmd := &cobra.Command{
		Use:   "prices",
		Short: "List GPU offers and their prices",
		Long: `List GPU offers from the catalog, sorted by price per GPU-hour or per TFLOP-hour.
The catalog is the embedded snapshot, overlaid region by region with what
'gpubroker catalog refresh' stored (--db, default the user data directory) when
the store holds offers. With --history, show the recorded price series of the
offers named by key (cloud/region/zone/instance-type) or matching the filters.`,
		Example: `  gpubroker prices --gpu A100-80GB --cloud aws,gcp --spot
  gpubroker prices --min-gpu-memory 40 --sort tflop --output json
  gpubroker prices --history aws/us-east-1/us-east-1a/p5.48xlarge --since 720h`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.staleAfter < 0 {
				return usageErr(fmt.Errorf("--stale-after %s: want a positive duration such as 168h, or 0 to mark nothing stale", o.staleAfter))
			}
			if len(args) > 0 && !o.history {
				return usageErr(fmt.Errorf("unexpected arguments %q; offer keys are only taken with --history", args))
			}
			if err := o.validate(); err != nil {
				return usageErr(err)
			}
			cat, st, err := pricesCatalog(cmd.Context(), o.db)
			if err != nil {
				return failErr(err)
			}
			if st != nil {
				defer st.Close()
			}
			if o.history {
				return runHistory(cmd.Context(), cmd.OutOrStdout(), st, cat, args, o, time.Now())
			}
			return runPrices(cmd.OutOrStdout(), cat, o, time.Now())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.gpus, "gpu", nil, "GPU models (comma-separated), e.g. A100-80GB,H100")
	f.StringSliceVar(&o.clouds, "cloud", nil, "clouds: aws, gcp, azure (comma-separated)")
	f.StringSliceVar(&o.regions, "region", nil, "region globs, e.g. 'us-*'")
	f.IntVar(&o.minCount, "min-gpus", 0, "least GPUs per instance")
	f.Float64Var(&o.minMemory, "min-gpu-memory", 0, "least memory per GPU, GiB")
	f.BoolVar(&o.spot, "spot", false, "only offers with a spot price; sort by spot price")
	f.BoolVar(&o.onDemand, "on-demand", false, "only offers with an on-demand price")
	f.Float64Var(&o.maxPrice, "max-price", 0, "highest instance price, USD/hour")
	f.StringVar(&o.sortBy, "sort", "gpu-hour", "sort key: gpu-hour ($/GPU-hour) or tflop ($/TFLOP-hour)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or csv")
	f.IntVar(&o.limit, "limit", 0, "show at most this many offers (0 = all)")
	f.DurationVar(&o.staleAfter, "stale-after", 7*24*time.Hour, "mark offers observed longer ago than this as stale")
	f.StringVar(&o.db, "db", "", "store to read refreshed offers from: a SQLite path, sqlite://PATH or postgres://... (default: the user data directory, if it exists)")
	f.BoolVar(&o.history, "history", false, "show the price history of the offers given as arguments (keys) or matching the filters")
	f.DurationVar(&o.since, "since", 0, "with --history, only points observed within this long (0 = all)")
	return cmd
}

// priceRow is one line of `prices` output; its JSON form is documented in
// docs/prices.md.
type priceRow struct {
	Cloud           string              `json:"cloud"`
	Region          string              `json:"region"`
	Zone            string              `json:"zone"`
	InstanceType    string              `json:"instance_type"`
	GPU             string              `json:"gpu"`
	GPUCount        int                 `json:"gpu_count"`
	GPUMemoryGiB    float64             `json:"gpu_memory_gib"`
	OnDemandPerHour *float64            `json:"on_demand_usd_per_hour"`
	SpotPerHour     *float64            `json:"spot_usd_per_hour"`
	PerGPUHour      float64             `json:"usd_per_gpu_hour"`
	PerTFLOPHour    float64             `json:"usd_per_tflop_hour"`
	SpotSignal      *pricing.SpotSignal `json:"spot_signal,omitempty"`
	ObservedAt      time.Time           `json:"observed_at"`
	Stale           bool                `json:"stale"`
	// DateUnknown: the source states no pricing date; ObservedAt is the
	// day the price was copied.
	DateUnknown bool `json:"date_unknown"`
	// Issues are the price-sanity flags (docs/pricing.md); empty when none.
	Issues             []pricing.Issue `json:"issues"`
	capacityForSorting pricing.CapacityType
}

type pricesOutput struct {
	CatalogSource string    `json:"catalog_source"`
	GeneratedAt   time.Time `json:"generated_at"`
	AgeHours      float64   `json:"age_hours"`
	// PricesDate says how the catalog is dated, in words: by its source's
	// pricing date, or "unknown" with the day the rows were copied.
	PricesDate    string     `json:"prices_date"`
	UndatedOffers int        `json:"undated_offers"`
	Capacity      string     `json:"capacity"`
	SortedBy      string     `json:"sorted_by"`
	Offers        []priceRow `json:"offers"`
}

func runPrices(w io.Writer, cat *pricing.Catalog, o pricesOptions, now time.Time) error {
	q, err := o.query()
	if err != nil {
		return err
	}
	if o.spot && o.onDemand {
		return usageErr(fmt.Errorf("--spot and --on-demand exclude each other; give one"))
	}
	capacity := pricing.OnDemand
	if o.spot {
		capacity = pricing.Spot
		q.Capacity = pricing.Spot
	} else if o.onDemand {
		q.Capacity = pricing.OnDemand
	}
	if o.sortBy != "gpu-hour" && o.sortBy != "tflop" {
		return usageErr(fmt.Errorf("--sort %q: want gpu-hour or tflop", o.sortBy))
	}
	rows := make([]priceRow, 0)
	sanity := cat.CheckSanity()
	undated := 0
	for _, off := range cat.Query(q) {
		ct := capacity
		if _, ok := off.Price(ct); !ok {
			ct = pricing.Spot // on-demand not sold here (e.g. p5e): rank by spot
		}
		r := priceRow{Cloud: string(off.Cloud), Region: off.Region, Zone: off.Zone, InstanceType: off.InstanceType,
			GPU: string(off.GPU), GPUCount: off.GPUCount, GPUMemoryGiB: off.GPUMemoryGiB, ObservedAt: off.ObservedAt,
			Stale: pricing.Stale(off, now, o.staleAfter), DateUnknown: pricing.DateUnknown(off),
			Issues: append([]pricing.Issue{}, sanity.ByKey[off.Key()]...), capacityForSorting: ct}
		if r.DateUnknown {
			undated++
		}
		if p, ok := off.Price(pricing.OnDemand); ok {
			r.OnDemandPerHour = &p
		}
		if p, ok := off.Price(pricing.Spot); ok {
			r.SpotPerHour = &p
			sig := off.Spot
			r.SpotSignal = &sig
		}
		r.PerGPUHour, _ = off.PricePerGPUHour(ct)
		r.PerTFLOPHour, _ = off.PricePerTFLOPHour(ct)
		r.PerGPUHour, r.PerTFLOPHour = roundTo(r.PerGPUHour, 6), roundTo(r.PerTFLOPHour, 8)
		rows = append(rows, r)
	}
	key := func(r priceRow) float64 { return r.PerGPUHour }
	if o.sortBy == "tflop" {
		key = func(r priceRow) float64 { return r.PerTFLOPHour }
	}
	// Offers not sold at the requested capacity (p5e has no on-demand price)
	// are listed after the rest, ranked by the price they do have.
	sort.SliceStable(rows, func(i, j int) bool {
		ai, aj := rows[i].capacityForSorting == capacity, rows[j].capacityForSorting == capacity
		if ai != aj {
			return ai
		}
		return key(rows[i]) < key(rows[j])
	})
	if o.limit > 0 && len(rows) > o.limit {
		rows = rows[:o.limit]
	}
	out := pricesOutput{CatalogSource: cat.Source, GeneratedAt: cat.GeneratedAt,
		AgeHours: roundTo(now.Sub(cat.GeneratedAt).Hours(), 1), Capacity: string(capacity), SortedBy: o.sortBy, Offers: rows,
		PricesDate: "as of " + cat.GeneratedAt.UTC().Format("2006-01-02"), UndatedOffers: undated}
	if undated > 0 {
		out.PricesDate = "unknown for " + plural(undated, "offer") + " (copied " + cat.GeneratedAt.UTC().Format("2006-01-02") + " from a public catalog that states no date)"
	}
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "csv":
		return writePricesCSV(w, rows)
	case "table":
		return writePricesTable(w, out, now)
	}
	return usageErr(fmt.Errorf("--output %q: want table, json or csv", o.output))
}

// validate checks flag values that the query would otherwise accept
// silently.
func (o pricesOptions) validate() error {
	if err := checkGlobs("--region", o.regions); err != nil {
		return err
	}
	if o.limit < 0 {
		return fmt.Errorf("--limit %d: want 0 (all) or a positive number of offers", o.limit)
	}
	if o.minCount < 0 {
		return fmt.Errorf("--min-gpus %d: want 0 or more GPUs", o.minCount)
	}
	if err := checkNonNegative("--max-price", o.maxPrice, "USD per hour"); err != nil {
		return err
	}
	if err := checkNonNegative("--min-gpu-memory", o.minMemory, "GiB"); err != nil {
		return err
	}
	if o.staleAfter < 0 {
		return fmt.Errorf("--stale-after %v: want a positive duration such as 168h", o.staleAfter)
	}
	if o.since < 0 {
		return fmt.Errorf("--since %v: want a positive duration such as 720h, or 0 for all", o.since)
	}
	if o.output != "table" && o.output != "json" && o.output != "csv" {
		return fmt.Errorf("--output %q: want table, json or csv", o.output)
	}
	return checkDBPath(o.db)
}

// query turns the filter flags into a catalog query; bad names are usage
// errors with a suggestion.
func (o pricesOptions) query() (pricing.Query, error) {
	q := pricing.Query{MinGPUCount: o.minCount, MinGPUMemoryGiB: o.minMemory, Regions: o.regions, MaxPricePerHour: o.maxPrice}
	for _, g := range o.gpus {
		m, ok := pricing.ParseGPUModel(g)
		if !ok {
			return q, usageErr(fmt.Errorf("--gpu: unknown GPU %q%s", g, suggestGPU(g)))
		}
		q.GPUs = append(q.GPUs, m)
	}
	for _, c := range o.clouds {
		cl, err := pricing.ParseCloud(c)
		if err != nil {
			return q, usageErr(fmt.Errorf("--cloud: %w", err))
		}
		q.Clouds = append(q.Clouds, cl)
	}
	return q, nil
}

func writePricesCSV(w io.Writer, rows []priceRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"cloud", "region", "zone", "instance_type", "gpu", "gpu_count", "gpu_memory_gib",
		"on_demand_usd_per_hour", "spot_usd_per_hour", "usd_per_gpu_hour", "usd_per_tflop_hour",
		"spot_interruptions_per_hour", "spot_signal_default", "observed_at", "stale", "date_unknown", "issues"})
	for _, r := range rows {
		rate, def := "", ""
		if r.SpotSignal != nil {
			rate = strconv.FormatFloat(r.SpotSignal.InterruptionsPerHour, 'f', -1, 64)
			def = strconv.FormatBool(r.SpotSignal.Default)
		}
		_ = cw.Write([]string{r.Cloud, r.Region, r.Zone, r.InstanceType, r.GPU, strconv.Itoa(r.GPUCount),
			strconv.FormatFloat(r.GPUMemoryGiB, 'f', -1, 64), optPrice(r.OnDemandPerHour), optPrice(r.SpotPerHour),
			strconv.FormatFloat(roundTo(r.PerGPUHour, 4), 'f', -1, 64), strconv.FormatFloat(roundTo(r.PerTFLOPHour, 6), 'f', -1, 64),
			rate, def, r.ObservedAt.UTC().Format(time.RFC3339), strconv.FormatBool(r.Stale),
			strconv.FormatBool(r.DateUnknown), joinIssues(r.Issues)})
	}
	cw.Flush()
	return cw.Error()
}

func optPrice(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}

func writePricesTable(w io.Writer, out pricesOutput, now time.Time) error {
	if out.UndatedOffers > 0 {
		fmt.Fprintf(w, "Catalog: %s (copied %s ago)", out.CatalogSource, humanAge(now.Sub(out.GeneratedAt)))
	} else {
		fmt.Fprintf(w, "Catalog: %s (age %s)", out.CatalogSource, humanAge(now.Sub(out.GeneratedAt)))
	}
	fmt.Fprintf(w, "; prices in USD/hour; sorted by %s at %s price\n\n", map[string]string{"gpu-hour": "$/GPU-hour", "tflop": "$/TFLOP-hour"}[out.SortedBy], out.Capacity)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLOUD\tREGION\tZONE\tINSTANCE TYPE\tGPU\tGPUS\tON-DEMAND\tSPOT\t$/GPU-H\t$/TFLOP-H\tSPOT SIGNAL\t")
	anyDefault, anyStale, anyIssue := false, false, false
	for _, r := range out.Offers {
		signal := "-"
		if r.SpotSignal != nil {
			signal = describeSignal(*r.SpotSignal)
			anyDefault = anyDefault || r.SpotSignal.Default
		}
		zone := r.Zone
		if zone == "" {
			zone = "(regional)"
		}
		it := r.InstanceType
		if r.Stale {
			it += " (stale)"
			anyStale = true
		}
		if len(r.Issues) > 0 {
			it += " !"
			anyIssue = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%.4f\t%.6f\t%s\t\n", r.Cloud, r.Region, zone, it, r.GPU, r.GPUCount,
			fmtPrice(r.OnDemandPerHour), fmtPrice(r.SpotPerHour), r.PerGPUHour, r.PerTFLOPHour, signal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s.", plural(len(out.Offers), "offer"))
	if anyDefault {
		fmt.Fprint(w, " Spot signals marked \"default\" are the configured per-cloud assumption, not an observation (docs/pricing.md).")
	}
	if anyStale {
		if out.UndatedOffers > 0 {
			fmt.Fprint(w, " Offers marked (stale) have prices of unknown date or older than --stale-after; run 'gpubroker catalog refresh'.")
		} else {
			fmt.Fprint(w, " Offers marked (stale) have not been refreshed recently.")
		}
	}
	if anyIssue {
		fmt.Fprint(w, " Offers marked ! have prices that fail a sanity check (spot at or above on-demand, no on-demand price, or a regional outlier); see 'gpubroker catalog check'.")
	}
	fmt.Fprintln(w)
	return nil
}

func describeSignal(s pricing.SpotSignal) string {
	var parts []string
	if s.Bucket != "" {
		parts = append(parts, s.Bucket+"/mo")
	}
	parts = append(parts, fmt.Sprintf("%.3f/h", s.InterruptionsPerHour))
	if s.PlacementScore > 0 {
		parts = append(parts, fmt.Sprintf("score %d", s.PlacementScore))
	}
	if s.Default {
		parts = append(parts, "default")
	}
	return strings.Join(parts, " ")
}

func fmtPrice(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *p)
}

func humanAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.0fh", d.Hours())
	}
	return fmt.Sprintf("%.0f days", d.Hours()/24)
}

func roundTo(f float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if f < 0 {
		return -float64(int64(-f*p+0.5)) / p
	}
	return float64(int64(f*p+0.5)) / p
}

// suggestGPU returns `; did you mean "X"?` for a near-miss GPU name.
func suggestGPU(name string) string {
	if s := pricing.SuggestGPU(name); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return fmt.Sprintf("; known GPUs: %s", strings.Join(gpuNames(), ", "))
}

func gpuNames() []string {
	var out []string
	for _, m := range pricing.GPUModels() {
		out = append(out, string(m))
	}
	return out
}
