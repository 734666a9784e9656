package gcp

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

// BenchmarkListPrices normalises 50,000 Compute Engine SKUs (10 pages of
// 5,000, the catalog's page size) through the billing REST client and a
// local server: protojson decoding, description parsing, Money parsing and
// the per-region price index.
func BenchmarkListPrices(b *testing.B) {
	for _, pages := range []int{2, 10} {
		b.Run(fmt.Sprintf("skus=%d", pages*5000), func(b *testing.B) { benchListPrices(b, pages) })
	}
}

func benchListPrices(b *testing.B, pages int) {
	const perPage = 5000
	descs := []string{
		"Nvidia Tesla A100 GPU running in Americas", "A2 Instance Core running in Americas",
		"Spot Preemptible G2 Instance Ram running in EMEA", "Commitment v1: A2 Cpu in Americas for 1 Year",
		"Storage PD Capacity in Frankfurt", "N1 Predefined Instance Core running in APAC",
	}
	// One page of SKUs is served for every page token, so the fixture's size
	// does not grow with the SKU count and the peak measures the code.
	skus := make([]map[string]any, perPage)
	for n := range skus {
		usage, unit := "OnDemand", "h"
		if n%len(descs) == 2 {
			usage, unit = "Preemptible", "GiBy.h"
		}
		skus[n] = map[string]any{
			"name": fmt.Sprintf("services/6F81-5844-456A/skus/%04X-%04X", n, n%997), "skuId": fmt.Sprint(n),
			"description":    descs[n%len(descs)],
			"category":       map[string]any{"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute", "resourceGroup": "GPU", "usageType": usage},
			"serviceRegions": []string{fmt.Sprintf("region%d", n%40), fmt.Sprintf("region%d", (n+1)%40)},
			"pricingInfo": []map[string]any{{"pricingExpression": map[string]any{"usageUnit": unit,
				"tieredRates": []map[string]any{{"startUsageAmount": 0, "unitPrice": map[string]any{"currencyCode": "USD", "units": "1", "nanos": n % 999999999}}}},
				"currencyConversionRate": 1, "effectiveTime": "2026-12-01T08:15:06.263Z"}},
			"serviceProviderName": "Google",
		}
	}
	skusJSON, _ := json.Marshal(skus)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
		next := ""
		if n+1 < pages {
			next = strconv.Itoa(n + 1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"skus":%s,"nextPageToken":%q}`, skusJSON, next)
	}))
	defer srv.Close()
	s, err := New(context.Background(), Config{Project: project, HTTPClient: srv.Client(), BillingEndpoint: srv.URL,
		ComputeEndpoint: srv.URL, WithoutAuthentication: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		peak = max(peak, heapprobe.Peak(func() {
			got, err := s.listPrices(context.Background())
			if err != nil || len(got) == 0 {
				b.Fatalf("%d prices, %v", len(got), err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(pages*perPage)*float64(b.N)/b.Elapsed().Seconds(), "skus/s")
}
