//go:build unix

package aws

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"

	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/gpubroker/gpubroker/internal/cputime"
)

// syntheticPricing is an in-process Price List API serving pages of
// real-format product documents (the shape of testdata/pricing, Reserved
// terms included) without HTTP, so the benchmark measures our
// normalisation, not the network. Each page is a fresh allocation, as
// the SDK's decoder would hand us, and the heap is sampled on every call.
type syntheticPricing struct {
	pages    int
	template []string
	peak     uint64
}

func (p *syntheticPricing) GetProducts(_ context.Context, in *awspricing.GetProductsInput, _ ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.peak = max(p.peak, ms.HeapInuse)
	n := 0
	if in.NextToken != nil {
		n, _ = strconv.Atoi(*in.NextToken)
	}
	out := &awspricing.GetProductsOutput{FormatVersion: in.FormatVersion, PriceList: make([]string, len(p.template))}
	for i, d := range p.template {
		out.PriceList[i] = strings.Clone(d)
	}
	if n+1 < p.pages {
		tok := strconv.Itoa(n + 1)
		out.NextToken = &tok
	}
	return out, nil
}

// syntheticPage builds 100 product documents: GPU types from every family
// gathered and, like a real region, a majority of other types the index
// must skip.
func syntheticPage() []string {
	families := append(append([]string{}, GPUFamilies...), "m5", "c5", "r6i", "t3", "m7g", "c7i", "x2idn", "i4i", "g5g", "inf2")
	sizes := []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge", "metal", "16xlarge"}
	var page []string
	for i := 0; len(page) < 100; i++ {
		typ := families[i%len(families)] + "." + sizes[(i/len(families))%len(sizes)]
		sku := fmt.Sprintf("SKU%013d", i)
		price := fmt.Sprintf("%.10f", 0.1+float64(i)*0.731)
		page = append(page, productDoc(sku, typ, "us-east-1", price))
	}
	return page
}

// productDoc is one Price List product document in the API's format.
func productDoc(sku, typ, region, price string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"product":{"productFamily":"Compute Instance","attributes":{"enhancedNetworkingSupported":"Yes","intelTurboAvailable":"Yes","memory":"16 GiB","dedicatedEbsThroughput":"Up to 3500 Mbps","vcpu":"4","classicnetworkingsupport":"false","capacitystatus":"Used","locationType":"AWS Region","storage":"1 x 250 NVMe SSD","instanceFamily":"GPU instance","operatingSystem":"Linux","intelAvx2Available":"Yes","regionCode":%q,"physicalProcessor":"AMD EPYC 7R32","clockSpeed":"3.3 GHz","ecu":"NA","networkPerformance":"Up to 10 Gigabit","servicename":"Amazon Elastic Compute Cloud","gpuMemory":"24 GB","vpcnetworkingsupport":"true","instanceType":%q,"tenancy":"Shared","usagetype":"BoxUsage:%s","normalizationSizeFactor":"8","intelAvxAvailable":"Yes","processorFeatures":"AMD Turbo","servicecode":"AmazonEC2","licenseModel":"No License required","currentGeneration":"Yes","preInstalledSw":"NA","location":"US East (N. Virginia)","processorArchitecture":"64-bit","marketoption":"OnDemand","operation":"RunInstances","availabilityzone":"NA","gpu":"1"},"sku":%q},"serviceCode":"AmazonEC2","terms":{"OnDemand":{"%s.JRTCKXETXF":{"priceDimensions":{"%s.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","endRange":"Inf","description":"$%s per On Demand Linux %s Instance Hour","appliesTo":[],"rateCode":"%s.JRTCKXETXF.6YS6EN2CT7","beginRange":"0","pricePerUnit":{"USD":%q}}},"sku":%q,"effectiveDate":"2026-11-01T00:00:00Z","offerTermCode":"JRTCKXETXF","termAttributes":{}}},"Reserved":{`,
		region, typ, typ, sku, sku, sku, price, typ, sku, price, sku)
	for i, code := range []string{"38NPMPTW36", "4NA7Y494T4", "6QCMYABX3D", "7NE97W5U4E", "BPH4J8HBKS", "CUZHX8X6JH"} {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s.%s":{"priceDimensions":{"%s.%s.2TG2D8R56U":{"unit":"Quantity","description":"Upfront Fee","appliesTo":[],"rateCode":"%s.%s.2TG2D8R56U","pricePerUnit":{"USD":"4321"}},"%s.%s.6YS6EN2CT7":{"unit":"Hrs","endRange":"Inf","description":"Linux/UNIX (Amazon VPC), reserved","appliesTo":[],"rateCode":"%s.%s.6YS6EN2CT7","beginRange":"0","pricePerUnit":{"USD":"0.2100000000"}}},"sku":%q,"effectiveDate":"2026-11-01T00:00:00Z","offerTermCode":%q,"termAttributes":{"LeaseContractLength":"3yr","OfferingClass":"standard","PurchaseOption":"Partial Upfront"}}`,
			sku, code, sku, code, sku, code, sku, code, sku, code, sku, code)
	}
	b.WriteString(`}},"version":"20261120183415","publicationDate":"2026-11-20T18:34:15Z"}`)
	return b.String()
}

// BenchmarkNormalizePriceList streams N Price List items (pages of 100)
// through the paginator and the price index. peak-heap-MB is the largest
// HeapInuse seen between pages; it stays flat from 5,000 to 50,000 items
// because no more than one page is alive at a time.
func BenchmarkNormalizePriceList(b *testing.B) {
	page := syntheticPage()
	docBytes := 0
	for _, d := range page {
		docBytes += len(d)
	}
	for _, items := range []int{5_000, 50_000} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			fake := &syntheticPricing{pages: items / len(page), template: page}
			s := &Source{pricing: fake, log: slog.New(slog.DiscardHandler)}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			b.SetBytes(int64(docBytes * fake.pages))
			cpu0 := cputime.Process()
			b.ResetTimer()
			for b.Loop() {
				prices, err := s.onDemandPrices(context.Background(), "us-east-1")
				if err != nil {
					b.Fatal(err)
				}
				if len(prices) == 0 {
					b.Fatal("no prices")
				}
			}
			// On a shared machine wall time overstates the work; process
			// CPU time (all threads, GC included) per item does not.
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N)/float64(items), "cpu-ns/item")
			b.ReportMetric(float64(fake.peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(fake.peak-min(base, fake.peak))/(1<<20), "peak-over-start-MB")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(items), "ns/item")
		})
	}
}
