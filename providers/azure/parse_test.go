package azure

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/pricing"
)

func TestParseRetailItem(t *testing.T) {
	base := retailItem{CurrencyCode: "USD", RetailPrice: 3.673, ArmRegionName: "eastus", MeterName: "NC24ads A100 v4",
		ProductName: "Virtual Machines NCads A100 v4 Series", SkuName: "NC24ads A100 v4", ServiceName: "Virtual Machines",
		ArmSkuName: "Standard_NC24ads_A100_v4", UnitOfMeasure: "1 Hour", Type: "Consumption", EffectiveStartDate: "2024-05-01T00:00:00Z"}
	with := func(f func(*retailItem)) retailItem { it := base; f(&it); return it }
	tests := []struct {
		name    string
		item    retailItem
		want    retailPrice
		skip    bool
		wantErr string
	}{
		{name: "on-demand", item: base, want: retailPrice{"Standard_NC24ads_A100_v4", 3.673, false, "2024-05-01T00:00:00Z"}},
		{name: "spot", item: with(func(i *retailItem) { i.SkuName += " Spot"; i.RetailPrice = 0.7346 }),
			want: retailPrice{"Standard_NC24ads_A100_v4", 0.7346, true, "2024-05-01T00:00:00Z"}},
		{name: "windows", item: with(func(i *retailItem) { i.ProductName += " Windows" }), skip: true},
		{name: "windows abbreviated", item: with(func(i *retailItem) { i.ProductName = "Virtual Machines NCCadsv5 Srs Win" }), skip: true},
		{name: "windows in sku name", item: with(func(i *retailItem) { i.SkuName += " Windows" }), skip: true},
		{name: "windows spot abbreviated", item: with(func(i *retailItem) {
			i.ProductName, i.SkuName = "Virtual Machines NCCadsv5 Srs Win", "NCC40ads H100 v5 Spot"
		}), skip: true},
		{name: "cloud services", item: with(func(i *retailItem) { i.ProductName = "Cloud Services NCads A100 v4 Series" }), skip: true},
		{name: "dedicated host", item: with(func(i *retailItem) { i.ProductName = "Virtual Machines Dedicated Host" }), skip: true},
		{name: "linux abbreviated series", item: with(func(i *retailItem) { i.ProductName = "Virtual Machines NCCadsv5 Srs" }),
			want: retailPrice{"Standard_NC24ads_A100_v4", 3.673, false, "2024-05-01T00:00:00Z"}},
		{name: "word inside another word is not windows", item: with(func(i *retailItem) { i.ProductName = "Virtual Machines Winter Series" }),
			want: retailPrice{"Standard_NC24ads_A100_v4", 3.673, false, "2024-05-01T00:00:00Z"}},
		{name: "low priority", item: with(func(i *retailItem) { i.SkuName += " Low Priority" }), skip: true},
		{name: "devtest", item: with(func(i *retailItem) { i.Type = "DevTestConsumption" }), skip: true},
		{name: "reservation", item: with(func(i *retailItem) { i.Type = "Reservation"; i.UnitOfMeasure = "1 Hour" }), skip: true},
		{name: "monthly unit", item: with(func(i *retailItem) { i.UnitOfMeasure = "1/Month" }), skip: true},
		{name: "no size", item: with(func(i *retailItem) { i.ArmSkuName = "" }), skip: true},
		{name: "zero price", item: with(func(i *retailItem) { i.RetailPrice = 0 }), skip: true},
		{name: "euros", item: with(func(i *retailItem) { i.CurrencyCode = "EUR" }), wantErr: `price in "EUR", want USD`},
		{name: "negative", item: with(func(i *retailItem) { i.RetailPrice = -1 }), wantErr: "not a price"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRetailItem(tc.item)
			switch {
			case tc.skip:
				if !errors.Is(err, errSkipRow) {
					t.Fatalf("got %+v, %v; want skipped", got, err)
				}
			case tc.wantErr != "":
				if err == nil || errors.Is(err, errSkipRow) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
			}
		})
	}
}

func TestParseEvictionBucket(t *testing.T) {
	tests := []struct {
		in     string
		bucket string
		pct    float64 // monthly eviction share the rate is derived from
		bad    bool
	}{
		{"0-5", "0-5", 2.5, false},
		{"5-10", "5-10", 7.5, false},
		{"10-15", "10-15", 12.5, false},
		{"15-20", "15-20", 17.5, false},
		{"20+", "20+", 25, false},
		{" 5 - 10 ", "5-10", 7.5, false},
		{"0-5%", "0-5", 2.5, false},
		{"", "", 0, true},
		{"20-25", "", 0, true},
		{"3-8", "", 0, true},
		{"10+", "", 0, true},
		{"5-10-15", "", 0, true},
		{"NaN-5", "", 0, true},
		{"high", "", 0, true},
	}
	prev := 0.0
	for _, tc := range tests {
		b, rate, err := parseEvictionBucket(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("parseEvictionBucket(%q) = %q, %v; want an error", tc.in, b, rate)
			}
			continue
		}
		want := -math.Log(1-tc.pct/100) / 720
		if err != nil || b != tc.bucket || math.Abs(rate-want) > 1e-12 {
			t.Errorf("parseEvictionBucket(%q) = %q, %v, %v; want %q, %v", tc.in, b, rate, err, tc.bucket, want)
		}
	}
	for _, b := range EvictionBuckets {
		_, rate, _ := parseEvictionBucket(b)
		if rate <= prev {
			t.Errorf("rate of %q (%v) not above the bucket before it", b, rate)
		}
		prev = rate
	}
}

func TestGPUOfSize(t *testing.T) {
	tests := map[string]pricing.GPUModel{
		"Standard_NC24ads_A100_v4":       pricing.A100_80,
		"Standard_ND96amsr_A100_v4":      pricing.A100_80,
		"Standard_ND96asr_v4":            pricing.A100_40,
		"Standard_ND96isr_H100_v5":       pricing.H100,
		"Standard_NC40ads_H100_v5":       pricing.H100,
		"Standard_ND96isr_H200_v5":       pricing.H200,
		"Standard_NC4as_T4_v3":           pricing.T4,
		"Standard_NV36ads_A10_v5":        pricing.A10,
		"Standard_NC6s_v3":               pricing.V100,
		"Standard_NC24rs_v3":             pricing.V100,
		"Standard_ND40rs_v2":             pricing.V100_32,
		"Standard_NV6ads_A10_v5":         "",
		"Standard_D4s_v5":                "",
		"Standard_NC6":                   "",
		"Standard_NC16ads_A10_v4":        pricing.A10,
		"Standard_NC32ads_A10_v4":        pricing.A10,
		"Standard_NC8ads_A10_v4":         "",
		"Standard_ND96isr_MI300X_v5":     pricing.MI300X,
		"Standard_ND128isr_NDR_GB200_v6": pricing.GB200,
		"Standard_ND128isr_B200_v6":      pricing.B200,
		"Standard_NCC40ads_H100_v5":      pricing.H100,
	}
	for size, want := range tests {
		got, ok := gpuOfSize(size)
		if got != want || ok != (want != "") {
			t.Errorf("gpuOfSize(%q) = %q, %v; want %q", size, got, ok, want)
		}
	}
}

func FuzzParseRetailItem(f *testing.F) {
	f.Add([]byte(`{"currencyCode":"USD","retailPrice":3.673,"armRegionName":"eastus","skuName":"NC24ads A100 v4 Spot","productName":"Virtual Machines NCads A100 v4 Series","armSkuName":"Standard_NC24ads_A100_v4","unitOfMeasure":"1 Hour","type":"Consumption"}`))
	f.Add([]byte(`{"currencyCode":"USD","retailPrice":-1e309,"unitOfMeasure":"1 Hour","type":"Consumption","armSkuName":"x"}`))
	f.Add([]byte(`{"retailPrice":"3.6"}`))
	f.Add([]byte(`{"BillingCurrency":"USD","Items":[{}],"NextPageLink":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Pages and items both come from outside.
		if p, err := decodeRetailPage(data); err == nil {
			for _, it := range p.Items {
				checkItem(t, it)
			}
		}
		var it retailItem
		if json.Unmarshal(data, &it) == nil {
			checkItem(t, it)
		}
	})
}

func checkItem(t *testing.T, it retailItem) {
	rp, err := parseRetailItem(it)
	if err != nil {
		return
	}
	if rp.Size == "" || !(rp.Price > 0) || math.IsInf(rp.Price, 0) {
		t.Fatalf("accepted %+v as %+v", it, rp)
	}
	if strings.Contains(it.ProductName, "Windows") || strings.Contains(it.SkuName, "Low Priority") {
		t.Fatalf("accepted a Windows or Low Priority row %+v", it)
	}
	if rp.Spot != strings.HasSuffix(it.SkuName, " Spot") {
		t.Fatalf("spot %v for sku name %q", rp.Spot, it.SkuName)
	}
}

func FuzzParseEvictionBucket(f *testing.F) {
	for _, s := range append(EvictionBuckets, "", "5 - 10", "20+%", "-5-0", "1e1-15", "0x0-5", "+20") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, rate, err := parseEvictionBucket(s)
		if err != nil {
			return
		}
		known := false
		for _, k := range EvictionBuckets {
			known = known || k == b
		}
		if !known || !(rate > 0) || rate > 1 || math.IsNaN(rate) {
			t.Fatalf("parseEvictionBucket(%q) = %q, %v", s, b, rate)
		}
	})
}

// FuzzRetailOS feeds arbitrary names and prices through the row
// classifier: it must never panic, and a row it keeps is a Linux row with a
// finite, positive USD price.
func FuzzRetailOS(f *testing.F) {
	f.Add("Virtual Machines NCCadsv5 Srs Win", "NCC40ads H100 v5 Spot", "NCC40ads H100 v5 Spot", "Standard_NCC40ads_H100_v5", 2.84)
	f.Add("Virtual Machines NCads A100 v4 Series", "NC24ads A100 v4", "NC24ads A100 v4", "Standard_NC24ads_A100_v4", 3.673)
	f.Add("Virtual Machines ND MI300X v5 Series Windows", "ND96isr MI300X v5", "", "Standard_ND96isr_MI300X_v5", 52.416)
	f.Add("", "", "", "", math.NaN())
	f.Fuzz(func(t *testing.T, product, sku, meter, arm string, price float64) {
		it := retailItem{CurrencyCode: "USD", RetailPrice: price, ProductName: product, SkuName: sku, MeterName: meter,
			ArmSkuName: arm, UnitOfMeasure: "1 Hour", Type: "Consumption"}
		got, err := parseRetailItem(it)
		if err != nil {
			return
		}
		if retailOS(it) != osLinux || got.Price <= 0 || math.IsInf(got.Price, 0) || got.Size != arm {
			t.Fatalf("kept %+v from %+v", got, it)
		}
		for _, f := range []string{product, sku, meter} {
			for _, w := range strings.Fields(strings.ToLower(f)) {
				if w == "windows" || w == "win" {
					t.Fatalf("kept a row naming %q: %+v", w, it)
				}
			}
		}
	})
}
