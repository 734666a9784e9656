package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/optimizer"
)

func newPlacementDataSource() datasource.DataSource { return &placementDataSource{} }

type placementDataSource struct{ data *providerData }

var (
	_ datasource.DataSourceWithConfigure      = (*placementDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*placementDataSource)(nil)
)

// placementModel is one workload (the policy file's workload fields) and
// the optimizer's placement for it.
type placementModel struct {
	workloadSpec
	Horizon types.String `tfsdk:"horizon"`

	Cloud               types.String   `tfsdk:"cloud"`
	Region              types.String   `tfsdk:"region"`
	Zone                types.String   `tfsdk:"zone"`
	InstanceType        types.String   `tfsdk:"instance_type"`
	GPUModel            types.String   `tfsdk:"gpu_model"`
	CapacityType        types.String   `tfsdk:"capacity_type"`
	GPUs                types.Int64    `tfsdk:"gpus"`
	Instances           types.Int64    `tfsdk:"instances"`
	PricePerHour        types.Float64  `tfsdk:"price_per_hour"`
	ExpectedHours       types.Float64  `tfsdk:"expected_hours"`
	ExpectedCost        types.Float64  `tfsdk:"expected_cost"`
	ExpectedPreemptions types.Float64  `tfsdk:"expected_preemptions"`
	OnDemandBaseline    types.Float64  `tfsdk:"on_demand_baseline"`
	Savings             types.Float64  `tfsdk:"savings"`
	SavingsPercent      types.Float64  `tfsdk:"savings_percent"`
	Reason              types.String   `tfsdk:"reason"`
	Explanation         []types.String `tfsdk:"explanation"`
	RunnerUp            *runnerUpModel `tfsdk:"runner_up"`
	Groups              []groupModel   `tfsdk:"groups"`
	CatalogSource       types.String   `tfsdk:"catalog_source"`
}

type runnerUpModel struct {
	Cloud        types.String  `tfsdk:"cloud"`
	Region       types.String  `tfsdk:"region"`
	Zone         types.String  `tfsdk:"zone"`
	InstanceType types.String  `tfsdk:"instance_type"`
	GPUModel     types.String  `tfsdk:"gpu_model"`
	CapacityType types.String  `tfsdk:"capacity_type"`
	ExpectedCost types.Float64 `tfsdk:"expected_cost"`
	Constraint   types.String  `tfsdk:"constraint"`
	Reason       types.String  `tfsdk:"reason"`
}

type groupModel struct {
	Cloud           types.String  `tfsdk:"cloud"`
	Region          types.String  `tfsdk:"region"`
	Zone            types.String  `tfsdk:"zone"`
	InstanceType    types.String  `tfsdk:"instance_type"`
	GPUModel        types.String  `tfsdk:"gpu_model"`
	GPUsPerInstance types.Int64   `tfsdk:"gpus_per_instance"`
	Instances       types.Int64   `tfsdk:"instances"`
	CapacityType    types.String  `tfsdk:"capacity_type"`
	PricePerHour    types.Float64 `tfsdk:"price_per_hour"`
}

func (d *placementDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_placement"
}

func (d *placementDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	num := func(desc string) schema.Float64Attribute {
		return schema.Float64Attribute{Computed: true, MarkdownDescription: desc}
	}
	attrs := dsAttributes(workloadFields())
	attrs["horizon"] = schema.StringAttribute{Optional: true,
		MarkdownDescription: "Period an inference service is costed over, e.g. `720h` (the policy's `horizon`, default 30 days)."}
	where := map[string]schema.Attribute{
		"cloud": str("Cloud: `aws`, `gcp` or `azure`."), "region": str("Region."), "zone": str("Zone; empty for a regional offer."),
		"instance_type": str("Instance type."), "gpu_model": str("GPU model."), "capacity_type": str("`on-demand` or `spot`."),
	}
	for k, v := range where {
		attrs[k] = v
	}
	attrs["gpus"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "GPUs of the whole placement."}
	attrs["instances"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "Instances (jobs) or replicas (inference, hedge replicas included)."}
	attrs["price_per_hour"] = num("Price of the whole placement, USD/hour.")
	attrs["expected_hours"] = num("Expected hours to finish (jobs, preemptions and restarts included) or the horizon (inference).")
	attrs["expected_cost"] = num("Expected cost, USD: price × (work ÷ speed + expected preemption loss + restart overhead).")
	attrs["expected_preemptions"] = num("Expected preemptions over the run or the horizon.")
	attrs["on_demand_baseline"] = num("Cheapest all-on-demand placement meeting the same limits, USD.")
	attrs["savings"] = num("On-demand baseline minus expected cost, USD.")
	attrs["savings_percent"] = num("Savings as a percentage of the baseline.")
	attrs["reason"] = str("Why this placement won, in one line: the optimizer's explanation.")
	attrs["explanation"] = schema.ListAttribute{Computed: true, ElementType: types.StringType,
		MarkdownDescription: "The optimizer's explanation, one statement per element (cost breakdown, ranking per GPU model, runner-up)."}
	ru := map[string]schema.Attribute{}
	for k, v := range where {
		ru[k] = v
	}
	ru["expected_cost"] = num("Its expected cost, USD.")
	ru["constraint"] = str("What ruled it out: `cost`, `deadline`, `memory`, `spot_policy`, `quota`, `budget`, `no_finish`.")
	ru["reason"] = str("Why it lost, in words.")
	attrs["runner_up"] = schema.SingleNestedAttribute{Computed: true, Attributes: ru,
		MarkdownDescription: "The best alternative that was not chosen; null when there was none."}
	g := map[string]schema.Attribute{}
	for k, v := range where {
		g[k] = v
	}
	g["gpus_per_instance"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "GPUs per instance."}
	g["instances"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "Instances in this place."}
	g["price_per_hour"] = num("Price of the group, USD/hour.")
	attrs["groups"] = schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: g},
		MarkdownDescription: "Every place the workload runs in (inference replicas may be spread); the first is the one in `cloud`, `region`, `zone`."}
	attrs["catalog_source"] = str("The prices the plan used.")
	resp.Schema = schema.Schema{
		MarkdownDescription: "The cheapest placement of one workload that meets its deadline, GPU need, spot policy and placement " +
			"limits, planned by gpubroker's optimizer — in the provider offline, or by the broker's plan API (`POST /api/v1/plan`) " +
			"online. The workload attributes are the policy file's workload fields (docs/policy.md) and are validated the same way. " +
			"Feed `cloud`, `region`, `zone` and `instance_type` to `aws_instance`, `google_compute_instance` or " +
			"`azurerm_linux_virtual_machine`.",
		Attributes: attrs,
	}
}

func (d *placementDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	data, err := configured(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	d.data = data
}

func (d *placementDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	if !req.Config.Raw.IsFullyKnown() {
		return // checked again when read, with every value known
	}
	var m placementModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, diags := m.parsePolicy(m.Horizon)
	resp.Diagnostics.Append(diags...)
}

func (d *placementDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if d.data == nil {
		resp.Diagnostics.AddError("Provider not configured", "the gpubroker provider was not configured before reading gpubroker_placement")
		return
	}
	var m placementModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if _, diags := m.parsePolicy(m.Horizon); diags.HasError() {
		resp.Diagnostics.Append(diags...)
		return
	}
	plan, err := d.data.source.Plan(ctx, "terraform", m.policyDocument(m.Horizon))
	if err != nil {
		var inf *optimizer.InfeasibleError
		if errors.As(err, &inf) && len(inf.Blocked) == 1 {
			b := inf.Blocked[0]
			resp.Diagnostics.AddAttributeError(path.Root("name"), "No feasible placement",
				fmt.Sprintf("workload %q cannot be placed: %s (%s)", b.Workload, b.Reason, b.Constraint))
			return
		}
		var ae *apiv1.Error
		if errors.As(err, &ae) && ae.Code == apiv1.CodeInfeasible {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "No feasible placement", ae.Message)
			return
		}
		resp.Diagnostics.AddError("No placement", err.Error())
		return
	}
	if len(plan.Placements) != 1 {
		resp.Diagnostics.AddError("No placement", fmt.Sprintf("the plan has %d placements for one workload; this is a bug", len(plan.Placements)))
		return
	}
	m.setPlacement(plan, &plan.Placements[0])
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (m *placementModel) setPlacement(plan *optimizer.Plan, p *optimizer.Placement) {
	m.Cloud, m.Region, m.Zone = types.StringValue(string(p.Cloud)), types.StringValue(p.Region), types.StringValue(p.Zone)
	m.InstanceType, m.GPUModel = types.StringValue(p.InstanceType), types.StringValue(string(p.GPU))
	m.CapacityType = types.StringValue(string(p.Capacity))
	m.GPUs, m.Instances = types.Int64Value(int64(p.GPUs)), types.Int64Value(int64(p.Instances))
	m.PricePerHour, m.ExpectedHours = types.Float64Value(p.PricePerHour), types.Float64Value(p.ExpectedHours)
	m.ExpectedCost, m.ExpectedPreemptions = types.Float64Value(p.ExpectedCost), types.Float64Value(p.ExpectedPreemptions)
	m.OnDemandBaseline, m.Savings, m.SavingsPercent = types.Float64Value(p.OnDemandBaseline), types.Float64Value(p.Savings), types.Float64Value(p.SavingsPercent)
	m.Explanation = make([]types.String, 0, len(p.Explanation))
	for _, e := range p.Explanation {
		m.Explanation = append(m.Explanation, types.StringValue(e))
	}
	m.Reason = types.StringValue(strings.Join(p.Explanation, "; "))
	m.RunnerUp = nil
	if r := p.RunnerUp; r != nil {
		m.RunnerUp = &runnerUpModel{Cloud: types.StringValue(string(r.Cloud)), Region: types.StringValue(r.Region), Zone: types.StringValue(r.Zone),
			InstanceType: types.StringValue(r.InstanceType), GPUModel: types.StringValue(string(r.GPU)), CapacityType: types.StringValue(string(r.Capacity)),
			ExpectedCost: types.Float64Value(r.ExpectedCost), Constraint: types.StringValue(r.Constraint), Reason: types.StringValue(r.Reason)}
	}
	m.Groups = make([]groupModel, 0, len(p.Groups))
	for _, g := range p.Groups {
		m.Groups = append(m.Groups, groupModel{Cloud: types.StringValue(string(g.Cloud)), Region: types.StringValue(g.Region), Zone: types.StringValue(g.Zone),
			InstanceType: types.StringValue(g.InstanceType), GPUModel: types.StringValue(string(g.GPU)), GPUsPerInstance: types.Int64Value(int64(g.GPUsPerInstance)),
			Instances: types.Int64Value(int64(g.Instances)), CapacityType: types.StringValue(string(g.Capacity)), PricePerHour: types.Float64Value(g.PricePerHour)})
	}
	m.CatalogSource = types.StringValue(plan.Catalog.Source)
}
