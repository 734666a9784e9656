package provider

import (
	"context"
	"fmt"
	"math"
	stdpath "path"
	"sort"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

func newOffersDataSource() datasource.DataSource { return &offersDataSource{} }

type offersDataSource struct{ data *providerData }

var _ datasource.DataSourceWithConfigure = (*offersDataSource)(nil)

// offersModel is the data source's configuration and answer. The answer
// has every field of `gpubroker prices --output json` (docs/pricing.md).
type offersModel struct {
	GPUModels       []types.String `tfsdk:"gpu_models"`
	MinGPUCount     types.Int64    `tfsdk:"min_gpu_count"`
	MaxGPUCount     types.Int64    `tfsdk:"max_gpu_count"`
	MinGPUMemoryGiB types.Float64  `tfsdk:"min_gpu_memory_gib"`
	Clouds          []types.String `tfsdk:"clouds"`
	Regions         []types.String `tfsdk:"regions"`
	CapacityType    types.String   `tfsdk:"capacity_type"`
	MaxPricePerHour types.Float64  `tfsdk:"max_price_per_hour"`
	SortBy          types.String   `tfsdk:"sort_by"`
	Limit           types.Int64    `tfsdk:"limit"`
	StaleAfter      types.String   `tfsdk:"stale_after"`

	CatalogSource types.String  `tfsdk:"catalog_source"`
	GeneratedAt   types.String  `tfsdk:"generated_at"`
	AgeHours      types.Float64 `tfsdk:"age_hours"`
	Capacity      types.String  `tfsdk:"capacity"`
	SortedBy      types.String  `tfsdk:"sorted_by"`
	Offers        []offerModel  `tfsdk:"offers"`
}

type offerModel struct {
	Cloud           types.String   `tfsdk:"cloud"`
	Region          types.String   `tfsdk:"region"`
	Zone            types.String   `tfsdk:"zone"`
	InstanceType    types.String   `tfsdk:"instance_type"`
	GPU             types.String   `tfsdk:"gpu"`
	GPUCount        types.Int64    `tfsdk:"gpu_count"`
	GPUMemoryGiB    types.Float64  `tfsdk:"gpu_memory_gib"`
	VCPUs           types.Float64  `tfsdk:"vcpus"`
	MemoryGiB       types.Float64  `tfsdk:"memory_gib"`
	OnDemandPerHour types.Float64  `tfsdk:"on_demand_usd_per_hour"`
	SpotPerHour     types.Float64  `tfsdk:"spot_usd_per_hour"`
	PerGPUHour      types.Float64  `tfsdk:"usd_per_gpu_hour"`
	PerTFLOPHour    types.Float64  `tfsdk:"usd_per_tflop_hour"`
	SpotSignal      types.Object   `tfsdk:"spot_signal"`
	ObservedAt      types.String   `tfsdk:"observed_at"`
	Stale           types.Bool     `tfsdk:"stale"`
	DateUnknown     types.Bool     `tfsdk:"date_unknown"`
	Issues          []types.String `tfsdk:"issues"`
	Source          types.String   `tfsdk:"source"`
}

var spotSignalTypes = map[string]attr.Type{
	"bucket":                 types.StringType,
	"interruptions_per_hour": types.Float64Type,
	"placement_score":        types.Int64Type,
	"availability":           types.Float64Type,
	"default":                types.BoolType,
}

func (d *offersDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_offers"
}

func (d *offersDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "GPU offers of the catalog (the broker's, or the embedded snapshot offline), filtered and sorted " +
			"by price per GPU-hour or per TFLOP-hour, with the same fields as `gpubroker prices --output json`. " +
			"Prices change: read them here rather than copying them into resources.",
		Attributes: map[string]schema.Attribute{
			"gpu_models": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "GPU models to keep (" + gpuList() + "); aliases such as `a100-80gb` are accepted."},
			"min_gpu_count":      schema.Int64Attribute{Optional: true, MarkdownDescription: "Least GPUs per instance."},
			"max_gpu_count":      schema.Int64Attribute{Optional: true, MarkdownDescription: "Most GPUs per instance."},
			"min_gpu_memory_gib": schema.Float64Attribute{Optional: true, MarkdownDescription: "Least memory per GPU, GiB."},
			"clouds": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Clouds to keep: `aws`, `gcp`, `azure`."},
			"regions": schema.ListAttribute{ElementType: types.StringType, Optional: true,
				MarkdownDescription: "Region globs, e.g. `us-*`, `europe-west4`."},
			"capacity_type": schema.StringAttribute{Optional: true,
				MarkdownDescription: "`on-demand` or `spot`: keep only offers sold that way and sort by that price. Default: every offer, sorted by on-demand price (offers with only a spot price last)."},
			"max_price_per_hour": schema.Float64Attribute{Optional: true,
				MarkdownDescription: "Highest instance price, USD/hour, at `capacity_type` (or the cheaper price when it is not set)."},
			"sort_by": schema.StringAttribute{Optional: true,
				MarkdownDescription: "`gpu-hour` (USD per GPU-hour, default) or `tflop` (USD per dense tensor TFLOP-hour)."},
			"limit":       schema.Int64Attribute{Optional: true, MarkdownDescription: "Keep at most this many offers (after sorting); default all."},
			"stale_after": schema.StringAttribute{Optional: true, MarkdownDescription: "Mark offers observed longer ago than this as stale; default `168h`."},

			"catalog_source": computed("Where the prices come from (the embedded snapshot and its date, or the broker's refreshed catalog)."),
			"generated_at":   computed("When the newest price data was produced (RFC 3339)."),
			"age_hours":      schema.Float64Attribute{Computed: true, MarkdownDescription: "Age of the catalog in hours."},
			"capacity":       computed("The capacity type the offers are ranked by."),
			"sorted_by":      computed("The sort key: `gpu-hour` or `tflop`."),
			"offers": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "The offers, cheapest first.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cloud":                  computed("`aws`, `gcp` or `azure`."),
					"region":                 computed("Region."),
					"zone":                   computed("Zone; empty for regional offers."),
					"instance_type":          computed("Instance type, e.g. `p5.48xlarge`."),
					"gpu":                    computed("Canonical GPU model."),
					"gpu_count":              schema.Int64Attribute{Computed: true, MarkdownDescription: "GPUs per instance."},
					"gpu_memory_gib":         schema.Float64Attribute{Computed: true, MarkdownDescription: "Memory per GPU, GiB."},
					"vcpus":                  schema.Float64Attribute{Computed: true, MarkdownDescription: "vCPUs per instance."},
					"memory_gib":             schema.Float64Attribute{Computed: true, MarkdownDescription: "Host memory, GiB."},
					"on_demand_usd_per_hour": schema.Float64Attribute{Computed: true, MarkdownDescription: "On-demand price of the instance, USD/hour; null when not sold on demand."},
					"spot_usd_per_hour":      schema.Float64Attribute{Computed: true, MarkdownDescription: "Spot price, USD/hour; null when unknown."},
					"usd_per_gpu_hour":       schema.Float64Attribute{Computed: true, MarkdownDescription: "Price per GPU-hour at the ranking capacity type."},
					"usd_per_tflop_hour":     schema.Float64Attribute{Computed: true, MarkdownDescription: "Price per dense tensor TFLOP-hour at the ranking capacity type."},
					"spot_signal": schema.SingleNestedAttribute{Computed: true,
						MarkdownDescription: "What is known about spot interruptions; null without a spot price.",
						Attributes: map[string]schema.Attribute{
							"bucket":                 computed("The cloud's interruption-frequency label, e.g. `5-10%`."),
							"interruptions_per_hour": schema.Float64Attribute{Computed: true, MarkdownDescription: "Expected interruptions per hour used by the cost model."},
							"placement_score":        schema.Int64Attribute{Computed: true, MarkdownDescription: "AWS spot placement score 1-10; 0 if unknown."},
							"availability":           schema.Float64Attribute{Computed: true, MarkdownDescription: "Recently observed share of time spot capacity could be had; 0 if unknown."},
							"default":                schema.BoolAttribute{Computed: true, MarkdownDescription: "True when the figures are the per-cloud default, not an observation."},
						}},
					"observed_at": computed("When the price was observed (RFC 3339)."),
					"stale":       schema.BoolAttribute{Computed: true, MarkdownDescription: "Observed longer ago than `stale_after`."},
					"date_unknown": schema.BoolAttribute{Computed: true,
						MarkdownDescription: "The price's source states no pricing date; `observed_at` is the day it was copied."},
					"issues": schema.ListAttribute{Computed: true, ElementType: types.StringType,
						MarkdownDescription: "Price-sanity flags (`spot-not-below-on-demand`, `no-on-demand-price`, `regional-outlier`; docs/pricing.md), " +
							"judged over the whole catalog. Offline only; null online, where the broker's offers API does not carry them."},
					"source": computed("Where this offer's price came from."),
				}},
			},
		},
	}
}

func (d *offersDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	data, err := configured(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	d.data = data
}

// query turns the filters into a catalog query, with a diagnostic at each
// bad value.
func (m *offersModel) query() (pricing.Query, []attrProblem) {
	var q pricing.Query
	var probs []attrProblem
	for i, g := range m.GPUModels {
		mod, ok := pricing.ParseGPUModel(g.ValueString())
		if !ok {
			msg := fmt.Sprintf("unknown GPU %q", g.ValueString())
			if s := pricing.SuggestGPU(g.ValueString()); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; known GPUs: " + gpuList()
			}
			probs = append(probs, attrProblem{path.Root("gpu_models").AtListIndex(i), msg})
			continue
		}
		q.GPUs = append(q.GPUs, mod)
	}
	for i, c := range m.Clouds {
		cl, err := pricing.ParseCloud(c.ValueString())
		if err != nil {
			probs = append(probs, attrProblem{path.Root("clouds").AtListIndex(i), err.Error()})
			continue
		}
		q.Clouds = append(q.Clouds, cl)
	}
	for i, r := range m.Regions {
		if err := checkGlob(r.ValueString()); err != nil {
			probs = append(probs, attrProblem{path.Root("regions").AtListIndex(i), fmt.Sprintf("region glob %q: %v", r.ValueString(), err)})
			continue
		}
		q.Regions = append(q.Regions, r.ValueString())
	}
	intIn := func(v types.Int64, name string, lo, hi int64) int {
		if v.IsNull() || v.IsUnknown() {
			return 0
		}
		if n := v.ValueInt64(); n < lo || n > hi {
			probs = append(probs, attrProblem{path.Root(name), fmt.Sprintf("%s %d: want %d to %d", name, n, lo, hi)})
			return 0
		}
		return int(v.ValueInt64())
	}
	floatIn := func(v types.Float64, name string, hi float64) float64 {
		if v.IsNull() || v.IsUnknown() {
			return 0
		}
		if f := v.ValueFloat64(); math.IsNaN(f) || f < 0 || f > hi {
			probs = append(probs, attrProblem{path.Root(name), fmt.Sprintf("%s %v: want 0 to %v", name, f, hi)})
			return 0
		}
		return v.ValueFloat64()
	}
	q.MinGPUCount = intIn(m.MinGPUCount, "min_gpu_count", 0, policy.MaxGPUsPerInstance)
	q.MaxGPUCount = intIn(m.MaxGPUCount, "max_gpu_count", 0, policy.MaxGPUsPerInstance)
	if q.MaxGPUCount > 0 && q.MinGPUCount > q.MaxGPUCount {
		probs = append(probs, attrProblem{path.Root("max_gpu_count"), fmt.Sprintf("max_gpu_count %d is less than min_gpu_count %d", q.MaxGPUCount, q.MinGPUCount)})
	}
	q.MinGPUMemoryGiB = floatIn(m.MinGPUMemoryGiB, "min_gpu_memory_gib", 1024)
	q.MaxPricePerHour = floatIn(m.MaxPricePerHour, "max_price_per_hour", 1e6)
	switch c := m.CapacityType.ValueString(); c {
	case "", string(pricing.OnDemand), string(pricing.Spot):
		q.Capacity = pricing.CapacityType(c)
	default:
		probs = append(probs, attrProblem{path.Root("capacity_type"), fmt.Sprintf("capacity_type %q: want on-demand or spot", c)})
	}
	switch s := m.SortBy.ValueString(); s {
	case "", "gpu-hour", "tflop":
	default:
		probs = append(probs, attrProblem{path.Root("sort_by"), fmt.Sprintf("sort_by %q: want gpu-hour or tflop", s)})
	}
	intIn(m.Limit, "limit", 0, 100000)
	if s := m.StaleAfter.ValueString(); s != "" {
		if d, err := policy.ParseDuration(s); err != nil || d <= 0 {
			probs = append(probs, attrProblem{path.Root("stale_after"), fmt.Sprintf("stale_after %q: want a positive duration such as 168h or 7d", s)})
		}
	}
	return q, probs
}

// attrProblem is a bad value at an attribute path.
type attrProblem struct {
	at  path.Path
	msg string
}

func (d *offersDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	if !req.Config.Raw.IsFullyKnown() {
		return
	}
	var m offersModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, probs := m.query()
	for _, p := range probs {
		resp.Diagnostics.AddAttributeError(p.at, "Invalid filter", p.msg)
	}
}

func (d *offersDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		resp.Diagnostics.AddError("Provider not configured", "the gpubroker provider was not configured before reading gpubroker_offers")
		return
	}
	var m offersModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	q, probs := m.query()
	for _, p := range probs {
		resp.Diagnostics.AddAttributeError(p.at, "Invalid filter", p.msg)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	ans, err := d.data.source.Offers(ctx, q)
	if err != nil {
		resp.Diagnostics.AddError("Reading offers", err.Error())
		return
	}
	staleAfter := 7 * 24 * time.Hour
	if s := m.StaleAfter.ValueString(); s != "" {
		staleAfter, _ = policy.ParseDuration(s)
	}
	sortBy := m.SortBy.ValueString()
	if sortBy == "" {
		sortBy = "gpu-hour"
	}
	now := d.data.now()
	rows, capacity := rankOffers(ans.Offers, q.Capacity, sortBy)
	if n := m.Limit.ValueInt64(); n > 0 && int64(len(rows)) > n {
		rows = rows[:n]
	}
	m.CatalogSource = types.StringValue(ans.Source)
	m.GeneratedAt = types.StringValue(ans.GeneratedAt.UTC().Format(time.RFC3339))
	m.AgeHours = types.Float64Value(math.Round(now.Sub(ans.GeneratedAt).Hours()*10) / 10)
	m.Capacity = types.StringValue(string(capacity))
	m.SortedBy = types.StringValue(sortBy)
	m.Offers = make([]offerModel, 0, len(rows))
	for _, r := range rows {
		om, diags := r.model(now, staleAfter, ans.Issues)
		resp.Diagnostics.Append(diags...)
		m.Offers = append(m.Offers, om)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// rankedOffer is an offer with the capacity type it is ranked by.
type rankedOffer struct {
	pricing.Offer
	rankedAt pricing.CapacityType
}

// rankOffers sorts offers as `gpubroker prices` does: by price per GPU-hour
// (or per TFLOP-hour) at the requested capacity type (on-demand when none),
// and offers not sold that way (p5e has no on-demand price) after the rest,
// ranked by the price they do have. With capacity_type set the catalog query
// has already dropped those.
func rankOffers(offers []pricing.Offer, want pricing.CapacityType, sortBy string) ([]rankedOffer, pricing.CapacityType) {
	capacity := want
	if capacity == "" {
		capacity = pricing.OnDemand
	}
	other := pricing.Spot
	if capacity == pricing.Spot {
		other = pricing.OnDemand
	}
	rows := make([]rankedOffer, 0, len(offers))
	for _, o := range offers {
		ct := capacity
		if _, ok := o.Price(ct); !ok {
			ct = other
		}
		rows = append(rows, rankedOffer{o, ct})
	}
	key := func(r rankedOffer) float64 { v, _ := r.PricePerGPUHour(r.rankedAt); return v }
	if sortBy == "tflop" {
		key = func(r rankedOffer) float64 { v, _ := r.PricePerTFLOPHour(r.rankedAt); return v }
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ai, aj := rows[i].rankedAt == capacity, rows[j].rankedAt == capacity
		if ai != aj {
			return ai
		}
		return key(rows[i]) < key(rows[j])
	})
	return rows, capacity
}

func roundTo(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

func (r rankedOffer) model(now time.Time, staleAfter time.Duration, issues map[string][]pricing.Issue) (offerModel, diag.Diagnostics) {
	m := offerModel{
		Cloud: types.StringValue(string(r.Cloud)), Region: types.StringValue(r.Region), Zone: types.StringValue(r.Zone),
		InstanceType: types.StringValue(r.InstanceType), GPU: types.StringValue(string(r.GPU)),
		GPUCount: types.Int64Value(int64(r.GPUCount)), GPUMemoryGiB: types.Float64Value(r.GPUMemoryGiB),
		VCPUs: types.Float64Value(r.VCPUs), MemoryGiB: types.Float64Value(r.Offer.MemoryGiB),
		OnDemandPerHour: types.Float64Null(), SpotPerHour: types.Float64Null(),
		SpotSignal:  types.ObjectNull(spotSignalTypes),
		ObservedAt:  types.StringValue(r.ObservedAt.UTC().Format(time.RFC3339)),
		Stale:       types.BoolValue(pricing.Stale(r.Offer, now, staleAfter)),
		Source:      types.StringValue(r.Offer.Source),
		DateUnknown: types.BoolValue(pricing.DateUnknown(r.Offer)),
	}
	if issues != nil {
		m.Issues = []types.String{}
		for _, is := range issues[r.Key()] {
			m.Issues = append(m.Issues, types.StringValue(string(is)))
		}
	}
	if p, ok := r.Price(pricing.OnDemand); ok {
		m.OnDemandPerHour = types.Float64Value(p)
	}
	var diags diag.Diagnostics
	if p, ok := r.Price(pricing.Spot); ok {
		m.SpotPerHour = types.Float64Value(p)
		s := r.Spot
		obj, d := types.ObjectValue(spotSignalTypes, map[string]attr.Value{
			"bucket": types.StringValue(s.Bucket), "interruptions_per_hour": types.Float64Value(s.InterruptionsPerHour),
			"placement_score": types.Int64Value(int64(s.PlacementScore)), "availability": types.Float64Value(s.Availability),
			"default": types.BoolValue(s.Default),
		})
		diags = append(diags, d...)
		m.SpotSignal = obj
	}
	g, _ := r.PricePerGPUHour(r.rankedAt)
	t, _ := r.PricePerTFLOPHour(r.rankedAt)
	m.PerGPUHour, m.PerTFLOPHour = types.Float64Value(roundTo(g, 6)), types.Float64Value(roundTo(t, 8))
	return m, diags
}

// checkGlob rejects a malformed region glob, which would match nothing.
func checkGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty; use * for every region")
	}
	_, err := stdpath.Match(g, "")
	return err
}
