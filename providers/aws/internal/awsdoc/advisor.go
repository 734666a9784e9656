package awsdoc

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// hoursPerMonth is the mean month (365 × 24 / 12) the Spot Advisor's
// monthly frequencies refer to.
const hoursPerMonth = 730.0

// Advisor is the Spot Advisor reduced to what offers need: the Linux
// interruption bucket per region and instance type.
type Advisor struct {
	buckets map[string]map[string]bucket
}

// bucket is one interruption-frequency range.
type bucket struct {
	label   string
	perHour float64
}

// Signal returns the spot signal for a type in a region; zero when unknown.
func (a *Advisor) Signal(region, instanceType string) pricing.SpotSignal {
	if a == nil {
		return pricing.SpotSignal{}
	}
	b, ok := a.buckets[region][instanceType]
	if !ok {
		return pricing.SpotSignal{}
	}
	return pricing.SpotSignal{Bucket: b.label, InterruptionsPerHour: b.perHour}
}

// advisorDoc is the Spot Advisor document. Only the Linux entries are
// kept; "instance_types" and other operating systems are skipped.
type advisorDoc struct {
	Ranges []struct {
		Index *int   `json:"index"`
		Label string `json:"label"`
	} `json:"ranges"`
	// SpotAdvisor is region → operating system → instance type → entry.
	SpotAdvisor map[string]struct {
		Linux map[string]struct {
			// S is the saving over on-demand in percent (unused: the
			// price itself comes from DescribeSpotPriceHistory).
			S *int `json:"s"`
			// R indexes Ranges by their "index" field.
			R *int `json:"r"`
		} `json:"Linux"`
	} `json:"spot_advisor"`
}

// ParseAdvisor reads the Spot Advisor JSON. Each entry's "r" selects a
// range; the range's label ("<5%", "5-10%", ">20%") is trusted and turned
// into an hourly rate by BucketRate. A document that is not of this shape
// is an error naming what is wrong.
func ParseAdvisor(r io.Reader) (*Advisor, error) {
	dec := json.NewDecoder(r)
	var doc advisorDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, DescribeJSONError("spot advisor document", dec, err)
	}
	if len(doc.Ranges) == 0 {
		return nil, fmt.Errorf(`spot advisor document: no "ranges"; want the interruption-frequency ranges`)
	}
	ranges := make(map[int]bucket, len(doc.Ranges))
	for i, rg := range doc.Ranges {
		if rg.Index == nil {
			return nil, fmt.Errorf("spot advisor document: ranges[%d] has no \"index\"", i)
		}
		if _, dup := ranges[*rg.Index]; dup {
			return nil, fmt.Errorf("spot advisor document: ranges[%d]: index %d appears twice", i, *rg.Index)
		}
		rate, err := BucketRate(rg.Label)
		if err != nil {
			return nil, fmt.Errorf("spot advisor document: ranges[%d]: %w", i, err)
		}
		ranges[*rg.Index] = bucket{label: rg.Label, perHour: rate}
	}
	out := &Advisor{buckets: make(map[string]map[string]bucket, len(doc.SpotAdvisor))}
	for region, byOS := range doc.SpotAdvisor {
		m := make(map[string]bucket, len(byOS.Linux))
		for typ, e := range byOS.Linux {
			if e.R == nil {
				return nil, fmt.Errorf("spot advisor document: %s Linux %s: no \"r\"", region, typ)
			}
			b, ok := ranges[*e.R]
			if !ok {
				return nil, fmt.Errorf("spot advisor document: %s Linux %s: r=%d is not the index of any range", region, typ, *e.R)
			}
			m[typ] = b
		}
		out.buckets[region] = m
	}
	return out, nil
}

// BucketRate converts a Spot Advisor label — the share of instances
// interrupted in a month — into interruptions per hour.
//
// The label's range is reduced to one representative monthly share p:
// "<5%" → 2.5% (half the bound), "5-10%" → 7.5% (the midpoint),
// ">20%" → 30% (1.5 × the bound: "more than" has no upper end, and half
// again is the same step the closed ranges take). Assuming interruptions
// arrive at a constant rate λ over a 730-hour month, the chance that an
// instance survives the month is e^(−730λ) = 1 − p, so
//
//	λ = −ln(1 − p) / 730.
//
// For example "5-10%" gives −ln(0.925)/730 ≈ 1.07e-4 per hour.
func BucketRate(label string) (float64, error) {
	l := strings.TrimSpace(label)
	want := `want a label such as "<5%", "5-10%" or ">20%"`
	body, ok := strings.CutSuffix(l, "%")
	if !ok {
		return 0, fmt.Errorf("range label %q: no %%; %s", trim(label), want)
	}
	num := func(s string) (float64, bool) {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		return v, err == nil && v >= 0 && v <= 100 && !math.IsNaN(v)
	}
	var p float64
	switch {
	case strings.HasPrefix(body, "<"):
		hi, ok := num(body[1:])
		if !ok || hi == 0 {
			return 0, fmt.Errorf("range label %q: %s", trim(label), want)
		}
		p = hi / 2
	case strings.HasPrefix(body, ">"):
		lo, ok := num(body[1:])
		if !ok {
			return 0, fmt.Errorf("range label %q: %s", trim(label), want)
		}
		p = min(lo*1.5, 100)
	default:
		a, b, found := strings.Cut(body, "-")
		lo, ok1 := num(a)
		hi, ok2 := num(b)
		if !found || !ok1 || !ok2 || hi < lo {
			return 0, fmt.Errorf("range label %q: %s", trim(label), want)
		}
		p = (lo + hi) / 2
	}
	// A share of 100% would mean an infinite rate; cap at 99%.
	p = min(p/100, 0.99)
	return -math.Log1p(-p) / hoursPerMonth, nil
}
