package pricing

import (
	"sort"
)

// Issue is one reason an offer's prices are not to be believed as they
// stand.
type Issue string

// Price sanity issues.
const (
	// SpotNotCheaper: the spot price is at or above the on-demand price, so
	// spot is no discount there.
	SpotNotCheaper Issue = "spot-not-below-on-demand"
	// NoOnDemand: only a spot price is known; its discount cannot be
	// checked against the same shape in the same place.
	NoOnDemand Issue = "no-on-demand-price"
	// RegionalOutlier: the on-demand price is at least OutlierFactor times
	// above or below the median of the same instance type across regions.
	RegionalOutlier Issue = "regional-outlier"
)

// Issues lists the issues in report order.
func Issues() []Issue { return []Issue{SpotNotCheaper, NoOnDemand, RegionalOutlier} }

// OutlierFactor is how far from the cross-region median (per cloud and
// instance type, over at least OutlierMinRegions regions) an on-demand
// price must be to count as a regional outlier. Real regional spreads stay
// well inside it (AWS p5.48xlarge: 98.32 in us-east-2 to 127.82 in
// ap-southeast-2, 1.3×); a doubled or halved price is a data error or a
// different product.
const (
	OutlierFactor     = 1.75
	OutlierMinRegions = 3
)

// Sanity is the price-sanity report of a catalog.
type Sanity struct {
	// ByKey holds the issues of each flagged offer, by Offer.Key.
	ByKey map[string][]Issue
	// Counts is the number of offers with each issue.
	Counts map[Issue]int
	// Offers is the number of offers checked.
	Offers int
}

// Flagged returns the keys of flagged offers, sorted.
func (s Sanity) Flagged() []string {
	keys := make([]string, 0, len(s.ByKey))
	for k := range s.ByKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckSanity flags the offers whose prices cannot be believed as they
// stand: spot at or above on-demand, spot without on-demand, and regional
// outliers.
func (c *Catalog) CheckSanity() Sanity {
	s := Sanity{ByKey: map[string][]Issue{}, Counts: map[Issue]int{}, Offers: len(c.offers)}
	add := func(o Offer, is Issue) {
		s.ByKey[o.Key()] = append(s.ByKey[o.Key()], is)
		s.Counts[is]++
	}
	type shape struct {
		cloud Cloud
		typ   string
	}
	// Cheapest on-demand price per region, per shape.
	regional := map[shape]map[string]float64{}
	for _, o := range c.offers {
		if o.OnDemandPrice <= 0 {
			continue
		}
		k := shape{o.Cloud, o.InstanceType}
		if regional[k] == nil {
			regional[k] = map[string]float64{}
		}
		if p, ok := regional[k][o.Region]; !ok || o.OnDemandPrice < p {
			regional[k][o.Region] = o.OnDemandPrice
		}
	}
	medians := map[shape]float64{}
	for k, byRegion := range regional {
		if len(byRegion) < OutlierMinRegions {
			continue
		}
		ps := make([]float64, 0, len(byRegion))
		for _, p := range byRegion {
			ps = append(ps, p)
		}
		sort.Float64s(ps)
		n := len(ps)
		if n%2 == 1 {
			medians[k] = ps[n/2]
		} else {
			medians[k] = (ps[n/2-1] + ps[n/2]) / 2
		}
	}
	for _, o := range c.offers {
		switch {
		case o.SpotPrice > 0 && o.OnDemandPrice == 0:
			add(o, NoOnDemand)
		case o.SpotPrice > 0 && o.SpotPrice >= o.OnDemandPrice:
			add(o, SpotNotCheaper)
		}
		if m, ok := medians[shape{o.Cloud, o.InstanceType}]; ok && o.OnDemandPrice > 0 &&
			(o.OnDemandPrice >= m*OutlierFactor || o.OnDemandPrice*OutlierFactor <= m) {
			add(o, RegionalOutlier)
		}
	}
	return s
}

// ForPlanning returns the catalog a planner may trust for savings: a spot
// price at or above on-demand is dropped (that offer is bought on demand),
// and an offer with a spot price but no on-demand price is left out, since
// nothing in the same place shows its spot price is a discount. Regional
// outliers stay: they are flagged for people to look at, and a too-high
// price only makes an offer lose.
func (c *Catalog) ForPlanning() *Catalog {
	out := make([]Offer, 0, len(c.offers))
	changed := false
	for _, o := range c.offers {
		switch {
		case o.OnDemandPrice == 0:
			changed = true
			continue
		case o.SpotPrice > 0 && o.SpotPrice >= o.OnDemandPrice:
			o.SpotPrice = 0
			o.Spot = SpotSignal{}
			changed = true
		}
		out = append(out, o)
	}
	if !changed {
		return c
	}
	return NewCatalog(out, c.GeneratedAt, c.Source)
}
