package gcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/billing/apiv1/billingpb"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// noResults is the warning an aggregated list puts on a zone with nothing to
// list; any other warning means the zone could not be read.
const noResults = "NO_RESULTS_ON_PAGE"

// zoneAccel is one accelerator type offered in a zone.
type zoneAccel struct {
	name     string
	maxCards int
}

// machine is one machine type in a zone.
type machine struct {
	name   string
	vcpus  int
	memMiB int
	accel  string // attached accelerator type, "" for none
	count  int
}

// inventory is what Compute Engine lists, by zone.
type inventory struct {
	accels   map[string][]zoneAccel
	machines map[string][]machine
	// broken holds zones whose listing carried a warning other than "no
	// results" (e.g. UNREACHABLE), with that warning.
	broken map[string]string
}

// priceKey finds a SKU's hourly price for one region.
type priceKey struct {
	kind   skuKind
	name   string
	spot   bool
	region string
}

// n1Attachable are the accelerator types attached to N1 hosts rather than
// built into a machine type. Offers pair each with an n1-standard-8 per GPU,
// within every type's vCPU limit per GPU (V100: 12, T4: 24, P100: 16).
var n1Attachable = map[string]bool{"nvidia-tesla-t4": true, "nvidia-tesla-v100": true, "nvidia-tesla-p100": true,
	"nvidia-tesla-p4": true}

// Offers gathers GPU offers for the query's regions (or the configured ones,
// or all). Compute Engine and the billing catalog are listed once for all
// regions; a zone the API could not read fails its region, and the other
// regions' offers come back with errors.Join of *providers.RegionError.
func (s *Source) Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error) {
	regions := q.Regions
	if len(regions) == 0 {
		regions = s.cfg.Regions
	}
	want := func(region string) bool { return len(regions) == 0 || slices.Contains(regions, region) }

	var (
		wg               sync.WaitGroup
		sem              = make(chan struct{}, s.cfg.MaxConcurrency)
		accels           map[string][]zoneAccel
		machines         map[string][]machine
		brokenA, brokenM map[string]string
		prices           map[priceKey]float64
		errA, errM, errP error
	)
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
				f()
			case <-ctx.Done():
			}
		}()
	}
	run(func() { accels, brokenA, errA = s.listAccelerators(ctx) })
	run(func() { machines, brokenM, errM = s.listMachines(ctx) })
	run(func() { prices, errP = s.listPrices(ctx) })
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcp: %w", err)
	}
	if err := errors.Join(errA, errM, errP); err != nil {
		// Every region depends on these global listings.
		return nil, s.failAll(regions, err)
	}
	inv := inventory{accels: accels, machines: machines, broken: brokenA}
	for z, w := range brokenM {
		inv.broken[z] = w
	}

	now := s.cfg.Now().UTC()
	var offers []pricing.Offer
	failed := map[string]error{}
	for zone, warn := range inv.broken {
		if r := zoneRegion(zone); want(r) {
			failed[r] = errors.Join(failed[r], fmt.Errorf("zone %s not listed: %s", zone, warn))
		}
	}
	gpuWanted := func(m pricing.GPUModel) bool { return len(q.GPUs) == 0 || slices.Contains(q.GPUs, m) }
	unpriced := 0
	for zone, ms := range inv.machines {
		region := zoneRegion(zone)
		if !want(region) || failed[region] != nil {
			continue
		}
		for _, sh := range shapes(ms, inv.accels[zone]) {
			model, ok := pricing.NormalizeGPU(sh.accel, 0)
			if !ok {
				s.log.Debug("unknown accelerator type", "accelerator", sh.accel, "zone", zone)
				continue
			}
			if !gpuWanted(model) {
				continue
			}
			spec, _ := pricing.Spec(model)
			o := pricing.Offer{
				Cloud: pricing.GCP, Region: region, Zone: zone, InstanceType: sh.name,
				GPU: model, GPUCount: sh.count, GPUMemoryGiB: spec.MemoryGiB,
				VCPUs: float64(sh.host.vcpus), MemoryGiB: float64(sh.host.memMiB) / 1024,
				ObservedAt: now, Source: SourceName,
			}
			o.OnDemandPrice = price(prices, sh, region, false)
			o.SpotPrice = price(prices, sh, region, true)
			if o.OnDemandPrice == 0 && o.SpotPrice == 0 {
				unpriced++
				s.log.Debug("no price for shape", "instance_type", sh.name, "zone", zone)
				continue
			}
			offers = append(offers, o)
		}
	}
	if unpriced > 0 {
		s.log.Info("GPU shapes without catalog prices skipped", "count", unpriced)
	}
	slices.SortFunc(offers, func(a, b pricing.Offer) int { return strings.Compare(a.Key(), b.Key()) })
	var errs []error
	for _, r := range sortedKeys(failed) {
		errs = append(errs, &providers.RegionError{Cloud: pricing.GCP, Region: r, Err: failed[r]})
	}
	return offers, errors.Join(errs...)
}

// failAll turns a failure of a global listing into one RegionError per
// requested region, so callers keep those regions' last good data.
func (s *Source) failAll(regions []string, err error) error {
	if len(regions) == 0 {
		return fmt.Errorf("gcp: %w", err)
	}
	errs := make([]error, len(regions))
	for i, r := range regions {
		errs[i] = &providers.RegionError{Cloud: pricing.GCP, Region: r, Err: err}
	}
	return errors.Join(errs...)
}

// shape is one purchasable GPU VM: a machine type with built-in GPUs, or an
// N1 host with GPUs attached.
type shape struct {
	name   string
	host   machine
	accel  string
	count  int
	family string
}

// shapes lists a zone's GPU VM shapes.
func shapes(ms []machine, accels []zoneAccel) []shape {
	var out []shape
	n1 := map[string]machine{}
	for _, m := range ms {
		if m.accel != "" && m.count > 0 {
			out = append(out, shape{name: m.name, host: m, accel: m.accel, count: m.count, family: family(m.name)})
		}
		if strings.HasPrefix(m.name, "n1-standard-") {
			n1[m.name] = m
		}
	}
	for _, a := range accels {
		if !n1Attachable[a.name] {
			continue
		}
		for _, n := range []int{1, 2, 4, 8} {
			if n > a.maxCards {
				break
			}
			host, ok := n1[fmt.Sprintf("n1-standard-%d", 8*n)]
			if !ok {
				continue
			}
			out = append(out, shape{
				name: fmt.Sprintf("%s+%sx%d", host.name, a.name, n),
				host: host, accel: a.name, count: n, family: "n1",
			})
		}
	}
	return out
}

// family is the billing family of a machine type: the core and RAM SKUs
// that price its host. Most types are billed by their series ("a2" for
// "a2-highgpu-1g", "g2", "n1"), but A3 comes in variants with their own
// host rates: A3 Mega ("a3-megagpu-8g", SKUs "A3Plus ..."), A3 Ultra
// ("a3-ultragpu-8g", "A3Ultra ..."). There is no fallback from a variant to
// plain A3: a variant without its own SKUs is unpriced, never priced at A3
// High's rates. A3 Edge ("a3-edgegpu-8g") carries the same H100 80GB as A3
// High and is billed with the A3 core and RAM SKUs.
func family(name string) string {
	f, rest, _ := strings.Cut(name, "-")
	if f == "a3" {
		switch {
		case strings.HasPrefix(rest, "megagpu"):
			return "a3mega"
		case strings.HasPrefix(rest, "ultragpu"):
			return "a3ultra"
		}
	}
	return f
}

// price is the hourly price of a shape in a region, host plus GPUs, as GCP
// bills it; 0 when any part has no SKU there.
func price(p map[priceKey]float64, sh shape, region string, spot bool) float64 {
	// Families sold by the GPU slice (A4) have no host SKUs: the slice
	// price already holds the host's share.
	if v, ok := p[priceKey{skuGPUSlice, sh.accel, spot, region}]; ok {
		return math.Round(float64(sh.count)*v*1e6) / 1e6
	}
	core, ok1 := p[priceKey{skuCore, sh.family, spot, region}]
	ram, ok2 := p[priceKey{skuRAM, sh.family, spot, region}]
	gpu, ok3 := p[priceKey{skuGPU, sh.accel, spot, region}]
	if !ok1 || !ok2 || !ok3 {
		return 0
	}
	v := float64(sh.host.vcpus)*core + float64(sh.host.memMiB)/1024*ram + float64(sh.count)*gpu
	return math.Round(v*1e6) / 1e6
}

func (s *Source) listAccelerators(ctx context.Context) (map[string][]zoneAccel, map[string]string, error) {
	out, broken := map[string][]zoneAccel{}, map[string]string{}
	it := s.accels.AggregatedList(ctx, &computepb.AggregatedListAcceleratorTypesRequest{Project: s.cfg.Project}, s.callOpts...)
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, broken, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing accelerator types: %w", err)
		}
		zone, ok := strings.CutPrefix(pair.Key, "zones/")
		if !ok {
			continue
		}
		if w := pair.Value.GetWarning(); w != nil && w.GetCode() != noResults {
			broken[zone] = w.GetCode() + ": " + w.GetMessage()
			continue
		}
		for _, a := range pair.Value.GetAcceleratorTypes() {
			if a.GetDeprecated().GetState() == "OBSOLETE" || a.GetDeprecated().GetState() == "DELETED" {
				continue
			}
			out[zone] = append(out[zone], zoneAccel{name: a.GetName(), maxCards: int(a.GetMaximumCardsPerInstance())})
		}
	}
}

func (s *Source) listMachines(ctx context.Context) (map[string][]machine, map[string]string, error) {
	out, broken := map[string][]machine{}, map[string]string{}
	// The filter spares transferring thousands of CPU-only types; the
	// client-side checks below do not rely on it.
	filter := `name eq "(a2|a3|a4|a4x|g2|g4|n1-standard)-.*"`
	it := s.machines.AggregatedList(ctx, &computepb.AggregatedListMachineTypesRequest{Project: s.cfg.Project, Filter: &filter}, s.callOpts...)
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, broken, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing machine types: %w", err)
		}
		zone, ok := strings.CutPrefix(pair.Key, "zones/")
		if !ok {
			continue
		}
		if w := pair.Value.GetWarning(); w != nil && w.GetCode() != noResults {
			broken[zone] = w.GetCode() + ": " + w.GetMessage()
			continue
		}
		for _, m := range pair.Value.GetMachineTypes() {
			if m.GetGuestCpus() <= 0 || m.GetMemoryMb() <= 0 {
				continue
			}
			mt := machine{name: m.GetName(), vcpus: int(m.GetGuestCpus()), memMiB: int(m.GetMemoryMb())}
			if acc := m.GetAccelerators(); len(acc) > 0 {
				mt.accel, mt.count = acc[0].GetGuestAcceleratorType(), int(acc[0].GetGuestAcceleratorCount())
			}
			if mt.accel == "" && !strings.HasPrefix(mt.name, "n1-standard-") {
				continue
			}
			out[zone] = append(out[zone], mt)
		}
	}
}

// listPrices reads every Compute Engine SKU and keeps the GPU, core and RAM
// rates, by region.
func (s *Source) listPrices(ctx context.Context) (map[priceKey]float64, error) {
	out := map[priceKey]float64{}
	it := s.skus.ListSkus(ctx, &billingpb.ListSkusRequest{Parent: "services/" + ComputeEngineService, CurrencyCode: "USD"}, s.callOpts...)
	n, kept := 0, 0
	for {
		sku, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing Compute Engine SKUs: %w", err)
		}
		n++
		d, ok := parseSKUDescription(sku.GetDescription())
		if !ok {
			continue
		}
		switch ut := sku.GetCategory().GetUsageType(); {
		case ut == "OnDemand" && !d.Spot, ut == "Preemptible" && d.Spot:
		default:
			continue // commitments and mismatched labels
		}
		v, err := skuPrice(sku, d.Kind)
		if err != nil {
			s.log.Warn("skipping SKU", "sku", sku.GetSkuId(), "description", sku.GetDescription(), "err", err)
			continue
		}
		kept++
		for _, r := range sku.GetServiceRegions() {
			k := priceKey{d.Kind, d.Name, d.Spot, r}
			if old, dup := out[k]; dup && old != v {
				s.log.Debug("two SKUs price the same thing; keeping the first", "key", fmt.Sprint(k), "sku", sku.GetSkuId())
				continue
			}
			out[k] = v
		}
	}
	s.log.Debug("read Compute Engine SKUs", "skus", n, "used", kept)
	return out, nil
}

// skuPrice is a SKU's current hourly unit price: the latest pricing info's
// first non-zero tier (Compute Engine's hourly rates have one tier; a
// leading zero tier would be a free allowance).
func skuPrice(sku *billingpb.Sku, kind skuKind) (float64, error) {
	pi := sku.GetPricingInfo()
	if len(pi) == 0 {
		return 0, errors.New("no pricing info")
	}
	pe := pi[len(pi)-1].GetPricingExpression()
	wantUnit := "h"
	if kind == skuRAM {
		wantUnit = "GiBy.h"
	}
	if pe.GetUsageUnit() != wantUnit {
		return 0, fmt.Errorf("usage unit %q, want %q", pe.GetUsageUnit(), wantUnit)
	}
	for _, t := range pe.GetTieredRates() {
		up := t.GetUnitPrice()
		if up == nil {
			continue
		}
		v, err := moneyToFloat(up.GetCurrencyCode(), up.GetUnits(), up.GetNanos())
		if err != nil {
			return 0, err
		}
		if v > 0 {
			return v, nil
		}
	}
	return 0, errors.New("no non-zero tiered rate")
}

// zoneRegion is a zone's region: "us-central1" for "us-central1-a".
func zoneRegion(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
