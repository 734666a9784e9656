package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
)

func newWorkloadResource() resource.Resource { return &workloadResource{} }

type workloadResource struct{ data *providerData }

var (
	_ resource.ResourceWithConfigure      = (*workloadResource)(nil)
	_ resource.ResourceWithImportState    = (*workloadResource)(nil)
	_ resource.ResourceWithValidateConfig = (*workloadResource)(nil)
)

type workloadModel struct {
	workloadSpec
	ID        types.String `tfsdk:"id"`
	CreatedAt types.String `tfsdk:"created_at"`
}

func (r *workloadResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_workload"
}

func (r *workloadResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := resourceAttributes(workloadFields())
	name := attrs["name"].(schema.StringAttribute)
	name.PlanModifiers = []planmodifier.String{stringplanmodifier.RequiresReplace()}
	name.MarkdownDescription += " Changing it replaces the workload (the broker does not rename)."
	attrs["name"] = name
	attrs["id"] = schema.StringAttribute{Computed: true, MarkdownDescription: "The workload's name.",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	attrs["created_at"] = schema.StringAttribute{Computed: true, MarkdownDescription: "When the broker registered the workload (RFC 3339).",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A workload registered with the broker (`/api/v1/workloads`). The attributes are the policy file's " +
			"workload fields (docs/policy.md), checked by the policy package's own validator before anything is sent, with " +
			"each problem shown at its attribute. The broker keeps the fields other than name, team and kind as the " +
			"workload's `spec`, in the policy file's JSON form. A change made through the API or the dashboard shows as drift " +
			"on the next plan. Needs the provider's `endpoint`. Import with the workload's name: one created through the API or " +
			"the CLI imports in any form the policy accepts (`\"models\": \"any\"` or one model, `\"checkpoint_interval\": 0`).",
		Attributes: attrs,
	}
}

func (r *workloadResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, err := configured(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	r.data = data
}

func (r *workloadResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if !req.Config.Raw.IsFullyKnown() {
		return // checked again at apply, with every value known
	}
	var m workloadModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, diags := m.parsePolicy(types.StringNull())
	resp.Diagnostics.Append(diags...)
}

// broker returns the client, or adds a diagnostic saying why there is none.
func (r *workloadResource) broker(add func(string, string)) *apiv1.Client {
	switch {
	case r.data == nil:
		add("Provider not configured", "the gpubroker provider was not configured before using gpubroker_workload")
	case r.data.broker == nil:
		add("No broker configured", "gpubroker_workload registers workloads with a running broker: set endpoint and token "+
			"in the provider block (or "+EnvEndpoint+" and "+EnvToken+"). Offline, only the data sources work.")
	default:
		return r.data.broker
	}
	return nil
}

// record is the request body for the broker.
func (m *workloadModel) record() (apiv1.WorkloadInput, error) {
	spec, err := json.Marshal(m.spec())
	if err != nil {
		return apiv1.WorkloadInput{}, fmt.Errorf("encoding the spec of %q: %w", m.Name.ValueString(), err)
	}
	return apiv1.WorkloadInput{Name: m.Name.ValueString(), Team: m.Team.ValueString(), Kind: m.Kind.ValueString(), Spec: spec}, nil
}

// fromRecord sets the model from the broker's record; prior keeps equal
// values' spelling (see fromSpec).
func (m *workloadModel) fromRecord(rec apiv1.Workload, prior *workloadSpec) error {
	var s specJSON
	if len(rec.Spec) > 0 && string(rec.Spec) != "null" {
		if err := json.Unmarshal(rec.Spec, &s); err != nil {
			return fmt.Errorf("the broker's spec of workload %q is not a policy workload: %w", rec.Name, err)
		}
	}
	m.Name, m.Kind, m.ID = types.StringValue(rec.Name), types.StringValue(rec.Kind), types.StringValue(rec.Name)
	// The broker stores no team as ""; keep a written team = "" as written.
	m.Team = types.StringNull()
	if rec.Team != "" || (prior != nil && prior.Team.ValueString() == "" && !prior.Team.IsNull() && !prior.Team.IsUnknown()) {
		m.Team = types.StringValue(rec.Team)
	}
	m.fromSpec(s, prior)
	m.CreatedAt = types.StringValue(rec.CreatedAt.UTC().Format(time.RFC3339))
	return nil
}

func (r *workloadResource) write(ctx context.Context, m *workloadModel, create bool) error {
	c := r.broker(func(string, string) {})
	rec, err := m.record()
	if err != nil {
		return err
	}
	var got apiv1.Workload
	if create {
		got, err = c.CreateWorkload(ctx, rec)
	} else {
		got, err = c.PutWorkload(ctx, rec)
	}
	if err != nil {
		return err
	}
	prior := m.workloadSpec
	return m.fromRecord(got, &prior)
}

func (r *workloadResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics, true)
}

// apply validates the planned workload like a policy file and writes it
// (create or update) to the broker, then records it in the state.
func (r *workloadResource) apply(ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics, create bool) {
	if r.broker(diags.AddError) == nil {
		return
	}
	var m workloadModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	if _, d := m.parsePolicy(types.StringNull()); d.HasError() {
		diags.Append(d...)
		return
	}
	what := "Updating workload"
	if create {
		what = "Creating workload"
	}
	if err := r.write(ctx, &m, create); err != nil {
		diags.AddError(what, m.redact(err.Error()))
		return
	}
	diags.Append(state.Set(ctx, &m)...)
}

func (r *workloadResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	c := r.broker(resp.Diagnostics.AddError)
	if c == nil {
		return
	}
	var m workloadModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	if name == "" {
		name = m.ID.ValueString()
	}
	rec, err := c.GetWorkload(ctx, name)
	if isNotFound(err) {
		// Deleted outside Terraform: drop it so the plan creates it again.
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading workload", err.Error())
		return
	}
	prior := m.workloadSpec
	if err := m.fromRecord(rec, &prior); err != nil {
		resp.Diagnostics.AddError("Reading workload", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *workloadResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.apply(ctx, req.Plan, &resp.State, &resp.Diagnostics, false)
}

func (r *workloadResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	c := r.broker(resp.Diagnostics.AddError)
	if c == nil {
		return
	}
	var m workloadModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := c.DeleteWorkload(ctx, m.Name.ValueString()); err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Deleting workload", err.Error())
	}
}

func (r *workloadResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
