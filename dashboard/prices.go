package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// pageSize bounds table rows per page, so a page stays a few hundred KiB
// whatever the fleet's size.
const pageSize = 100

// maxPage bounds page numbers so offsets cannot overflow.
const maxPage = 1_000_000

func clampPage(p int) int { return min(max(p, 1), maxPage) }

type priceFilter struct {
	GPU, Cloud, Region, Capacity, Sort string
	Page                               int
}

type priceRow struct {
	Offer            pricing.Offer
	Key              string
	PerGPU, PerTFLOP float64
	Capacity         pricing.CapacityType
	// Undated: the source states no pricing date (the embedded snapshot);
	// Stale: observed longer ago than StaleAfter.
	Undated, Stale, SpotDefault bool
	ObservedAgo                 string
}

type pricesData struct {
	Filter     priceFilter
	GPUs       []pricing.GPUModel
	Clouds     []pricing.Cloud
	Rows       []priceRow
	Total      int
	From, To   int
	Prev, Next string
	Errors     []string
	Catalog    catalogInfo
	StaleAfter string
}

func (s *Server) prices(w http.ResponseWriter, r *http.Request, rq request) {
	q := r.URL.Query()
	f := priceFilter{GPU: q.Get("gpu"), Cloud: q.Get("cloud"), Region: strings.TrimSpace(q.Get("region")),
		Capacity: q.Get("capacity"), Sort: q.Get("sort")}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = clampPage(f.Page)
	d := pricesData{Filter: f, GPUs: pricing.GPUModels(), Clouds: pricing.Clouds(), Catalog: s.catalogInfo(),
		StaleAfter: s.cfg.StaleAfter.String()}

	var query pricing.Query
	if f.GPU != "" {
		m, ok := pricing.ParseGPUModel(f.GPU)
		if !ok {
			d.Errors = append(d.Errors, fmt.Sprintf("GPU %q is not known; pick one from the list.", f.GPU))
		} else {
			query.GPUs = []pricing.GPUModel{m}
		}
	}
	if f.Cloud != "" {
		c, err := pricing.ParseCloud(f.Cloud)
		if err != nil {
			d.Errors = append(d.Errors, err.Error())
		} else {
			query.Clouds = []pricing.Cloud{c}
		}
	}
	if f.Region != "" {
		if _, err := path.Match(f.Region, ""); err != nil || len(f.Region) > 64 {
			d.Errors = append(d.Errors, fmt.Sprintf("region %q is not a valid glob; use e.g. us-* or europe-west4.", f.Region))
		} else {
			query.Regions = []string{f.Region}
		}
	}
	switch f.Capacity {
	case "":
	case string(pricing.Spot), string(pricing.OnDemand):
		query.Capacity = pricing.CapacityType(f.Capacity)
	default:
		d.Errors = append(d.Errors, fmt.Sprintf("capacity %q: want spot or on-demand.", f.Capacity))
	}
	switch f.Sort {
	case "", "gpu-hour", "tflop":
	default:
		d.Errors = append(d.Errors, fmt.Sprintf("sort %q: want gpu-hour or tflop.", f.Sort))
		f.Sort = ""
	}
	if len(d.Errors) > 0 {
		s.render(w, r, http.StatusBadRequest, "prices", s.pageFor(rq, "Prices", "prices", d))
		return
	}

	now := s.now()
	offers := s.cfg.Offers.Catalog().Query(query)
	rows := make([]priceRow, 0, len(offers))
	for _, o := range offers {
		ct := query.Capacity
		if ct == "" {
			// Without a capacity filter each offer is ranked by its cheapest
			// way to buy it.
			ct = pricing.OnDemand
			if sp, ok := o.Price(pricing.Spot); ok {
				if od, ok := o.Price(pricing.OnDemand); !ok || sp < od {
					ct = pricing.Spot
				}
			}
		}
		g, _ := o.PricePerGPUHour(ct)
		t, _ := o.PricePerTFLOPHour(ct)
		rows = append(rows, priceRow{Offer: o, Key: o.Key(), PerGPU: g, PerTFLOP: t, Capacity: ct,
			Undated: pricing.DateUnknown(o), Stale: pricing.Stale(o, now, s.cfg.StaleAfter) && !pricing.DateUnknown(o), SpotDefault: o.SpotPrice > 0 && o.Spot.Default,
			ObservedAgo: ago(now, o.ObservedAt)})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].PerGPU, rows[j].PerGPU
		if f.Sort == "tflop" {
			a, b = rows[i].PerTFLOP, rows[j].PerTFLOP
		}
		// Unknown (zero) per-TFLOP prices sort last.
		if (a == 0) != (b == 0) {
			return b == 0
		}
		return a < b
	})
	d.Total = len(rows)
	d.From = min((f.Page-1)*pageSize, len(rows))
	d.To = min(d.From+pageSize, len(rows))
	d.Rows = rows[d.From:d.To]
	link := func(p int) string {
		v := url.Values{}
		for k, val := range map[string]string{"gpu": f.GPU, "cloud": f.Cloud, "region": f.Region, "capacity": f.Capacity, "sort": f.Sort} {
			if val != "" {
				v.Set(k, val)
			}
		}
		v.Set("page", strconv.Itoa(p))
		return "/ui/prices?" + v.Encode()
	}
	if f.Page > 1 {
		d.Prev = link(f.Page - 1)
	}
	if d.To < d.Total {
		d.Next = link(f.Page + 1)
	}
	s.render(w, r, http.StatusOK, "prices", s.pageFor(rq, "Prices", "prices", d))
}

type historyData struct {
	Key    string
	Offer  *pricing.Offer
	Days   int
	Chart  any
	Points []PricePoint
	Note   string
}

// maxHistoryRows bounds the table under the chart (the chart shows all).
const maxHistoryRows = 200

func (s *Server) history(w http.ResponseWriter, r *http.Request, rq request) {
	key := r.URL.Query().Get("key")
	days, err := strconv.Atoi(r.URL.Query().Get("days"))
	if err != nil || days <= 0 || days > 3650 {
		days = 90
	}
	d := historyData{Key: key, Days: days}
	if key == "" || len(key) > 300 {
		s.renderError(w, r, http.StatusBadRequest, "Pick an offer on the Prices page to see its price history.")
		return
	}
	for _, o := range s.cfg.Offers.Catalog().Query(pricing.Query{}) {
		if o.Key() == key {
			d.Offer = &o
			break
		}
	}
	now := s.now()
	if s.cfg.History == nil {
		d.Note = "This broker has no price store, so no history is recorded."
	} else {
		pts, err := s.cfg.History.PriceHistory(r.Context(), key, now.AddDate(0, 0, -days))
		if err != nil {
			s.internal(w, r, "the price history", err)
			return
		}
		d.Points = pts
		if len(pts) == 0 {
			d.Note = "No price changes of this offer are recorded in this period; refreshes record a point whenever a price changes (gpubroker catalog refresh, or the broker's refresh job)."
		}
	}
	var spot, od Series
	spot = Series{Name: "spot", Color: palette.Spot, Step: true, Markers: true}
	od = Series{Name: "on-demand", Color: palette.OnDemand, Step: true, Dashed: true, Markers: true}
	for _, p := range d.Points {
		pt := Point{X: p.At, Y: p.Price}
		if p.Capacity == pricing.Spot {
			spot.Points = append(spot.Points, pt)
		} else {
			od.Points = append(od.Points, pt)
		}
	}
	desc := fmt.Sprintf("Recorded prices of %s over the last %d days: %d spot and %d on-demand points.", key, days, len(spot.Points), len(od.Points))
	if n := len(spot.Points); n > 0 {
		desc += fmt.Sprintf(" Latest spot %s/h.", price(spot.Points[n-1].Y))
	}
	if n := len(od.Points); n > 0 {
		desc += fmt.Sprintf(" Latest on-demand %s/h.", price(od.Points[n-1].Y))
	}
	d.Chart = LineChart{ID: "history", Title: "Price history of " + key, Desc: desc, Unit: "$/h", Until: now,
		Series: []Series{spot, od}}.SVG()
	// Newest first in the table.
	rows := make([]PricePoint, 0, min(len(d.Points), maxHistoryRows))
	for i := len(d.Points) - 1; i >= 0 && len(rows) < maxHistoryRows; i-- {
		rows = append(rows, d.Points[i])
	}
	d.Points = rows
	s.render(w, r, http.StatusOK, "history", s.pageFor(rq, "Price history", "prices", d))
}
