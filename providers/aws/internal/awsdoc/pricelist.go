// Package awsdoc parses the documents AWS publishes outside the SDK's own
// types: Price List product documents (the JSON strings inside a
// GetProducts answer), price strings, and the Spot Advisor JSON. It has no
// SDK dependency, so its fuzz targets build and run quickly.
package awsdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PriceIndex collects on-demand prices from price-list documents.
type PriceIndex struct {
	region string
	keep   func(instanceType string) bool
	// Prices is the on-demand $/h by instance type.
	Prices map[string]float64
}

// NewPriceIndex indexes the products of region whose instance type keep
// accepts.
func NewPriceIndex(region string, keep func(instanceType string) bool) *PriceIndex {
	return &PriceIndex{region: region, keep: keep, Prices: make(map[string]float64)}
}

// add folds one PriceList document into the index. Products of other
// families, other regions or other purchase options are ignored; a document
// that does not parse is an error.
func (x *PriceIndex) Add(doc string) error {
	// Most products of a region are not GPU types; when the attribute can
	// be read without decoding, skip those documents unread.
	if t, ok := peekInstanceType(doc); ok && !x.keep(t) {
		return nil
	}
	p, err := ParseProduct(strings.NewReader(doc))
	if err != nil {
		return err
	}
	a := p.Product.Attributes
	if a.InstanceType == "" || !x.keep(a.InstanceType) {
		return nil
	}
	if a.RegionCode != "" && a.RegionCode != x.region {
		return nil
	}
	// Capacity Blocks and Windows/licensed variants share the filters above
	// in some regions; only plain RunInstances on demand is the list price.
	if (a.MarketOption != "" && a.MarketOption != "OnDemand") || (a.Operation != "" && a.Operation != "RunInstances") {
		return nil
	}
	price, ok, err := p.HourlyUSD()
	if err != nil {
		return fmt.Errorf("sku %s (%s): %w", p.Product.SKU, a.InstanceType, err)
	}
	if !ok {
		return nil
	}
	// Should two products survive the filters, keep the lower price: it is
	// what a caller can actually buy; the order of pages must not matter.
	if old, seen := x.Prices[a.InstanceType]; !seen || price < old {
		x.Prices[a.InstanceType] = price
	}
	return nil
}

// peekInstanceType finds `"instanceType":"<name>"` in a document without
// decoding it. The key with that exact spelling can only be a real key:
// inside a JSON string its quotes would be escaped. Anything unusual
// (spaces, escapes, no match) returns ok=false and the full decoder decides.
func peekInstanceType(doc string) (string, bool) {
	const key = `"instanceType":"`
	i := strings.Index(doc, key)
	if i < 0 {
		return "", false
	}
	rest := doc[i+len(key):]
	end := strings.IndexByte(rest, '"')
	if end <= 0 || end > 64 {
		return "", false
	}
	name := rest[:end]
	for j := 0; j < len(name); j++ {
		if c := name[j]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	return name, true
}

// Product is the part of a price-list document gpubroker reads. Reserved
// terms and the dozens of other attributes are skipped by the decoder
// without being stored.
type Product struct {
	Product struct {
		SKU        string `json:"sku"`
		Attributes struct {
			InstanceType string `json:"instanceType"`
			RegionCode   string `json:"regionCode"`
			Operation    string `json:"operation"`
			MarketOption string `json:"marketoption"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		// OnDemand is keyed by "<sku>.<offerTermCode>".
		OnDemand map[string]struct {
			// PriceDimensions is keyed by "<sku>.<offerTermCode>.<rateCode>".
			PriceDimensions map[string]struct {
				Unit         string `json:"unit"`
				BeginRange   string `json:"beginRange"`
				PricePerUnit struct {
					USD *string `json:"USD"`
				} `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseProduct decodes one price-list document (the second decode: the API
// returns each product as a JSON string inside the PriceList array).
func ParseProduct(r io.Reader) (*Product, error) {
	dec := json.NewDecoder(r)
	var p Product
	if err := dec.Decode(&p); err != nil {
		return nil, DescribeJSONError("price-list product document", dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("price-list product document: unexpected data after the object at offset %d; want a single JSON object", dec.InputOffset())
	}
	return &p, nil
}

// DescribeJSONError says where a document broke.
func DescribeJSONError(what string, dec *json.Decoder, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: truncated at offset %d; want a complete JSON object", what, dec.InputOffset())
	case errors.As(err, &syn):
		return fmt.Errorf("%s: offset %d: %v", what, syn.Offset, syn)
	case errors.As(err, &typ):
		return fmt.Errorf("%s: offset %d: field %q is a JSON %s, want %s", what, typ.Offset, typ.Field, typ.Value, typ.Type)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// HourlyUSD returns the on-demand $/h: the price dimension measured in
// hours ("Hrs") starting at usage 0. ok is false when the product has no
// positive hourly price (AWS lists some unavailable shapes at 0).
// Should a document carry several (it does not today), the lowest wins so
// the result does not depend on map order.
func (p *Product) HourlyUSD() (price float64, ok bool, err error) {
	for _, term := range p.Terms.OnDemand {
		for _, d := range term.PriceDimensions {
			if d.Unit != "Hrs" || (d.BeginRange != "" && d.BeginRange != "0") || d.PricePerUnit.USD == nil {
				continue
			}
			v, err := ParsePrice(*d.PricePerUnit.USD)
			if err != nil {
				return 0, false, err
			}
			if v > 0 && (!ok || v < price) {
				price, ok = v, true
			}
		}
	}
	return price, ok, nil
}

// MaxPrice bounds believable hourly prices; the largest GPU instances cost
// under $200/h, so anything near this is a corrupt document.
const MaxPrice = 100_000

// ParsePrice reads an AWS price string such as "32.7726000000": plain
// decimal digits with an optional fraction. Signs, exponents, hex, "NaN" and
// "Inf" — all of which strconv.ParseFloat would accept — are rejected.
func ParsePrice(s string) (float64, error) {
	if s == "" {
		return 0, errors.New(`empty price; want a decimal such as "32.7726000000"`)
	}
	dot := false
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return 0, fmt.Errorf("price %q: unexpected %q at position %d; want a decimal such as \"32.7726000000\"", trim(s), c, i+1)
		}
	}
	if digits == 0 || s[0] == '.' || s[len(s)-1] == '.' {
		return 0, fmt.Errorf("price %q: want digits on both sides of the point, e.g. \"0.5260000000\"", trim(s))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v > MaxPrice {
		return 0, fmt.Errorf("price %q: out of range; want at most %d USD per hour", trim(s), MaxPrice)
	}
	return v, nil
}

// trim keeps error messages short when a document puts garbage in a price.
func trim(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
