package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// newBrokerClient checks the endpoint and returns the project's one typed
// client of the broker API with the admin token.
func newBrokerClient(endpoint, token string, hc *http.Client, version string) (*apiv1.Client, error) {
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL of a broker, e.g. http://127.0.0.1:8080", endpoint)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	c := apiv1.NewClient(u.String(), token, hc)
	c.UserAgent = "terraform-provider-gpubroker/" + version
	return c, nil
}

// isNotFound reports a 404 from the broker: the workload is gone.
func isNotFound(err error) bool { return apiv1.StatusOf(err) == http.StatusNotFound }

// offersAnswer is a catalog's answer to an offers query.
type offersAnswer struct {
	GeneratedAt time.Time
	Source      string
	Offers      []pricing.Offer
	// Issues are the price-sanity flags by offer key, judged over the whole
	// catalog; nil when the source does not give them (the broker's API).
	Issues map[string][]pricing.Issue
}

// brokerSource answers the data sources from a broker through apiv1.
type brokerSource struct{ c *apiv1.Client }

func (b brokerSource) Offers(ctx context.Context, q pricing.Query) (offersAnswer, error) {
	aq := apiv1.OffersQuery{Regions: q.Regions, Capacity: string(q.Capacity), MinGPUs: q.MinGPUCount, MaxGPUs: q.MaxGPUCount,
		MinGPUMemoryGiB: q.MinGPUMemoryGiB, MaxPrice: q.MaxPricePerHour}
	for _, g := range q.GPUs {
		aq.GPUs = append(aq.GPUs, string(g))
	}
	for _, c := range q.Clouds {
		aq.Clouds = append(aq.Clouds, string(c))
	}
	ans, err := b.c.Offers(ctx, aq)
	if err != nil {
		return offersAnswer{}, err
	}
	out := offersAnswer{GeneratedAt: ans.GeneratedAt, Source: ans.Source, Offers: make([]pricing.Offer, 0, len(ans.Offers))}
	for _, o := range ans.Offers {
		out.Offers = append(out.Offers, pricingOffer(o))
	}
	return out, nil
}

// pricingOffer is the wire offer as the pricing package's, so that prices
// per GPU-hour and per TFLOP-hour and staleness come from pricing's own
// methods, online as offline.
func pricingOffer(o apiv1.Offer) pricing.Offer {
	return pricing.Offer{Cloud: pricing.Cloud(o.Cloud), Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		GPU: pricing.GPUModel(o.GPU), GPUCount: o.GPUCount, GPUMemoryGiB: o.GPUMemoryGiB, VCPUs: o.VCPUs, MemoryGiB: o.MemoryGiB,
		OnDemandPrice: o.OnDemandPrice, SpotPrice: o.SpotPrice,
		Spot: pricing.SpotSignal{Bucket: o.Spot.Bucket, InterruptionsPerHour: o.Spot.InterruptionsPerHour,
			PlacementScore: o.Spot.PlacementScore, Availability: o.Spot.Availability, Default: o.Spot.Default},
		ObservedAt: o.ObservedAt, Source: o.Source}
}

// Plan posts the policy document to the broker's plan API. The answer is
// the optimizer's plan in its documented JSON (docs/plan.md), read back
// into the optimizer's type so online and offline placements are set by
// one function.
func (b brokerSource) Plan(ctx context.Context, name string, doc []byte) (*optimizer.Plan, error) {
	p, err := b.c.PlanPolicy(ctx, name, doc)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the broker's plan: %w", err)
	}
	var out optimizer.Plan
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("reading the broker's plan: %w", err)
	}
	return &out, nil
}
