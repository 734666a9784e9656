package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// retailItem is one row of the Azure Retail Prices API
// (https://prices.azure.com/api/retail/prices). Only the fields used are
// decoded.
type retailItem struct {
	CurrencyCode       string  `json:"currencyCode"`
	RetailPrice        float64 `json:"retailPrice"`
	ArmRegionName      string  `json:"armRegionName"`
	EffectiveStartDate string  `json:"effectiveStartDate"`
	MeterName          string  `json:"meterName"`
	ProductName        string  `json:"productName"`
	SkuName            string  `json:"skuName"`
	ServiceName        string  `json:"serviceName"`
	ArmSkuName         string  `json:"armSkuName"`
	UnitOfMeasure      string  `json:"unitOfMeasure"`
	Type               string  `json:"type"`
}

// retailPage is one page of the Retail Prices API.
type retailPage struct {
	BillingCurrency string       `json:"BillingCurrency"`
	Items           []retailItem `json:"Items"`
	NextPageLink    string       `json:"NextPageLink"`
	Count           int          `json:"Count"`
}

// retailPrice is what one retail row says about a VM size's Linux hourly
// price.
type retailPrice struct {
	Size  string
	Price float64
	Spot  bool
	// Effective is the row's effectiveStartDate; when two rows price the
	// same thing the later one wins.
	Effective string
}

// errSkipRow marks rows that are valid but price something else (Windows,
// Low Priority, DevTest, another unit).
var errSkipRow = errors.New("not a Linux pay-as-you-go or Spot hourly VM price")

// parseRetailItem decides what a Retail Prices row means for gpubroker: a
// Linux on-demand or Spot hourly price of a VM size, errSkipRow for rows of
// other products, or another error for rows that are broken.
func parseRetailItem(it retailItem) (retailPrice, error) {
	if it.Type != "Consumption" || it.UnitOfMeasure != "1 Hour" {
		return retailPrice{}, errSkipRow
	}
	if retailOS(it) != osLinux || strings.Contains(it.SkuName, "Low Priority") ||
		strings.Contains(it.MeterName, "Low Priority") {
		return retailPrice{}, errSkipRow
	}
	if it.ArmSkuName == "" {
		return retailPrice{}, errSkipRow // meters not tied to a VM size (e.g. licences)
	}
	if it.CurrencyCode != "USD" {
		return retailPrice{}, fmt.Errorf("%s: price in %q, want USD", it.ArmSkuName, it.CurrencyCode)
	}
	if math.IsNaN(it.RetailPrice) || math.IsInf(it.RetailPrice, 0) || it.RetailPrice < 0 {
		return retailPrice{}, fmt.Errorf("%s: retail price %v is not a price", it.ArmSkuName, it.RetailPrice)
	}
	if it.RetailPrice == 0 {
		return retailPrice{}, errSkipRow // placeholders for sizes not sold that way
	}
	return retailPrice{
		Size:      it.ArmSkuName,
		Price:     it.RetailPrice,
		Spot:      strings.HasSuffix(it.SkuName, " Spot"),
		Effective: it.EffectiveStartDate,
	}, nil
}

// retailOSKind is what operating system (or product) a retail row prices.
type retailOSKind uint8

const (
	osLinux retailOSKind = iota
	osWindows
	// osOther: Cloud Services roles and Dedicated Hosts share the service
	// name but are not VM prices.
	osOther
)

// retailOS decides from the fields that carry it whether a Virtual Machines
// row is the Linux rate. Azure has no OS field: the Windows rate is a
// separate product whose name says so, spelt "... Series Windows" for most
// sizes but abbreviated "... Srs Win" for newer ones (e.g. "Virtual Machines
// NCCadsv5 Srs Win", the confidential H100 sizes), and a few SKU and meter
// names carry the word too. A whole word is matched, so a size or series
// containing the letters (none today) is not mistaken for Windows. Public
// fetchers (SkyPilot's fetch_azure, dstack's gpuhunt) key on the same
// product-name words.
func retailOS(it retailItem) retailOSKind {
	for _, field := range []string{it.ProductName, it.SkuName, it.MeterName} {
		words := strings.FieldsFunc(strings.ToLower(field), func(r rune) bool {
			return r == ' ' || r == '/' || r == '-' || r == '(' || r == ')' || r == ','
		})
		for i, w := range words {
			switch w {
			case "windows", "win":
				return osWindows
			case "cloudservices":
				return osOther
			case "cloud", "dedicated":
				if w == "dedicated" || (i+1 < len(words) && words[i+1] == "services") {
					return osOther
				}
			}
		}
	}
	return osLinux
}

// decodeRetailPage decodes one Retail Prices page.
func decodeRetailPage(body []byte) (retailPage, error) {
	var p retailPage
	if err := json.Unmarshal(body, &p); err != nil {
		return retailPage{}, fmt.Errorf("decoding retail prices page: %w", err)
	}
	if p.BillingCurrency != "" && p.BillingCurrency != "USD" {
		return retailPage{}, fmt.Errorf("retail prices in %q, want USD", p.BillingCurrency)
	}
	return p, nil
}

// EvictionBuckets are Azure's Spot eviction-rate buckets, as Resource Graph
// reports them, in order.
var EvictionBuckets = []string{"0-5", "5-10", "10-15", "15-20", "20+"}

// hoursPerMonth converts monthly rates to hourly ones (30 days).
const hoursPerMonth = 720

// parseEvictionBucket reads a Resource Graph spotEvictionRate ("0-5",
// "5-10", ..., "20+", in percent) and converts it to an expected
// interruption rate per hour.
//
// Conversion (documented in docs/providers/azure.md): the bucket is the
// share of Spot VMs of that size evicted in a month (Azure computes it over
// the trailing 28 days). We take the bucket's midpoint p (25% for "20+"),
// treat evictions as a constant-hazard process, and get
// λ = -ln(1 - p/100) / 720 evictions per VM-hour. The same convention turns
// AWS Spot Advisor's monthly "interruption frequency" into a rate, so the
// clouds compare.
func parseEvictionBucket(s string) (bucket string, perHour float64, err error) {
	b := strings.ReplaceAll(strings.TrimSpace(s), " ", "")
	b = strings.TrimSuffix(b, "%")
	var lo, hi float64
	switch {
	case strings.HasSuffix(b, "+"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(b, "+"), 64)
		if err != nil || v != 20 {
			return "", 0, fmt.Errorf("eviction rate %q: want one of %s", s, strings.Join(EvictionBuckets, ", "))
		}
		lo, hi = 20, 30
	default:
		l, h, ok := strings.Cut(b, "-")
		if !ok {
			return "", 0, fmt.Errorf("eviction rate %q: want one of %s", s, strings.Join(EvictionBuckets, ", "))
		}
		var e1, e2 error
		lo, e1 = strconv.ParseFloat(l, 64)
		hi, e2 = strconv.ParseFloat(h, 64)
		if e1 != nil || e2 != nil || lo != math.Trunc(lo) || hi-lo != 5 || lo < 0 || lo > 15 || int(lo)%5 != 0 {
			return "", 0, fmt.Errorf("eviction rate %q: want one of %s", s, strings.Join(EvictionBuckets, ", "))
		}
	}
	p := (lo + hi) / 2
	bucket = fmt.Sprintf("%g-%g", lo, hi)
	if hi == 30 {
		bucket = "20+"
	}
	return bucket, -math.Log(1-p/100) / hoursPerMonth, nil
}

// sizeGPU maps an Azure VM size onto its GPU model. Resource SKUs give the
// GPU count but not the model; the size name carries it (the "_A100_v4"
// family), except for older series known by name.
var sizeGPU = []struct {
	re    *regexp.Regexp
	model pricing.GPUModel
}{
	{regexp.MustCompile(`^nd96asr_v4$`), pricing.A100_40},
	{regexp.MustCompile(`_a100_v4$`), pricing.A100_80},
	{regexp.MustCompile(`_h100_v5$`), pricing.H100},
	{regexp.MustCompile(`_h200_v5$`), pricing.H200},
	{regexp.MustCompile(`_t4_v3$`), pricing.T4},
	{regexp.MustCompile(`_b200_v6$`), pricing.B200},
	{regexp.MustCompile(`_gb200_v6$`), pricing.GB200},
	{regexp.MustCompile(`_mi300x_v5$`), pricing.MI300X},
	// NC A10 v4: NC8ads carries half an A10 (a partition, like the small
	// NVads A10 v5 sizes); NC16ads one whole A10, NC32ads two (the GPUs
	// capability says 1 and 2).
	{regexp.MustCompile(`^nc(16|32)ads_a10_v4$`), pricing.A10},
	// NVads A10 v5 below NV36 are fractional GPUs (1/6 to 1/2 of an A10):
	// they cannot run a whole-GPU workload.
	{regexp.MustCompile(`^nv(36|72)ads_a10_v5$`), pricing.A10},
	{regexp.MustCompile(`^nc\d+r?s_v3$`), pricing.V100},
	{regexp.MustCompile(`^nd40rs_v2$`), pricing.V100_32},
}

// sizeGPUCount is the GPU count of sizes whose resource SKU carries no
// "GPUs" capability (observed for ND MI300X v5 and ND GB200 v6, as public
// fetchers note too); the figures are from Azure's size documentation.
var sizeGPUCount = map[string]int{
	"nd96isr_mi300x_v5":     8,
	"nd96is_mi300x_v5":      8,
	"nd128isr_ndr_gb200_v6": 4,
	"nd128isr_gb200_v6":     4,
	"nd128isr_b200_v6":      8,
}

// gpuCountOfSize returns the documented GPU count of a size whose SKU
// omits it.
func gpuCountOfSize(size string) (int, bool) {
	n, ok := sizeGPUCount[strings.ToLower(strings.TrimPrefix(size, "Standard_"))]
	return n, ok
}

// gpuOfSize returns the GPU model of a VM size such as
// "Standard_NC24ads_A100_v4".
func gpuOfSize(size string) (pricing.GPUModel, bool) {
	s := strings.ToLower(strings.TrimPrefix(size, "Standard_"))
	for _, g := range sizeGPU {
		if g.re.MatchString(s) {
			return g.model, true
		}
	}
	return "", false
}
