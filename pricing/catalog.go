package pricing

import (
	"iter"
	"path"
	"sort"
	"time"
)

// Catalog is a set of offers with an index for fast filtered queries. A
// Catalog is immutable once built; Merge returns a new one, so readers never
// see a half-applied refresh.
type Catalog struct {
	offers []Offer
	byGPU  map[GPUModel][]int
	// GeneratedAt is when the newest data in the catalog was produced (the
	// snapshot's date, or the last refresh).
	GeneratedAt time.Time
	// Source says where the data came from ("embedded snapshot ...", "live").
	Source string
}

// NewCatalog builds a catalog from offers. Offers are copied and sorted by
// key so queries are deterministic.
//
// GPU memory is normalised to the canonical model's spec figure: clouds
// report the same GPU differently (an L4 is 22.35 GiB on AWS, 24 on GCP), and
// a memory filter must mean the same on every cloud.
func NewCatalog(offers []Offer, generatedAt time.Time, source string) *Catalog {
	c := &Catalog{offers: append([]Offer(nil), offers...), GeneratedAt: generatedAt, Source: source}
	for i := range c.offers {
		c.offers[i].GPUMemoryGiB = NormalizedGPUMemory(c.offers[i])
	}
	sort.SliceStable(c.offers, func(i, j int) bool { return c.offers[i].Key() < c.offers[j].Key() })
	c.byGPU = make(map[GPUModel][]int)
	for i, o := range c.offers {
		c.byGPU[o.GPU] = append(c.byGPU[o.GPU], i)
	}
	return c
}

// Offers returns every offer (a copy).
func (c *Catalog) Offers() []Offer { return append([]Offer(nil), c.offers...) }

// Len is the number of offers.
func (c *Catalog) Len() int { return len(c.offers) }

// All yields every offer in key order, as Offers returns them, without the
// copy.
func (c *Catalog) All() iter.Seq[Offer] {
	return func(yield func(Offer) bool) {
		for _, o := range c.offers {
			if !yield(o) {
				return
			}
		}
	}
}

// GPUOffers yields the offers of GPU model g in key order, as
// Query(Query{GPUs: []GPUModel{g}}) returns them, without building a
// slice: the live plan stages scan them every pass.
func (c *Catalog) GPUOffers(g GPUModel) iter.Seq[Offer] {
	return func(yield func(Offer) bool) {
		for _, i := range c.byGPU[g] {
			if !yield(c.offers[i]) {
				return
			}
		}
	}
}

// Query filters offers. Zero fields do not filter.
type Query struct {
	// GPUs limits to these models; empty means any.
	GPUs []GPUModel
	// MinGPUCount and MaxGPUCount bound GPUs per instance (MaxGPUCount 0 = no bound).
	MinGPUCount int
	MaxGPUCount int
	// MinGPUMemoryGiB is the least memory per GPU.
	MinGPUMemoryGiB float64
	// Clouds limits to these clouds; empty means all.
	Clouds []Cloud
	// Regions are path.Match globs ("us-*", "europe-west4"); an offer must
	// match one. Empty means any region.
	Regions []string
	// Capacity, when set, keeps only offers sold that way.
	Capacity CapacityType
	// MaxPricePerHour bounds the instance price for Capacity (or the
	// cheapest available price when Capacity is empty).
	MaxPricePerHour float64
}

// Query returns the offers matching q in key order.
func (c *Catalog) Query(q Query) []Offer {
	var out []Offer
	visit := func(i int) {
		if o := c.offers[i]; q.Matches(o) {
			out = append(out, o)
		}
	}
	if len(q.GPUs) > 0 {
		var idx []int
		for _, g := range q.GPUs {
			idx = append(idx, c.byGPU[g]...)
		}
		sort.Ints(idx)
		for _, i := range idx {
			visit(i)
		}
		return out
	}
	for i := range c.offers {
		visit(i)
	}
	return out
}

// Matches reports whether one offer satisfies the query.
func (q Query) Matches(o Offer) bool {
	if len(q.GPUs) > 0 && !contains(q.GPUs, o.GPU) {
		return false
	}
	if o.GPUCount < q.MinGPUCount || (q.MaxGPUCount > 0 && o.GPUCount > q.MaxGPUCount) {
		return false
	}
	if o.GPUMemoryGiB < q.MinGPUMemoryGiB {
		return false
	}
	if len(q.Clouds) > 0 && !contains(q.Clouds, o.Cloud) {
		return false
	}
	if len(q.Regions) > 0 && !MatchAnyGlob(q.Regions, o.Region) {
		return false
	}
	var price float64
	switch q.Capacity {
	case OnDemand, Spot:
		p, ok := o.Price(q.Capacity)
		if !ok {
			return false
		}
		price = p
	default:
		price = o.OnDemandPrice
		if o.SpotPrice > 0 && (price == 0 || o.SpotPrice < price) {
			price = o.SpotPrice
		}
	}
	if q.MaxPricePerHour > 0 && price > q.MaxPricePerHour {
		return false
	}
	return true
}

// MatchAnyGlob reports whether s matches one of the path.Match patterns. A
// malformed pattern matches nothing; policy validation rejects those early.
func MatchAnyGlob(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, s); err == nil && ok {
			return true
		}
	}
	return false
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Merge returns a new catalog in which, for each (cloud, region) present in
// fresh, fresh's offers replace the old ones; other regions keep their old
// offers. An empty fresh set never removes data: a refresh that returned
// nothing for a region is not evidence that the region has no GPUs.
func (c *Catalog) Merge(fresh []Offer, at time.Time, source string) *Catalog {
	type place struct {
		cloud  Cloud
		region string
	}
	replaced := make(map[place]bool)
	for _, o := range fresh {
		replaced[place{o.Cloud, o.Region}] = true
	}
	out := make([]Offer, 0, len(c.offers)+len(fresh))
	for _, o := range c.offers {
		if !replaced[place{o.Cloud, o.Region}] {
			out = append(out, o)
		}
	}
	out = append(out, fresh...)
	gen := c.GeneratedAt
	if at.After(gen) {
		gen = at
	}
	return NewCatalog(out, gen, source)
}

// Stale reports whether an offer's data is older than maxAge at now. Prices
// of unknown date (DateUnknown) are stale: nothing shows they are recent.
func Stale(o Offer, now time.Time, maxAge time.Duration) bool {
	return maxAge > 0 && (now.Sub(o.ObservedAt) > maxAge || DateUnknown(o))
}

// SpotDefaults are the spot signals assumed per cloud where the data has no
// observation. Expected interruptions per hour; see docs/pricing.md for why
// these values.
type SpotDefaults map[Cloud]SpotSignal

// DefaultSpotDefaults returns the built-in per-cloud defaults. They are
// deliberately pessimistic for GPU spot capacity, which is reclaimed far more
// often than the all-instance averages clouds publish:
//   - AWS: 0.02/h (about one interruption per 50 h of running).
//   - GCP: 0.03/h; Spot VMs have no 24 h cap but GPU zones are tight.
//   - Azure: 0.025/h.
func DefaultSpotDefaults() SpotDefaults {
	return SpotDefaults{
		AWS:   {InterruptionsPerHour: 0.02, Default: true},
		GCP:   {InterruptionsPerHour: 0.03, Default: true},
		Azure: {InterruptionsPerHour: 0.025, Default: true},
	}
}

// WithSpotDefaults returns a catalog in which every spot offer without an
// interruption rate gets its cloud's default, marked Default.
func (c *Catalog) WithSpotDefaults(d SpotDefaults) *Catalog {
	out := make([]Offer, len(c.offers))
	for i, o := range c.offers {
		if o.SpotPrice > 0 && o.Spot.InterruptionsPerHour == 0 {
			if def, ok := d[o.Cloud]; ok {
				keep := o.Spot
				o.Spot = def
				o.Spot.Default = true
				o.Spot.PlacementScore = keep.PlacementScore
				o.Spot.Availability = keep.Availability
			}
		}
		out[i] = o
	}
	return NewCatalog(out, c.GeneratedAt, c.Source)
}

// NormalizedGPUMemory is the memory per GPU of an offer's canonical model
// (the spec table's figure), or what the offer says for a model without one.
func NormalizedGPUMemory(o Offer) float64 {
	if s, ok := Spec(o.GPU); ok && s.MemoryGiB > 0 {
		return s.MemoryGiB
	}
	return o.GPUMemoryGiB
}
