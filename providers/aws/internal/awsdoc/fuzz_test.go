package awsdoc

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// The fuzz targets run their seeds in every `go test`; fuzz them with e.g.
//
//	go test ./providers/aws -run '^$' -fuzz FuzzParseAdvisor -fuzztime 20s

func FuzzParseAdvisor(f *testing.F) {
	if b, err := os.ReadFile("../../testdata/spot-advisor-data.json"); err == nil {
		f.Add(string(b))
	}
	f.Add(`{"ranges":[{"index":0,"label":"<5%"}],"spot_advisor":{"us-east-1":{"Linux":{"g5.xlarge":{"s":1,"r":0}}}}}`)
	f.Add(`{"ranges":[{"index":4,"label":">20%","max":100}],"spot_advisor":{"r":{"Linux":{"t":{"r":4}}}}}`)
	f.Add(`{"ranges":[{"index":0,"label":"5-10%"}],"spot_advisor":{"x":{"Windows":{}}}}`)
	f.Add(`{"ranges":null}`)
	f.Fuzz(func(t *testing.T, doc string) {
		a, err := ParseAdvisor(strings.NewReader(doc))
		if err != nil {
			if a != nil {
				t.Fatal("data returned with an error")
			}
			return
		}
		for region, m := range a.buckets {
			for typ, b := range m {
				s := a.Signal(region, typ)
				if s.Bucket != b.label || math.IsNaN(s.InterruptionsPerHour) || math.IsInf(s.InterruptionsPerHour, 0) || s.InterruptionsPerHour < 0 {
					t.Fatalf("%s %s: signal %+v from bucket %+v", region, typ, s, b)
				}
			}
		}
	})
}

func FuzzPriceListDocument(f *testing.F) {
	// Seed with the inner documents of a real-format page.
	if b, err := os.ReadFile("../../testdata/pricing/us-west-2.json"); err == nil {
		var page struct{ PriceList []string }
		if err := json.Unmarshal(b, &page); err != nil {
			f.Fatal(err)
		}
		for _, d := range page.PriceList {
			f.Add(d)
		}
	}
	f.Add(`{"product":{"sku":"S","attributes":{"instanceType":"g5.xlarge","regionCode":"us-east-1"}},"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"1.0060000000"}}}}}}}`)
	f.Add(`{"product":{"attributes":{"instanceType":"p5.48xlarge"}},"terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"unit":"Hrs","beginRange":"0","pricePerUnit":{"USD":"9e9"}}}}}}}`)
	f.Add(`{"terms":{"OnDemand":null}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		x := NewPriceIndex("us-east-1", gpuFamily)
		if err := x.Add(doc); err != nil {
			return
		}
		for typ, p := range x.Prices {
			if !gpuFamily(typ) || p <= 0 || p > MaxPrice || math.IsNaN(p) {
				t.Fatalf("kept %s at %v", typ, p)
			}
		}
	})
}

func FuzzParsePrice(f *testing.F) {
	for _, s := range []string{"32.7726000000", "0.0000000000", "1e3", "-1", "NaN", ".5", "1.", "0x10", "99999.99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParsePrice(s)
		if err != nil {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxPrice {
			t.Fatalf("ParsePrice(%q) = %v accepted", s, v)
		}
		for _, c := range s {
			if (c < '0' || c > '9') && c != '.' {
				t.Fatalf("ParsePrice(%q) accepted a non-decimal character %q", s, c)
			}
		}
	})
}
