package awsdoc

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestParsePrice(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		errHas  string
		wantErr bool
	}{
		{in: "32.7726000000", want: 32.7726},
		{in: "0.5260000000", want: 0.526},
		{in: "0.0000000000", want: 0},
		{in: "9.831", want: 9.831},
		{in: "12", want: 12},
		{in: "", errHas: "empty price"},
		{in: "1e3", errHas: `unexpected 'e' at position 2`},
		{in: "-1.0", errHas: `unexpected '-' at position 1`},
		{in: "+1.0", errHas: `unexpected '+'`},
		{in: "NaN", errHas: `unexpected 'N'`},
		{in: "Inf", errHas: `unexpected 'I'`},
		{in: "0x1p3", errHas: `unexpected 'x'`},
		{in: "1.2.3", errHas: `unexpected '.' at position 4`},
		{in: ".5", errHas: "digits on both sides"},
		{in: "5.", errHas: "digits on both sides"},
		{in: "1 000", errHas: `unexpected ' '`},
		{in: "1000000", errHas: "out of range"},
		{in: strings.Repeat("9", 400), errHas: "out of range"},
	}
	for _, tc := range tests {
		got, err := ParsePrice(tc.in)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("ParsePrice(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.errHas)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePrice(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestBucketRate(t *testing.T) {
	// λ = −ln(1 − p)/730 with p the label's representative monthly share.
	rate := func(p float64) float64 { return -math.Log(1-p) / 730 }
	tests := []struct {
		label  string
		want   float64
		errHas string
	}{
		{label: "<5%", want: rate(0.025)},
		{label: "5-10%", want: rate(0.075)},
		{label: "10-15%", want: rate(0.125)},
		{label: "15-20%", want: rate(0.175)},
		{label: ">20%", want: rate(0.30)},
		{label: " 5 - 10 % ", want: rate(0.075)},
		{label: ">80%", want: rate(0.99)}, // 120% capped
		{label: "5-10", errHas: "no %"},
		{label: "<0%", errHas: "want a label"},
		{label: "10-5%", errHas: "want a label"},
		{label: "a-b%", errHas: "want a label"},
		{label: "NaN-NaN%", errHas: "want a label"},
		{label: "", errHas: "no %"},
	}
	for _, tc := range tests {
		got, err := BucketRate(tc.label)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("BucketRate(%q) = %v, %v; want an error with %q", tc.label, got, err, tc.errHas)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("BucketRate(%q) = %v, %v; want %v", tc.label, got, err, tc.want)
		}
	}
}

func TestParseAdvisor(t *testing.T) {
	f, err := os.Open("../../testdata/spot-advisor-data.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := ParseAdvisor(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := a.Signal("us-east-1", "p4d.24xlarge"); s.Bucket != ">20%" || s.InterruptionsPerHour <= 0 {
		t.Errorf("us-east-1 p4d.24xlarge signal %+v, want bucket >20%%", s)
	}
	if s := a.Signal("us-east-1", "p4de.24xlarge"); s.Bucket != "" || s.InterruptionsPerHour != 0 {
		t.Errorf("unknown type signal %+v, want zero", s)
	}
	if s := (*Advisor)(nil).Signal("us-east-1", "g5.xlarge"); s.Bucket != "" {
		t.Errorf("nil advisor signal %+v, want zero", s)
	}

	bad := []struct{ doc, errHas string }{
		{`{"ranges":[{"index":0,"label":"<5%"}],"spot_advisor":{"us-east-1":{"Linux":{"g5.xlarge":{"s":1,"r":3}}}}}`, "us-east-1 Linux g5.xlarge: r=3 is not the index of any range"},
		{`{"ranges":[{"index":0,"label":"<5%"}],"spot_advisor":{"us-east-1":{"Linux":{"g5.xlarge":{"s":1}}}}}`, `no "r"`},
		{`{"ranges":[],"spot_advisor":{}}`, `no "ranges"`},
		{`{"ranges":[{"label":"<5%"}]}`, `ranges[0] has no "index"`},
		{`{"ranges":[{"index":0,"label":"<5%"},{"index":0,"label":"5-10%"}]}`, "index 0 appears twice"},
		{`{"ranges":[{"index":0,"label":"often"}]}`, `range label "often"`},
		{`{"ranges":[{"index":0,"label":"<5%"}],"spot_advisor":{"us-east-1":{"Linux":{"g5.xlarge":{"r":"0"}}}}}`, "is a JSON string, want int"},
		{`{"ranges":[{"index":0,"label":"<5%"}],"spot_ad`, "truncated"},
		{`{"ranges":[{"index":0 "label":"<5%"}]}`, "offset"},
		{``, "truncated"},
	}
	for _, tc := range bad {
		_, err := ParseAdvisor(strings.NewReader(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("ParseAdvisor(%s): %v; want an error with %q", tc.doc, err, tc.errHas)
		}
	}
}

func TestPriceIndexAdd(t *testing.T) {
	doc := func(typ, region, market, op, unit, usd string) string {
		return `{"product":{"sku":"SKU1","attributes":{"instanceType":"` + typ + `","regionCode":"` + region +
			`","marketoption":"` + market + `","operation":"` + op + `"}},"terms":{"OnDemand":{"SKU1.JRTCKXETXF":{"priceDimensions":{"SKU1.JRTCKXETXF.6YS6EN2CT7":{"unit":"` +
			unit + `","beginRange":"0","pricePerUnit":{"USD":"` + usd + `"}}}}},"Reserved":{"SKU1.38NPMPTW36":{"priceDimensions":{}}}}}`
	}
	tests := []struct {
		name   string
		docs   []string
		want   map[string]float64
		errHas string
	}{
		{name: "plain", docs: []string{doc("p4d.24xlarge", "us-east-1", "OnDemand", "RunInstances", "Hrs", "32.7726000000")}, want: map[string]float64{"p4d.24xlarge": 32.7726}},
		{name: "other family ignored", docs: []string{doc("m5.large", "us-east-1", "OnDemand", "RunInstances", "Hrs", "0.096")}, want: map[string]float64{}},
		{name: "g5g is not g5", docs: []string{doc("g5g.xlarge", "us-east-1", "OnDemand", "RunInstances", "Hrs", "0.42")}, want: map[string]float64{}},
		{name: "other region ignored", docs: []string{doc("g5.xlarge", "us-west-2", "OnDemand", "RunInstances", "Hrs", "1.006")}, want: map[string]float64{}},
		{name: "capacity block ignored", docs: []string{doc("p5.48xlarge", "us-east-1", "CapacityBlock", "RunInstances", "Hrs", "31.464")}, want: map[string]float64{}},
		{name: "windows operation ignored", docs: []string{doc("g5.xlarge", "us-east-1", "OnDemand", "RunInstances:0002", "Hrs", "1.2")}, want: map[string]float64{}},
		{name: "zero price skipped", docs: []string{doc("g5.xlarge", "us-east-1", "OnDemand", "RunInstances", "Hrs", "0.0000000000")}, want: map[string]float64{}},
		{name: "non-hourly unit skipped", docs: []string{doc("g5.xlarge", "us-east-1", "OnDemand", "RunInstances", "Quantity", "500")}, want: map[string]float64{}},
		{name: "duplicate keeps the lower", docs: []string{
			doc("g5.xlarge", "us-east-1", "OnDemand", "RunInstances", "Hrs", "1.2"),
			doc("g5.xlarge", "us-east-1", "", "", "Hrs", "1.006"),
		}, want: map[string]float64{"g5.xlarge": 1.006}},
		{name: "bad price", docs: []string{doc("g5.xlarge", "us-east-1", "OnDemand", "RunInstances", "Hrs", "one")}, errHas: `sku SKU1 (g5.xlarge): price "one"`},
		{name: "not an object", docs: []string{`["product"]`}, errHas: "is a JSON array"},
		{name: "trailing data", docs: []string{`{"product":{}} {}`}, errHas: "unexpected data after the object"},
		{name: "truncated", docs: []string{`{"product":{"attributes":{"instanceType":"g5.x`}, errHas: "truncated"},
		{name: "non-GPU document skipped unread", docs: []string{`{"product":{"attributes":{"instanceType":"m5.large"}},"terms":{"OnDemand":{"x":` + "\x00"}, want: map[string]float64{}},
		{name: "escaped key is decoded", docs: []string{`{"product":{"attributes":{"instanceT\u0079pe":"g5.xlarge","regionCode":"us-east-1"}},"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"1.006"}}}}}}}`}, want: map[string]float64{"g5.xlarge": 1.006}},
		{name: "syntax", docs: []string{`{"product":{"attributes":{"instanceType":g5}}}`}, errHas: "offset 42: invalid character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := NewPriceIndex("us-east-1", gpuFamily)
			var err error
			for _, d := range tc.docs {
				if err = x.Add(d); err != nil {
					break
				}
			}
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("add: %v; want an error with %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Prices) != len(tc.want) {
				t.Fatalf("prices %v, want %v", x.Prices, tc.want)
			}
			for k, v := range tc.want {
				if x.Prices[k] != v {
					t.Errorf("price of %s = %v, want %v", k, x.Prices[k], v)
				}
			}
		})
	}
}

// gpuFamily stands in for the aws package's family filter.
func gpuFamily(instanceType string) bool {
	f, _, _ := strings.Cut(instanceType, ".")
	switch f {
	case "g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en":
		return true
	}
	return false
}
