package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gpubroker/gpubroker/internal/heapprobe"
)

// BenchmarkRetailPrices normalises 50,000 Retail Prices rows (50 pages of
// 1,000, as the API pages them) for one region, through the azcore
// pipeline and a local server. Memory stays per page: the pages are never
// held together.
func BenchmarkRetailPrices(b *testing.B) {
	for _, pages := range []int{10, 50} {
		b.Run(fmt.Sprintf("rows=%d", pages*1000), func(b *testing.B) { benchRetail(b, pages) })
	}
}

func benchRetail(b *testing.B, pages int) {
	const perPage = 1000
	// One page of rows is served at every offset, so the fixture's size does
	// not grow with the row count and the peak measures the code, not it.
	items := make([]retailItem, perPage)
	for n := range items {
		items[n] = retailItem{CurrencyCode: "USD", RetailPrice: 0.1 + float64(n%977)/100, ArmRegionName: "eastus",
			EffectiveStartDate: "2024-05-01T00:00:00Z", MeterName: fmt.Sprintf("NC%d v3", n),
			ProductName: "Virtual Machines NC Series", SkuName: fmt.Sprintf("NC%d v3", n), ServiceName: "Virtual Machines",
			ArmSkuName: fmt.Sprintf("Standard_NC%d_v3", n/2), UnitOfMeasure: "1 Hour", Type: "Consumption"}
		switch n % 4 {
		case 1:
			items[n].SkuName += " Spot"
		case 2:
			items[n].ProductName += " Windows"
		}
	}
	itemsJSON, _ := json.Marshal(items)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
		next := "null"
		if n+perPage < pages*perPage {
			next = strconv.Quote(srv.URL + "/api/retail/prices?$skip=" + strconv.Itoa(n+perPage))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"BillingCurrency":"USD","CustomerEntityId":"Default","CustomerEntityType":"Retail","Items":%s,"NextPageLink":%s,"Count":%d}`, itemsJSON, next, perPage)
	}))
	defer srv.Close()
	s, err := New(context.Background(), testConfig(srv.URL, srv.Client()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		peak = max(peak, heapprobe.Peak(func() {
			got, err := s.retailPrices(context.Background(), "eastus")
			if err != nil || len(got) != perPage/2 {
				b.Fatalf("%d sizes, %v", len(got), err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(pages*perPage)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
