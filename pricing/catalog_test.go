package pricing

import (
	"slices"
	"testing"
	"time"
)

func testOffers() []Offer {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return []Offer{
		{Cloud: AWS, Region: "us-east-1", Zone: "use1-az1", InstanceType: "p4d.24xlarge", GPU: A100_40, GPUCount: 8, GPUMemoryGiB: 40, OnDemandPrice: 32.77, SpotPrice: 12, ObservedAt: at},
		{Cloud: AWS, Region: "eu-west-1", Zone: "euw1-az1", InstanceType: "g4dn.xlarge", GPU: T4, GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 0.587, ObservedAt: at},
		{Cloud: GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: "a2-ultragpu-8g", GPU: A100_80, GPUCount: 8, GPUMemoryGiB: 80, OnDemandPrice: 23.57, SpotPrice: 16.09, ObservedAt: at},
		{Cloud: Azure, Region: "eastus", InstanceType: "Standard_NC4as_T4_v3", GPU: T4, GPUCount: 1, GPUMemoryGiB: 16, OnDemandPrice: 0.526, SpotPrice: 0.09, ObservedAt: at},
		{Cloud: AWS, Region: "us-west-2", Zone: "usw2-az3", InstanceType: "p5e.48xlarge", GPU: H200, GPUCount: 8, GPUMemoryGiB: 141, SpotPrice: 15.77, ObservedAt: at},
	}
}

func keys(os []Offer) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.InstanceType)
	}
	return out
}

func TestCatalogQuery(t *testing.T) {
	cat := NewCatalog(testOffers(), time.Time{}, "test")
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"all", Query{}, []string{"g4dn.xlarge", "p4d.24xlarge", "p5e.48xlarge", "Standard_NC4as_T4_v3", "a2-ultragpu-8g"}},
		{"by gpu", Query{GPUs: []GPUModel{T4}}, []string{"g4dn.xlarge", "Standard_NC4as_T4_v3"}},
		{"by count", Query{MinGPUCount: 8}, []string{"p4d.24xlarge", "p5e.48xlarge", "a2-ultragpu-8g"}},
		{"max count", Query{MaxGPUCount: 1}, []string{"g4dn.xlarge", "Standard_NC4as_T4_v3"}},
		{"min memory", Query{MinGPUMemoryGiB: 80}, []string{"p5e.48xlarge", "a2-ultragpu-8g"}},
		{"cloud", Query{Clouds: []Cloud{GCP, Azure}}, []string{"Standard_NC4as_T4_v3", "a2-ultragpu-8g"}},
		{"region glob", Query{Regions: []string{"us-*"}}, []string{"p4d.24xlarge", "p5e.48xlarge", "a2-ultragpu-8g"}},
		{"bad glob matches nothing", Query{Regions: []string{"["}}, nil},
		{"spot only", Query{Capacity: Spot}, []string{"p4d.24xlarge", "p5e.48xlarge", "Standard_NC4as_T4_v3", "a2-ultragpu-8g"}},
		{"on-demand only", Query{Capacity: OnDemand}, []string{"g4dn.xlarge", "p4d.24xlarge", "Standard_NC4as_T4_v3", "a2-ultragpu-8g"}},
		{"max price any capacity", Query{MaxPricePerHour: 1}, []string{"g4dn.xlarge", "Standard_NC4as_T4_v3"}},
		{"max spot price", Query{Capacity: Spot, MaxPricePerHour: 13}, []string{"p4d.24xlarge", "Standard_NC4as_T4_v3"}},
		{"combined", Query{GPUs: []GPUModel{A100_40, A100_80}, Clouds: []Cloud{AWS}, Capacity: Spot}, []string{"p4d.24xlarge"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := keys(cat.Query(tt.q))
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestMergeKeepsRegionsWithoutFreshData(t *testing.T) {
	old := NewCatalog(testOffers(), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "snapshot")
	later := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	fresh := []Offer{{Cloud: AWS, Region: "us-east-1", Zone: "use1-az2", InstanceType: "p4d.24xlarge", GPU: A100_40, GPUCount: 8, OnDemandPrice: 30, ObservedAt: later}}
	got := old.Merge(fresh, later, "live")
	if got.Len() != 5 {
		t.Fatalf("merged catalog has %d offers, want 5 (one region replaced 1→1)", got.Len())
	}
	for _, o := range got.Query(Query{Regions: []string{"us-east-1"}}) {
		if o.Zone != "use1-az2" {
			t.Errorf("us-east-1 still holds old offer %s", o.Key())
		}
	}
	if n := len(got.Query(Query{Regions: []string{"eu-west-1"}})); n != 1 {
		t.Errorf("eu-west-1 lost its offer on a refresh that did not cover it: %d", n)
	}
	if !got.GeneratedAt.Equal(later) {
		t.Errorf("GeneratedAt = %v, want %v", got.GeneratedAt, later)
	}
	if empty := old.Merge(nil, later, "live"); empty.Len() != old.Len() {
		t.Errorf("empty refresh changed the catalog: %d → %d offers", old.Len(), empty.Len())
	}
}

func TestWithSpotDefaults(t *testing.T) {
	offers := testOffers()
	offers[0].Spot = SpotSignal{Bucket: "5-10%", InterruptionsPerHour: 0.001}
	cat := NewCatalog(offers, time.Time{}, "t").WithSpotDefaults(DefaultSpotDefaults())
	for _, o := range cat.Offers() {
		switch {
		case o.SpotPrice == 0:
			if o.Spot != (SpotSignal{}) {
				t.Errorf("%s has no spot price but got a signal %+v", o.Key(), o.Spot)
			}
		case o.InstanceType == "p4d.24xlarge":
			if o.Spot.Default || o.Spot.InterruptionsPerHour != 0.001 {
				t.Errorf("observed signal replaced by default: %+v", o.Spot)
			}
		default:
			if !o.Spot.Default || o.Spot.InterruptionsPerHour <= 0 {
				t.Errorf("%s: want a default signal, got %+v", o.Key(), o.Spot)
			}
		}
	}
}

func TestPrices(t *testing.T) {
	o := testOffers()[0]
	if p, ok := o.PricePerGPUHour(OnDemand); !ok || p != 32.77/8 {
		t.Errorf("PricePerGPUHour = %v %v", p, ok)
	}
	if p, ok := o.PricePerTFLOPHour(Spot); !ok || p != 12.0/(312*8) {
		t.Errorf("PricePerTFLOPHour = %v %v", p, ok)
	}
	p5e := testOffers()[4]
	if _, ok := p5e.Price(OnDemand); ok {
		t.Error("p5e has no on-demand price but Price said it has")
	}
}

func TestNormalizeAndSuggestGPU(t *testing.T) {
	tests := []struct {
		name string
		mib  int
		want GPUModel
		ok   bool
	}{
		{"A100", 40960, A100_40, true},
		{"A100", 81920, A100_80, true},
		{"nvidia-tesla-a100", 0, A100_40, true},
		{"nvidia-a100-80gb", 0, A100_80, true},
		{"V100", 32768, V100_32, true},
		{"H100-MEGA", 81920, H100, true},
		{"nvidia-l4", 0, L4, true},
		{"K80", 0, "", false},
	}
	for _, tt := range tests {
		got, ok := NormalizeGPU(tt.name, tt.mib)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeGPU(%q, %d) = %q %v, want %q %v", tt.name, tt.mib, got, ok, tt.want, tt.ok)
		}
	}
	for in, want := range map[string]string{"A100-80": "A100-80GB", "h10": "H100", "L40": "L40S", "t4x": "T4", "zzzzzzzz": ""} {
		if got := SuggestGPU(in); got != want {
			t.Errorf("SuggestGPU(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSpecTableComplete(t *testing.T) {
	for _, s := range Specs() {
		if s.MemoryGiB <= 0 || s.TensorTFLOPS <= 0 || s.MemoryBandwidthGBs <= 0 || s.Source == "" || s.Family == "" {
			t.Errorf("incomplete spec row %+v", s)
		}
	}
	for _, name := range []GPUModel{T4, L4, A10G, A10, L40S, V100, A100_40, A100_80, H100, H200} {
		if _, ok := Spec(name); !ok {
			t.Errorf("canonical model %s missing from the spec table", name)
		}
	}
}

func BenchmarkCatalogQuery(b *testing.B) {
	cat, err := EmbeddedCatalog()
	if err != nil {
		b.Fatal(err)
	}
	q := Query{GPUs: []GPUModel{A100_80, H100}, Clouds: []Cloud{AWS, GCP}, Regions: []string{"us-*"}, Capacity: Spot}
	b.ReportAllocs()
	for b.Loop() {
		if len(cat.Query(q)) == 0 {
			b.Fatal("no offers")
		}
	}
}

// TestNewGPUNames: the names clouds use for the GPU models added with
// Blackwell, MI300X and G4 map onto the canonical ones.
func TestNewGPUNames(t *testing.T) {
	for name, want := range map[string]GPUModel{
		"B200": B200, "nvidia-b200": B200, "B300": B300, "nvidia-gb200": GB200, "GB200": GB200,
		"MI300X": MI300X, "amd-mi300x": MI300X, "nvidia-rtx-pro-6000": RTXPro6000, "RTX-PRO-6000": RTXPro6000,
		"nvidia-tesla-p4": P4, "nvidia-h200-141gb": H200,
	} {
		if got, ok := NormalizeGPU(name, 0); !ok || got != want {
			t.Errorf("NormalizeGPU(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, m := range []GPUModel{B200, B300, GB200, MI300X, RTXPro6000, P4} {
		s, ok := Spec(m)
		if !ok || s.MemoryGiB <= 0 || s.TensorTFLOPS <= 0 || s.MemoryBandwidthGBs <= 0 || s.Source == "" || s.Vendor == "" {
			t.Errorf("spec of %s: %+v", m, s)
		}
	}
	if s, _ := Spec(MI300X); s.Vendor != "AMD" {
		t.Errorf("MI300X vendor %q", s.Vendor)
	}
}

// GPUOffers is Query by one GPU model without the slice: same offers, same
// (key) order, on the embedded catalog's every model.
func TestGPUOffersMatchesQuery(t *testing.T) {
	cat, err := EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	models := map[GPUModel]bool{}
	for _, o := range cat.Offers() {
		models[o.GPU] = true
	}
	if len(models) < 2 {
		t.Fatalf("embedded catalog has %d GPU models", len(models))
	}
	for g := range models {
		want := cat.Query(Query{GPUs: []GPUModel{g}})
		var got []Offer
		for o := range cat.GPUOffers(g) {
			got = append(got, o)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d offers, want %d", g, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: offer %d is %s, want %s", g, i, got[i].Key(), want[i].Key())
			}
		}
	}
	if all := slices.Collect(cat.All()); !slices.Equal(all, cat.Offers()) {
		t.Fatalf("All yields %d offers, Offers returns %d or they differ", len(all), cat.Len())
	}
	n := 0
	for range cat.GPUOffers(T4) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("stopping after the first offer yielded %d", n)
	}
	if got := len(slices.Collect(cat.GPUOffers("no-such-gpu"))); got != 0 {
		t.Fatalf("unknown model: %d offers", got)
	}
}
