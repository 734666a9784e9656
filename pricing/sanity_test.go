package pricing

import (
	"reflect"
	"testing"
	"time"
)

func TestCheckSanity(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	off := func(region, typ string, od, spot float64) Offer {
		return Offer{Cloud: AWS, Region: region, InstanceType: typ, GPU: H100, GPUCount: 8, OnDemandPrice: od, SpotPrice: spot}
	}
	cat := NewCatalog([]Offer{
		off("us-east-1", "p5.48xlarge", 98.32, 30),
		off("us-east-2", "p5.48xlarge", 98.32, 98.32), // spot = on-demand
		off("eu-west-2", "p5.48xlarge", 127.816, 0),
		off("eu-north-1", "p5.48xlarge", 250, 40), // outlier (median 112.9)
		off("ap-south-1", "p5.48xlarge", 0, 20),   // spot only
		off("us-west-2", "p4d.24xlarge", 32.77, 40),
	}, at, "test")
	s := cat.CheckSanity()
	want := map[string][]Issue{
		"aws/us-east-2//p5.48xlarge":  {SpotNotCheaper},
		"aws/eu-north-1//p5.48xlarge": {RegionalOutlier},
		"aws/ap-south-1//p5.48xlarge": {NoOnDemand},
		"aws/us-west-2//p4d.24xlarge": {SpotNotCheaper},
	}
	if !reflect.DeepEqual(s.ByKey, want) {
		t.Errorf("issues %v\nwant %v", s.ByKey, want)
	}
	if s.Counts[SpotNotCheaper] != 2 || s.Counts[NoOnDemand] != 1 || s.Counts[RegionalOutlier] != 1 || s.Offers != 6 {
		t.Errorf("counts %v of %d", s.Counts, s.Offers)
	}

	p := cat.ForPlanning()
	byKey := map[string]Offer{}
	for _, o := range p.Offers() {
		byKey[o.Key()] = o
	}
	if _, ok := byKey["aws/ap-south-1//p5.48xlarge"]; ok {
		t.Error("spot-only offer kept for planning")
	}
	if o := byKey["aws/us-east-2//p5.48xlarge"]; o.SpotPrice != 0 || o.OnDemandPrice != 98.32 {
		t.Errorf("spot at on-demand kept as a discount: %+v", o)
	}
	if o := byKey["aws/us-east-1//p5.48xlarge"]; o.SpotPrice != 30 {
		t.Errorf("a real discount dropped: %+v", o)
	}
	if p.Len() != 5 || !p.GeneratedAt.Equal(at) {
		t.Errorf("planning catalog has %d offers at %v", p.Len(), p.GeneratedAt)
	}
}

// TestEmbeddedSnapshotSanity pins what the check finds in the embedded
// data, so a regenerated snapshot with new oddities is noticed.
func TestEmbeddedSnapshotSanity(t *testing.T) {
	cat, err := EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	s := cat.CheckSanity()
	if s.Counts[NoOnDemand] == 0 || s.Counts[SpotNotCheaper] == 0 {
		t.Errorf("the snapshot has spot-only rows and spot = on-demand rows (SOURCE.md); got %v", s.Counts)
	}
	for _, o := range cat.ForPlanning().Offers() {
		if o.OnDemandPrice == 0 || (o.SpotPrice > 0 && o.SpotPrice >= o.OnDemandPrice) {
			t.Fatalf("planning catalog keeps %+v", o)
		}
	}
}
