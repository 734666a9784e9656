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
	if strings.Contains(it.ProductName, "Windows") || strings.Contains(it.SkuName, "Low Priority") ||
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
	// NVads A10 v5 below NV36 are fractional GPUs (1/6 to 1/2 of an A10):
	// they cannot run a whole-GPU workload.
	{regexp.MustCompile(`^nv(36|72)ads_a10_v5$`), pricing.A10},
	{regexp.MustCompile(`^nc\d+r?s_v3$`), pricing.V100},
	{regexp.MustCompile(`^nd40rs_v2$`), pricing.V100_32},
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
