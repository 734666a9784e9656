//go:build !agentonly

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// pricesCatalog is the catalog `prices` and `plan` read (catalog.Load):
// the embedded snapshot, with the regions the store holds replaced by the
// stored offers. The store is read when dsn is given or the default
// database file exists; it is returned (open) when used, for --history.
func pricesCatalog(ctx context.Context, dsn string) (*pricing.Catalog, *store.Store, error) {
	st, err := catalog.OpenStore(ctx, dsn, store.Options{})
	if err != nil {
		return nil, nil, err
	}
	cat, err := catalog.Load(ctx, st)
	if err != nil {
		if st != nil {
			_ = st.Close()
		}
		return nil, nil, err
	}
	return cat, st, nil
}

// historySeries is one offer's price series in `prices --history` output.
type historySeries struct {
	Key    string         `json:"key"`
	Points []historyPoint `json:"points"`
}

type historyPoint struct {
	Capacity   string    `json:"capacity"`
	USDPerHour float64   `json:"usd_per_hour"`
	ObservedAt time.Time `json:"observed_at"`
	Source     string    `json:"source"`
}

// maxHistoryOffers bounds how many offers filters may select for --history
// unless --limit says otherwise.
const maxHistoryOffers = 20

func runHistory(ctx context.Context, w io.Writer, st *store.Store, cat *pricing.Catalog, keys []string, o pricesOptions, now time.Time) error {
	if st == nil {
		return failErr(errors.New("no price history: no store yet; run 'gpubroker catalog refresh' first (or give --db)"))
	}
	if len(keys) == 0 {
		q, err := o.query()
		if err != nil {
			return err
		}
		if len(q.GPUs) == 0 && len(q.Clouds) == 0 && len(q.Regions) == 0 {
			return usageErr(errors.New("--history needs offer keys (cloud/region/zone/instance-type) or filters such as --gpu, --cloud, --region"))
		}
		limit := o.limit
		if limit <= 0 {
			limit = maxHistoryOffers
		}
		for _, off := range cat.Query(q) {
			if len(keys) == limit {
				break
			}
			keys = append(keys, off.Key())
		}
	}
	if o.since < 0 {
		return usageErr(fmt.Errorf("--since %s: want a positive duration such as 720h", o.since))
	}
	var since time.Time
	if o.since > 0 {
		since = now.Add(-o.since)
	}
	series := make([]historySeries, 0, len(keys))
	for _, k := range keys {
		pts, err := st.PriceHistory(ctx, k, since)
		if err != nil {
			return failErr(err)
		}
		s := historySeries{Key: k, Points: make([]historyPoint, 0, len(pts))}
		for _, p := range pts {
			s.Points = append(s.Points, historyPoint{Capacity: string(p.Capacity), USDPerHour: p.Price, ObservedAt: p.ObservedAt, Source: p.Source})
		}
		series = append(series, s)
	}
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Store  string          `json:"store"`
			Offers []historySeries `json:"offers"`
		}{st.Where(), series})
	case "table":
		return writeHistoryTable(w, series)
	}
	return usageErr(fmt.Errorf("--output %q: --history writes table or json", o.output))
}

func writeHistoryTable(w io.Writer, series []historySeries) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OFFER\tCAPACITY\tOBSERVED AT\tUSD/HOUR\tCHANGE\t")
	empty := 0
	for _, s := range series {
		if len(s.Points) == 0 {
			empty++
			fmt.Fprintf(tw, "%s\t-\t-\t-\tno recorded prices\t\n", s.Key)
			continue
		}
		last := map[string]float64{}
		for i, p := range s.Points {
			key := s.Key
			if i > 0 {
				key = ""
			}
			change := "first"
			if prev, ok := last[p.Capacity]; ok && prev > 0 {
				change = fmt.Sprintf("%+.1f%%", (p.USDPerHour-prev)/prev*100)
			}
			last[p.Capacity] = p.USDPerHour
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.4f\t%s\t\n", key, p.Capacity, p.ObservedAt.UTC().Format(time.RFC3339), p.USDPerHour, change)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d offers; a point is recorded only when a price changed.\n", len(series))
	if empty == len(series) && len(series) > 0 {
		return failErr(errors.New("no recorded prices for these offers; check the keys with 'gpubroker prices --output json'"))
	}
	return err
}
