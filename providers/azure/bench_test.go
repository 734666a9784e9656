package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// peakHeap samples the live heap while f runs and returns the highest value
// seen, in bytes.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	return peak.Load()
}

// BenchmarkRetailPrices normalises 50,000 Retail Prices rows (50 pages of
// 1,000, as the API pages them) for one region, through the azcore
// pipeline and a local server. Memory stays per page: the pages are never
// held together.
func BenchmarkRetailPrices(b *testing.B) {
	const pages, perPage = 50, 1000
	bodies := make([][]byte, pages)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
		w.Header().Set("Content-Type", "application/json")
		w.Write(bodies[n/perPage])
	}))
	defer srv.Close()
	for p := range pages {
		items := make([]retailItem, perPage)
		for i := range items {
			n := p*perPage + i
			items[i] = retailItem{CurrencyCode: "USD", RetailPrice: 0.1 + float64(n%977)/100, ArmRegionName: "eastus",
				EffectiveStartDate: "2024-05-01T00:00:00Z", MeterName: fmt.Sprintf("NC%d v3", n),
				ProductName: "Virtual Machines NC Series", SkuName: fmt.Sprintf("NC%d v3", n), ServiceName: "Virtual Machines",
				ArmSkuName: fmt.Sprintf("Standard_NC%d_v3", n), UnitOfMeasure: "1 Hour", Type: "Consumption"}
			switch n % 4 {
			case 1:
				items[i].SkuName += " Spot"
			case 2:
				items[i].ProductName += " Windows"
			}
		}
		next := ""
		if p+1 < pages {
			next = srv.URL + "/api/retail/prices?$skip=" + strconv.Itoa((p+1)*perPage)
		}
		bodies[p], _ = json.Marshal(retailPage{BillingCurrency: "USD", Items: items, NextPageLink: next, Count: perPage})
	}
	s, err := New(context.Background(), testConfig(srv.URL, srv.Client()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		peak = max(peak, peakHeap(func() {
			got, err := s.retailPrices(context.Background(), "eastus")
			if err != nil || len(got) != pages*perPage*3/4 {
				b.Fatalf("%d sizes, %v", len(got), err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(pages*perPage)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
