package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func newBudgetsDataSource() datasource.DataSource { return &budgetsDataSource{} }

type budgetsDataSource struct{ data *providerData }

var _ datasource.DataSourceWithConfigure = (*budgetsDataSource)(nil)

type budgetsModel struct {
	Policy       types.String  `tfsdk:"policy"`
	HorizonHours types.Float64 `tfsdk:"horizon_hours"`
	GeneratedAt  types.String  `tfsdk:"generated_at"`
	Budgets      []budgetModel `tfsdk:"budgets"`
}

type budgetModel struct {
	Name       types.String   `tfsdk:"name"`
	Team       types.String   `tfsdk:"team"`
	Workload   types.String   `tfsdk:"workload"`
	MonthlyUSD types.Float64  `tfsdk:"monthly_usd"`
	PlannedUSD types.Float64  `tfsdk:"planned_usd"`
	Workloads  []types.String `tfsdk:"workloads"`
}

func (d *budgetsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_budgets"
}

func (d *budgetsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	num := func(desc string) schema.Float64Attribute {
		return schema.Float64Attribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The budgets of the policy the broker runs (`gpubroker serve -f policy.yaml`) next to the spend " +
			"its current plan expects under each (`GET /api/v1/budgets`). Needs the provider's `endpoint`.",
		Attributes: map[string]schema.Attribute{
			"policy":        str("The policy file the broker loaded."),
			"horizon_hours": num("The period inference spend is planned over, hours."),
			"generated_at":  str("When the plan was made (RFC 3339)."),
			"budgets": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "One element per budget of the policy.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":        str("Budget name."),
					"team":        str("Team it covers; empty when it covers a workload or everything."),
					"workload":    str("Workload it covers; empty when it covers a team or everything."),
					"monthly_usd": num("The cap, USD per month."),
					"planned_usd": num("Expected cost of the placements it covers, USD (jobs: the whole run; inference: the horizon)."),
					"workloads": schema.ListAttribute{Computed: true, ElementType: types.StringType,
						MarkdownDescription: "The planned workloads it covers."},
				}}},
		},
	}
}

func (d *budgetsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	data, err := configured(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	d.data = data
}

func (d *budgetsDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	switch {
	case d.data == nil:
		resp.Diagnostics.AddError("Provider not configured", "the gpubroker provider was not configured before reading gpubroker_budgets")
		return
	case d.data.broker == nil:
		resp.Diagnostics.AddError("No broker configured", "gpubroker_budgets reads the budgets of a running broker's policy: set endpoint "+
			"and token in the provider block (or "+EnvEndpoint+" and "+EnvToken+").")
		return
	}
	ans, err := d.data.broker.Budgets(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Reading budgets", err.Error())
		return
	}
	m := budgetsModel{Policy: types.StringValue(ans.Policy), HorizonHours: types.Float64Value(ans.HorizonHours),
		GeneratedAt: types.StringValue(ans.GeneratedAt.UTC().Format(time.RFC3339)), Budgets: []budgetModel{}}
	for _, b := range ans.Budgets {
		bm := budgetModel{Name: types.StringValue(b.Name), Team: types.StringValue(b.Team), Workload: types.StringValue(b.Workload),
			MonthlyUSD: types.Float64Value(b.MonthlyUSD), PlannedUSD: types.Float64Value(b.PlannedUSD), Workloads: []types.String{}}
		for _, w := range b.Workloads {
			bm.Workloads = append(bm.Workloads, types.StringValue(w))
		}
		m.Budgets = append(m.Budgets, bm)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
