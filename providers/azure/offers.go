package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// regionName is what ARM region names look like.
var regionName = regexp.MustCompile(`^[a-z][a-z0-9]{1,40}$`)

// vmSize is one GPU VM size usable in one region.
type vmSize struct {
	name      string
	region    string
	gpu       pricing.GPUModel
	gpus      int
	vcpus     float64
	memoryGiB float64
	// zones the size can be pinned to; empty means regional only.
	zones []string
}

// priceByCapacity is a size's hourly Linux prices in one region.
type priceByCapacity struct {
	onDemand, spot       float64
	onDemandEff, spotEff string
}

// spotKey names an eviction-rate observation.
type spotKey struct{ size, region string }

// Offers gathers GPU offers for the query's regions (or the configured
// ones, or every region with GPU sizes). Regions are fetched concurrently,
// at most MaxConcurrency at once; a region whose SKUs or prices fail is left
// out and reported in errors.Join of *providers.RegionError. Eviction-rate
// buckets are a bonus: when Resource Graph fails the offers come without
// them and a warning is logged.
func (s *Source) Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error) {
	regions := q.Regions
	if len(regions) == 0 {
		regions = s.cfg.Regions
	}
	sizes := map[string][]vmSize{}
	failed := map[string]error{}
	var mu sync.Mutex
	// Region names go into OData and KQL filters: accept ARM names only.
	regions = slices.DeleteFunc(slices.Clone(regions), func(r string) bool {
		if !regionName.MatchString(r) {
			failed[r] = fmt.Errorf("invalid region name %q: want an ARM name such as eastus", r)
			return true
		}
		return false
	})
	if len(regions) == 0 && len(failed) > 0 {
		return nil, fmt.Errorf("azure: %w", errors.Join(mapValues(failed)...))
	}
	if len(regions) == 0 {
		all, err := s.listSizes(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("azure: %w", err)
		}
		for _, z := range all {
			sizes[z.region] = append(sizes[z.region], z)
		}
		regions = sortedKeys(sizes)
	} else {
		s.forEach(ctx, regions, func(r string) {
			got, err := s.listSizes(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[r] = err
				return
			}
			for _, z := range got {
				if z.region == r {
					sizes[r] = append(sizes[r], z)
				}
			}
		})
	}
	gpuWanted := func(m pricing.GPUModel) bool { return len(q.GPUs) == 0 || slices.Contains(q.GPUs, m) }
	for r, zs := range sizes {
		sizes[r] = slices.DeleteFunc(zs, func(z vmSize) bool { return !gpuWanted(z.gpu) })
	}

	prices := map[string]map[string]*priceByCapacity{}
	var todo []string
	for _, r := range regions {
		if failed[r] == nil && len(sizes[r]) > 0 {
			todo = append(todo, r)
		}
	}
	var signals map[spotKey]string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if signals, err = s.evictionRates(ctx, sizes, todo); err != nil {
			s.log.Warn("spot eviction rates unavailable; offers carry no spot signal", "err", err)
		}
	}()
	s.forEach(ctx, todo, func(r string) {
		p, err := s.retailPrices(ctx, r)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed[r] = err
			return
		}
		prices[r] = p
	})
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}

	now := s.cfg.Now().UTC()
	var offers []pricing.Offer
	unpriced := 0
	for _, r := range todo {
		if failed[r] != nil {
			continue
		}
		for _, z := range sizes[r] {
			p := prices[r][z.name]
			if p == nil || (p.onDemand == 0 && p.spot == 0) {
				unpriced++
				continue
			}
			spec, _ := pricing.Spec(z.gpu)
			o := pricing.Offer{
				Cloud: pricing.Azure, Region: r, InstanceType: z.name, GPU: z.gpu, GPUCount: z.gpus,
				GPUMemoryGiB: spec.MemoryGiB, VCPUs: z.vcpus, MemoryGiB: z.memoryGiB,
				OnDemandPrice: p.onDemand, SpotPrice: p.spot, ObservedAt: now, Source: SourceName,
			}
			if b, ok := signals[spotKey{strings.ToLower(z.name), r}]; ok && o.SpotPrice > 0 {
				if bucket, rate, err := parseEvictionBucket(b); err == nil {
					o.Spot.Bucket, o.Spot.InterruptionsPerHour = bucket, rate
				} else {
					s.log.Warn("ignoring eviction rate", "size", z.name, "region", r, "err", err)
				}
			}
			if len(z.zones) == 0 {
				offers = append(offers, o)
				continue
			}
			for _, zone := range z.zones {
				o.Zone = zone
				offers = append(offers, o)
			}
		}
	}
	if unpriced > 0 {
		s.log.Info("GPU sizes without retail prices skipped", "count", unpriced)
	}
	slices.SortFunc(offers, func(a, b pricing.Offer) int { return strings.Compare(a.Key(), b.Key()) })
	var errs []error
	for _, r := range sortedKeys(failed) {
		errs = append(errs, &providers.RegionError{Cloud: pricing.Azure, Region: r, Err: failed[r]})
	}
	return offers, errors.Join(errs...)
}

// forEach runs f for every region, at most MaxConcurrency at once.
func (s *Source) forEach(ctx context.Context, regions []string, f func(string)) {
	sem := make(chan struct{}, s.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for _, r := range regions {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(r)
		}()
	}
	wg.Wait()
}

// listSizes reads resource SKUs (one region, or all when region is "") and
// keeps the GPU VM sizes usable by the subscription.
func (s *Source) listSizes(ctx context.Context, region string) ([]vmSize, error) {
	opts := &armcompute.ResourceSKUsClientListOptions{}
	if region != "" {
		opts.Filter = to.Ptr(fmt.Sprintf("location eq '%s'", region))
	}
	pager := s.skus.NewListPager(opts)
	var out []vmSize
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing resource SKUs: %w", err)
		}
		for _, sku := range page.Value {
			out = append(out, s.usableSizes(sku)...)
		}
	}
	return out, nil
}

// usableSizes turns one resource SKU into a vmSize per location where the
// subscription may use it. A Location restriction (NotAvailableForSubscription)
// drops the location; Zone restrictions remove zones, and a size left with
// no zone is offered regionally.
func (s *Source) usableSizes(sku *armcompute.ResourceSKU) []vmSize {
	if sku == nil || str(sku.ResourceType) != "virtualMachines" {
		return nil
	}
	name := str(sku.Name)
	model, ok := gpuOfSize(name)
	if !ok {
		return nil
	}
	caps := map[string]string{}
	for _, c := range sku.Capabilities {
		if c != nil {
			caps[str(c.Name)] = str(c.Value)
		}
	}
	gpus, err1 := strconv.Atoi(caps["GPUs"])
	if _, has := caps["GPUs"]; !has {
		if n, ok := gpuCountOfSize(name); ok {
			gpus, err1 = n, nil
		}
	}
	vcpus, err2 := strconv.ParseFloat(caps["vCPUs"], 64)
	mem, err3 := strconv.ParseFloat(caps["MemoryGB"], 64)
	if err := errors.Join(err1, err2, err3); err != nil || gpus <= 0 || vcpus <= 0 || mem <= 0 {
		s.log.Debug("GPU size without usable capabilities", "size", name, "err", err)
		return nil
	}
	blockedLoc := map[string]bool{}
	blockedZones := map[string]map[string]bool{}
	for _, rs := range sku.Restrictions {
		if rs == nil || rs.RestrictionInfo == nil {
			continue
		}
		switch str((*string)(rs.Type)) {
		case string(armcompute.ResourceSKURestrictionsTypeLocation):
			for _, l := range rs.RestrictionInfo.Locations {
				blockedLoc[strings.ToLower(str(l))] = true
			}
		case string(armcompute.ResourceSKURestrictionsTypeZone):
			for _, l := range rs.RestrictionInfo.Locations {
				loc := strings.ToLower(str(l))
				if blockedZones[loc] == nil {
					blockedZones[loc] = map[string]bool{}
				}
				for _, z := range rs.RestrictionInfo.Zones {
					blockedZones[loc][str(z)] = true
				}
			}
		}
	}
	var out []vmSize
	for _, li := range sku.LocationInfo {
		if li == nil || li.Type != nil { // extended locations (edge zones) are not regions
			continue
		}
		loc := strings.ToLower(str(li.Location))
		if loc == "" || blockedLoc[loc] {
			continue
		}
		var zones []string
		for _, z := range li.Zones {
			if zn := str(z); zn != "" && !blockedZones[loc][zn] {
				zones = append(zones, zn)
			}
		}
		slices.Sort(zones)
		out = append(out, vmSize{name: name, region: loc, gpu: model, gpus: gpus, vcpus: vcpus, memoryGiB: mem, zones: zones})
	}
	return out
}

// retailPrices reads every page of Linux VM prices of one region from the
// Retail Prices API, following NextPageLink.
func (s *Source) retailPrices(ctx context.Context, region string) (map[string]*priceByCapacity, error) {
	u, err := url.Parse(s.cfg.RetailPricesURL)
	if err != nil {
		return nil, fmt.Errorf("retail prices URL: %w", err)
	}
	qv := u.Query()
	qv.Set("$filter", fmt.Sprintf("serviceName eq 'Virtual Machines' and armRegionName eq '%s' and priceType eq 'Consumption'", region))
	u.RawQuery = qv.Encode()
	next := u.String()
	out := map[string]*priceByCapacity{}
	for page := 0; next != ""; page++ {
		if page >= 1000 {
			return nil, errors.New("retail prices: more than 1000 pages; is NextPageLink looping?")
		}
		body, err := s.get(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("retail prices page %d: %w", page+1, err)
		}
		p, err := decodeRetailPage(body)
		if err != nil {
			return nil, fmt.Errorf("retail prices page %d: %w", page+1, err)
		}
		for _, it := range p.Items {
			if it.ArmRegionName != region {
				continue
			}
			rp, err := parseRetailItem(it)
			if err != nil {
				if !errors.Is(err, errSkipRow) {
					s.log.Warn("skipping retail price row", "region", region, "err", err)
				}
				continue
			}
			pc := out[rp.Size]
			if pc == nil {
				pc = &priceByCapacity{}
				out[rp.Size] = pc
			}
			if rp.Spot {
				if rp.Effective >= pc.spotEff {
					pc.spot, pc.spotEff = rp.Price, rp.Effective
				}
			} else if rp.Effective >= pc.onDemandEff {
				pc.onDemand, pc.onDemandEff = rp.Price, rp.Effective
			}
		}
		next = p.NextPageLink
	}
	return out, nil
}

// get fetches one URL through the retail pipeline (retries included) and
// returns the body of a 200 answer.
func (s *Source) get(ctx context.Context, u string) ([]byte, error) {
	req, err := runtime.NewRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := s.retail.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	return io.ReadAll(resp.Body)
}

// evictionRates asks Resource Graph for the Spot eviction-rate bucket of
// every size in the regions, following $skipToken.
func (s *Source) evictionRates(ctx context.Context, sizes map[string][]vmSize, regions []string) (map[spotKey]string, error) {
	names := map[string]bool{}
	for _, r := range regions {
		for _, z := range sizes[r] {
			names[strings.ToLower(z.name)] = true
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	query := fmt.Sprintf(`SpotResources
| where type =~ 'microsoft.compute/skuspotevictionrate/location'
| where sku.name in~ (%s) and location in~ (%s)
| project skuName=tostring(sku.name), location, spotEvictionRate=tostring(properties.evictionRate)`,
		quoteList(sortedKeys(names)), quoteList(regions))
	out := map[spotKey]string{}
	var skip *string
	for page := 0; ; page++ {
		if page >= 1000 {
			return nil, errors.New("resource graph: more than 1000 pages")
		}
		req := armresourcegraph.QueryRequest{
			Query:         &query,
			Subscriptions: []*string{&s.cfg.SubscriptionID},
			Options: &armresourcegraph.QueryRequestOptions{
				ResultFormat: to.Ptr(armresourcegraph.ResultFormatObjectArray),
				SkipToken:    skip,
			},
		}
		resp, err := s.graph.Resources(ctx, req, nil)
		if err != nil {
			return nil, fmt.Errorf("resource graph SpotResources: %w", err)
		}
		rows, ok := resp.Data.([]any)
		if !ok && resp.Data != nil {
			return nil, fmt.Errorf("resource graph: data is %T, want an object array", resp.Data)
		}
		for _, row := range rows {
			m, ok := row.(map[string]any)
			if !ok {
				continue
			}
			name, _ := m["skuName"].(string)
			loc, _ := m["location"].(string)
			rate, _ := m["spotEvictionRate"].(string)
			if name != "" && loc != "" && rate != "" {
				out[spotKey{strings.ToLower(name), strings.ToLower(loc)}] = rate
			}
		}
		if resp.SkipToken == nil || *resp.SkipToken == "" {
			return out, nil
		}
		skip = resp.SkipToken
	}
}

// quoteList renders names as a KQL list of string literals.
func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + strings.ReplaceAll(x, "'", "") + "'"
	}
	return strings.Join(q, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// str dereferences an optional string from the SDK's models.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func mapValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}
