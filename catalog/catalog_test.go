package catalog

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

func cheapH100(at time.Time) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
		GPU: pricing.H100, GPUCount: 8, GPUMemoryGiB: 80, VCPUs: 192, MemoryGiB: 2048, OnDemandPrice: 1.25, SpotPrice: 0.5,
		ObservedAt: at, Source: "test refresh"}
}

func TestLoad(t *testing.T) {
	snap, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, dsn := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "g.db") },
		"postgres": func(t *testing.T) string { return testpg.DSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			st, err := store.Open(t.Context(), dsn(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			empty, err := Load(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			if empty.Len() != snap.Len() || empty.Source != snap.Source {
				t.Fatalf("empty store: %d offers from %q; want the snapshot's %d from %q", empty.Len(), empty.Source, snap.Len(), snap.Source)
			}
			if _, err := st.SaveOffers(t.Context(), pricing.AWS, "us-east-1", []pricing.Offer{cheapH100(at)}, at); err != nil {
				t.Fatal(err)
			}
			a, err := Load(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Load(t.Context(), st)
			if !a.GeneratedAt.Equal(at) || a.Len() != b.Len() {
				t.Fatalf("generated %v (want %v); two loads gave %d and %d offers", a.GeneratedAt, at, a.Len(), b.Len())
			}
			got := a.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.AWS}, Regions: []string{"us-east-1"}})
			if len(got) != 1 || got[0].OnDemandPrice != 1.25 {
				t.Fatalf("us-east-1 after the store overlay: %d offers %+v; want only the stored one", len(got), got)
			}
			// The stored offer has no interruption rate: the AWS default fills it.
			if !got[0].Spot.Default || got[0].Spot.InterruptionsPerHour != pricing.DefaultSpotDefaults()[pricing.AWS].InterruptionsPerHour {
				t.Fatalf("spot signal %+v; want the AWS default", got[0].Spot)
			}
			other := a.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.GCP}})
			if len(other) == 0 {
				t.Fatal("regions the store does not hold must keep the snapshot's offers")
			}
		})
	}
}

func TestLoadWithoutStore(t *testing.T) {
	var nilStore *store.Store
	for _, st := range []Stored{nil, nilStore} {
		c, err := Load(t.Context(), st)
		if err != nil || c.Len() == 0 {
			t.Fatalf("Load(%T) = %v, %v", st, c, err)
		}
	}
}

type failing struct{}

func (failing) Catalog(context.Context) (*pricing.Catalog, error) {
	return nil, errors.New("disk on fire")
}

func TestLoadStoreError(t *testing.T) {
	if _, err := Load(t.Context(), failing{}); err == nil {
		t.Fatal("a failing store must fail the load, not silently serve the snapshot")
	}
}

func TestOpenStoreDoesNotCreateTheDefaultDatabase(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	st, err := OpenStore(t.Context(), "", store.Options{})
	if err != nil || st != nil {
		t.Fatalf("OpenStore without a default file = %v, %v; want nil, nil", st, err)
	}
}
