package fake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

var now = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func o(region, it string, gpu pricing.GPUModel) pricing.Offer {
	return pricing.Offer{Cloud: pricing.GCP, Region: region, InstanceType: it, GPU: gpu, GPUCount: 1, OnDemandPrice: 1}
}

func TestOffers(t *testing.T) {
	s, err := New(t.Context(), Config{Cloud: pricing.GCP, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s.SetOffers("us-central1", o("us-central1", "g2-standard-4", pricing.L4), o("us-central1", "a2-highgpu-1g", pricing.A100_40))
	s.SetOffers("europe-west4", o("europe-west4", "g2-standard-4", pricing.L4))
	s.SetOffers("asia-east1")
	boom := errors.New("boom")
	s.FailRegion("europe-west4", boom, o("europe-west4", "a2-highgpu-1g", pricing.A100_40))

	cases := []struct {
		name       string
		q          providers.Query
		wantOffers int
		wantFailed []string
	}{
		{"one region", providers.Query{Regions: []string{"us-central1"}}, 2, nil},
		{"gpu filter", providers.Query{Regions: []string{"us-central1"}, GPUs: []pricing.GPUModel{pricing.L4}}, 1, nil},
		{"empty region", providers.Query{Regions: []string{"asia-east1"}}, 0, nil},
		{"failed region returns partial", providers.Query{Regions: []string{"europe-west4"}}, 1, []string{"europe-west4"}},
		{"unknown region", providers.Query{Regions: []string{"mars-north1", "us-central1"}}, 2, []string{"mars-north1"}},
		{"all regions", providers.Query{}, 3, []string{"europe-west4"}},
	}
	for _, c := range cases {
		got, err := s.Offers(t.Context(), c.q)
		if len(got) != c.wantOffers {
			t.Errorf("%s: %d offers, want %d", c.name, len(got), c.wantOffers)
		}
		for _, g := range got {
			if !g.ObservedAt.Equal(now) || g.Source != "fake" {
				t.Errorf("%s: offer %s stamped %v %q", c.name, g.Key(), g.ObservedAt, g.Source)
			}
		}
		var failed []string
		for _, e := range unjoin(err) {
			var re *providers.RegionError
			if !errors.As(e, &re) || re.Cloud != pricing.GCP {
				t.Errorf("%s: error %v is not a gcp RegionError", c.name, e)
				continue
			}
			failed = append(failed, re.Region)
		}
		if len(failed) != len(c.wantFailed) || (len(failed) > 0 && failed[0] != c.wantFailed[0]) {
			t.Errorf("%s: failed regions %v, want %v", c.name, failed, c.wantFailed)
		}
	}
	if s.Calls() != len(cases) || len(s.Queries()) != len(cases) {
		t.Errorf("Calls() = %d, want %d", s.Calls(), len(cases))
	}
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestNextErrIsUsedOnce(t *testing.T) {
	s, _ := New(t.Context(), Config{})
	s.SetOffers("us-east-1", pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", InstanceType: "g5.xlarge", GPU: pricing.A10G, GPUCount: 1, OnDemandPrice: 1})
	boom := errors.New("throttled")
	s.NextErr(boom)
	if _, err := s.Offers(t.Context(), providers.Query{}); !errors.Is(err, boom) {
		t.Fatalf("first call err = %v, want %v", err, boom)
	}
	if got, err := s.Offers(t.Context(), providers.Query{}); err != nil || len(got) != 1 {
		t.Fatalf("second call = %d offers, %v; want 1, nil", len(got), err)
	}
	s.Reset()
	if s.Calls() != 0 {
		t.Errorf("Calls() after Reset = %d", s.Calls())
	}
	if _, err := s.Offers(t.Context(), providers.Query{Regions: []string{"us-east-1"}}); !errors.Is(err, ErrUnknownRegion) {
		t.Errorf("after Reset the region should be unknown, got %v", err)
	}
}

func TestDelayHonoursContext(t *testing.T) {
	s, _ := New(t.Context(), Config{Regions: []string{"r"}})
	s.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Offers(ctx, providers.Query{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
}

func TestNoCredentials(t *testing.T) {
	if _, err := New(t.Context(), Config{Cloud: pricing.Azure, NoCredentials: true}); !errors.Is(err, providers.ErrNoCredentials) {
		t.Fatalf("err = %v, want ErrNoCredentials", err)
	}
}

func TestFromCatalog(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromCatalog(t.Context(), pricing.Azure, cat)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Offers(t.Context(), providers.Query{})
	if err != nil || len(got) == 0 || len(got) != len(cat.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.Azure}})) {
		t.Fatalf("FromCatalog answered %d offers, %v", len(got), err)
	}
}

func TestRegionsAreBounded(t *testing.T) {
	s, _ := New(t.Context(), Config{MaxConcurrency: 2})
	var regions []string
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		s.SetOffers(r)
		regions = append(regions, r)
	}
	s.SetDelay(30 * time.Millisecond)
	if _, err := s.Offers(t.Context(), providers.Query{Regions: regions}); err != nil {
		t.Fatal(err)
	}
	if got := s.MaxInFlight(); got != 2 {
		t.Errorf("MaxInFlight = %d, want the bound 2", got)
	}
}
