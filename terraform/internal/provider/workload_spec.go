package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// workloadSpec is a workload as the policy file writes it, one attribute per
// policy field, nested the same way (gpu.models is gpu = { models = [...] }),
// so that a policy error's field path is also the attribute's path. The
// gpubroker_placement data source and the gpubroker_workload resource both
// embed it.
type workloadSpec struct {
	Name               types.String      `tfsdk:"name"`
	Team               types.String      `tfsdk:"team"`
	Kind               types.String      `tfsdk:"kind"`
	GPU                *gpuSpec          `tfsdk:"gpu"`
	Work               *workSpec         `tfsdk:"work"`
	Deadline           types.String      `tfsdk:"deadline"`
	CheckpointInterval types.String      `tfsdk:"checkpoint_interval"`
	RestartOverhead    types.String      `tfsdk:"restart_overhead"`
	Spot               types.String      `tfsdk:"spot"`
	SpotPolicy         types.String      `tfsdk:"spot_policy"`
	Scaling            *scalingSpec      `tfsdk:"scaling"`
	Schedule           types.String      `tfsdk:"schedule"`
	Replicas           *replicasSpec     `tfsdk:"replicas"`
	Autoscale          *autoscaleSpec    `tfsdk:"autoscale"`
	Availability       *availabilitySpec `tfsdk:"availability"`
	Load               *loadSpec         `tfsdk:"load"`
	Spread             *spreadSpec       `tfsdk:"spread"`
	Placement          *placementSpec    `tfsdk:"placement"`
}

type gpuSpec struct {
	Models       []types.String `tfsdk:"models"`
	Count        types.Int64    `tfsdk:"count"`
	MinMemoryGiB types.Float64  `tfsdk:"min_memory_gib"`
	Interconnect types.String   `tfsdk:"interconnect"`
}

type scalingSpec struct {
	IntraNode types.Float64 `tfsdk:"intra_node"`
	InterNode types.Float64 `tfsdk:"inter_node"`
}

type autoscaleSpec struct {
	Prometheus      *prometheusSpec `tfsdk:"prometheus"`
	ScaleUpWindow   types.String    `tfsdk:"scale_up_window"`
	ScaleDownWindow types.String    `tfsdk:"scale_down_window"`
}

type prometheusSpec struct {
	URL              types.String  `tfsdk:"url"`
	Query            types.String  `tfsdk:"query"`
	TargetPerReplica types.Float64 `tfsdk:"target_per_replica"`
}

type availabilitySpec struct {
	Goal   types.Float64 `tfsdk:"goal"`
	Window types.String  `tfsdk:"window"`
}

type loadSpec struct {
	ReplicasByHour     []types.Int64   `tfsdk:"replicas_by_hour"`
	RequestsPerSecond  []types.Float64 `tfsdk:"requests_per_second"`
	RequestsPerReplica types.Float64   `tfsdk:"requests_per_replica"`
}

type workSpec struct {
	GPUHours     types.Float64 `tfsdk:"gpu_hours"`
	ReferenceGPU types.String  `tfsdk:"reference_gpu"`
}

type replicasSpec struct {
	Min               types.Int64   `tfsdk:"min"`
	Max               types.Int64   `tfsdk:"max"`
	TargetUtilization types.Float64 `tfsdk:"target_utilization"`
}

type spreadSpec struct {
	MinZones  types.Int64 `tfsdk:"min_zones"`
	MinClouds types.Int64 `tfsdk:"min_clouds"`
}

type placementSpec struct {
	Clouds    []types.String `tfsdk:"clouds"`
	Regions   []types.String `tfsdk:"regions"`
	Zones     []types.String `tfsdk:"zones"`
	Residency []types.String `tfsdk:"residency"`
}

// specJSON is the policy file's workload mapping in JSON: the "spec" the
// broker stores for a workload registered through /api/v1/workloads, and,
// with name, team and kind added, one element of a policy's workloads:
// list. JSON is YAML, so policy.Parse reads it as it reads a policy file.
// Pointers keep "not written" apart from a written zero, which the policy
// treats differently (restart_overhead: 0 means restarts are free).
type specJSON struct {
	GPU                *gpuJSON          `json:"gpu,omitempty"`
	Work               *workJSON         `json:"work,omitempty"`
	Deadline           *durationValue    `json:"deadline,omitempty"`
	CheckpointInterval *durationValue    `json:"checkpoint_interval,omitempty"`
	RestartOverhead    *durationValue    `json:"restart_overhead,omitempty"`
	Spot               *string           `json:"spot,omitempty"`
	SpotPolicy         *string           `json:"spot_policy,omitempty"`
	Scaling            *scalingJSON      `json:"scaling,omitempty"`
	Schedule           *string           `json:"schedule,omitempty"`
	Replicas           *replicasJSON     `json:"replicas,omitempty"`
	Autoscale          *autoscaleJSON    `json:"autoscale,omitempty"`
	Availability       *availabilityJSON `json:"availability,omitempty"`
	Load               *loadJSON         `json:"load,omitempty"`
	Spread             *spreadJSON       `json:"spread,omitempty"`
	Placement          *placementJSON    `json:"placement,omitempty"`
}

type gpuJSON struct {
	Models       *stringOrList `json:"models,omitempty"`
	Count        *int64        `json:"count,omitempty"`
	MinMemoryGiB *float64      `json:"min_memory_gib,omitempty"`
	Interconnect *string       `json:"interconnect,omitempty"`
}

type scalingJSON struct {
	IntraNode *float64 `json:"intra_node,omitempty"`
	InterNode *float64 `json:"inter_node,omitempty"`
}

type autoscaleJSON struct {
	Prometheus      *prometheusJSON `json:"prometheus,omitempty"`
	ScaleUpWindow   *durationValue  `json:"scale_up_window,omitempty"`
	ScaleDownWindow *durationValue  `json:"scale_down_window,omitempty"`
}

type prometheusJSON struct {
	URL              *string  `json:"url,omitempty"`
	Query            *string  `json:"query,omitempty"`
	TargetPerReplica *float64 `json:"target_per_replica,omitempty"`
}

type availabilityJSON struct {
	Goal   *float64       `json:"goal,omitempty"`
	Window *durationValue `json:"window,omitempty"`
}

type loadJSON struct {
	ReplicasByHour     *[]int64   `json:"replicas_by_hour,omitempty"`
	RequestsPerSecond  *[]float64 `json:"requests_per_second,omitempty"`
	RequestsPerReplica *float64   `json:"requests_per_replica,omitempty"`
}

type workJSON struct {
	GPUHours     *float64 `json:"gpu_hours,omitempty"`
	ReferenceGPU *string  `json:"reference_gpu,omitempty"`
}

type replicasJSON struct {
	Min               *int64   `json:"min,omitempty"`
	Max               *int64   `json:"max,omitempty"`
	TargetUtilization *float64 `json:"target_utilization,omitempty"`
}

type spreadJSON struct {
	MinZones  *int64 `json:"min_zones,omitempty"`
	MinClouds *int64 `json:"min_clouds,omitempty"`
}

// placementJSON's keys stay plain lists: unlike gpu.models, the policy
// refuses a single string there.
type placementJSON struct {
	Clouds    *[]string `json:"clouds,omitempty"`
	Regions   *[]string `json:"regions,omitempty"`
	Zones     *[]string `json:"zones,omitempty"`
	Residency *[]string `json:"residency,omitempty"`
}

// stringOrList is gpu.models, which the policy reads as a list of names or
// as one name on its own ("H100", or "any" for no limit): the broker keeps
// a spec as written through the API, so either form comes back. It is
// written as a list, the one form Terraform has.
type stringOrList []string

func (l *stringOrList) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*l = stringOrList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("want a string or a list of strings: %w", err)
	}
	*l = list
	return nil
}

// durationValue is a duration as the broker may hold it: a string ("72h",
// "0s"), or a bare JSON number, which the policy takes as 0 for the
// durations that may be 0 (checkpoint_interval: 0, written through the API
// or the CLI). The text is kept as written, so that sameDuration compares it
// like any other spelling; the policy judges the value.
type durationValue string

func (d *durationValue) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*d = durationValue(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("want a duration such as \"72h\" or 0: %w", err)
	}
	*d = durationValue(n)
	return nil
}

// policyWorkloadJSON is one element of a policy's workloads: list.
type policyWorkloadJSON struct {
	Name string  `json:"name"`
	Team *string `json:"team,omitempty"`
	Kind string  `json:"kind"`
	specJSON
}

func str(v types.String) *string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	s := v.ValueString()
	return &s
}

func i64(v types.Int64) *int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := v.ValueInt64()
	return &n
}

func f64(v types.Float64) *float64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	f := v.ValueFloat64()
	return &f
}

func dur(v types.String) *durationValue { return (*durationValue)(str(v)) }

func strs(vs []types.String) *[]string {
	if vs == nil {
		return nil
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.ValueString())
	}
	return &out
}

func i64s(vs []types.Int64) *[]int64 {
	if vs == nil {
		return nil
	}
	out := make([]int64, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.ValueInt64())
	}
	return &out
}

func f64s(vs []types.Float64) *[]float64 {
	if vs == nil {
		return nil
	}
	out := make([]float64, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.ValueFloat64())
	}
	return &out
}

// spec converts the attributes into the policy's JSON form.
func (w *workloadSpec) spec() specJSON {
	s := specJSON{Deadline: dur(w.Deadline), CheckpointInterval: dur(w.CheckpointInterval),
		RestartOverhead: dur(w.RestartOverhead), Spot: str(w.Spot), SpotPolicy: str(w.SpotPolicy), Schedule: str(w.Schedule)}
	if g := w.GPU; g != nil {
		s.GPU = &gpuJSON{Models: (*stringOrList)(strs(g.Models)), Count: i64(g.Count), MinMemoryGiB: f64(g.MinMemoryGiB), Interconnect: str(g.Interconnect)}
	}
	if sc := w.Scaling; sc != nil {
		s.Scaling = &scalingJSON{IntraNode: f64(sc.IntraNode), InterNode: f64(sc.InterNode)}
	}
	if a := w.Autoscale; a != nil {
		s.Autoscale = &autoscaleJSON{ScaleUpWindow: dur(a.ScaleUpWindow), ScaleDownWindow: dur(a.ScaleDownWindow)}
		if pm := a.Prometheus; pm != nil {
			s.Autoscale.Prometheus = &prometheusJSON{URL: str(pm.URL), Query: str(pm.Query), TargetPerReplica: f64(pm.TargetPerReplica)}
		}
	}
	if a := w.Availability; a != nil {
		s.Availability = &availabilityJSON{Goal: f64(a.Goal), Window: dur(a.Window)}
	}
	if l := w.Load; l != nil {
		s.Load = &loadJSON{ReplicasByHour: i64s(l.ReplicasByHour), RequestsPerSecond: f64s(l.RequestsPerSecond), RequestsPerReplica: f64(l.RequestsPerReplica)}
	}
	if k := w.Work; k != nil {
		s.Work = &workJSON{GPUHours: f64(k.GPUHours), ReferenceGPU: str(k.ReferenceGPU)}
	}
	if r := w.Replicas; r != nil {
		s.Replicas = &replicasJSON{Min: i64(r.Min), Max: i64(r.Max), TargetUtilization: f64(r.TargetUtilization)}
	}
	if sp := w.Spread; sp != nil {
		s.Spread = &spreadJSON{MinZones: i64(sp.MinZones), MinClouds: i64(sp.MinClouds)}
	}
	if p := w.Placement; p != nil {
		s.Placement = &placementJSON{Clouds: strs(p.Clouds), Regions: strs(p.Regions), Zones: strs(p.Zones), Residency: strs(p.Residency)}
	}
	return s
}

// policyWorkload is the workload as one element of a policy's workloads.
func (w *workloadSpec) policyWorkload() policyWorkloadJSON {
	return policyWorkloadJSON{Name: w.Name.ValueString(), Team: str(w.Team), Kind: w.Kind.ValueString(), specJSON: w.spec()}
}

// policyDocument is a whole policy file holding just this workload (and
// the horizon, when set), in JSON.
func (w *workloadSpec) policyDocument(horizon types.String) []byte {
	doc := struct {
		Horizon   *string              `json:"horizon,omitempty"`
		Workloads []policyWorkloadJSON `json:"workloads"`
	}{Horizon: str(horizon), Workloads: []policyWorkloadJSON{w.policyWorkload()}}
	b, err := json.Marshal(doc)
	if err != nil {
		// Only strings, whole numbers and finite floats go in; Terraform
		// has no NaN or infinity to give.
		panic(fmt.Sprintf("encoding a policy document: %v", err))
	}
	return b
}

// parsePolicy runs the policy package's own parser and validator over the
// workload (the same checks `gpubroker policy validate` makes of a file),
// and returns every problem as a diagnostic at the attribute it is about.
func (w *workloadSpec) parsePolicy(horizon types.String) (*policy.Policy, diag.Diagnostics) {
	var diags diag.Diagnostics
	p, err := policy.Parse("terraform", w.policyDocument(horizon))
	if err == nil {
		return p, nil
	}
	var list policy.ErrorList
	if !errors.As(err, &list) {
		diags.AddError("Invalid workload", w.redact(err.Error()))
		return nil, diags
	}
	for _, e := range list {
		if ap, ok := attributePath(e.Path); ok {
			msg := w.redact(e.Msg)
			if len(ap.Steps()) > 1 && !strings.HasPrefix(msg, ap.String()) {
				// OpenTofu 1.9 and Terraform point at the block, not
				// inside a nested attribute's value: name the field.
				msg = ap.String() + ": " + msg
			}
			diags.AddAttributeError(ap, "Invalid workload", msg)
		} else {
			diags.AddError("Invalid workload", w.redact(e.Msg))
		}
	}
	return nil, diags
}

// redact hides the values of sensitive attributes in a message meant for a
// diagnostic: OpenTofu masks them in plans, and a message quoting one (the
// policy's or the broker's) would undo that.
func (w *workloadSpec) redact(msg string) string {
	if w.Autoscale == nil || w.Autoscale.Prometheus == nil {
		return msg
	}
	u := w.Autoscale.Prometheus.URL.ValueString()
	if u == "" {
		return msg
	}
	// The policy quotes values with %q. Only the quoted form is replaced:
	// a short value ("prometheus") also occurs in the messages' own words.
	return strings.ReplaceAll(msg, strconv.Quote(u), "(sensitive value)")
}

var segmentRE = regexp.MustCompile(`^([a-z_]+)((?:\[\d+\])*)$`)
var indexRE = regexp.MustCompile(`\[(\d+)\]`)

// attributePath maps a policy field path ("workloads[0].gpu.models[1]",
// "horizon") to the attribute path of the same field. The attributes are
// named and nested like the policy's fields, so this is a change of
// notation, not a table to keep in step.
func attributePath(p string) (path.Path, bool) {
	switch {
	case p == "" || p == "workloads" || p == "workloads[0]":
		return path.Empty(), false
	case strings.HasPrefix(p, "workloads[0]."):
		p = strings.TrimPrefix(p, "workloads[0].")
	case p != "horizon":
		return path.Empty(), false
	}
	var out path.Path
	for i, seg := range strings.Split(p, ".") {
		m := segmentRE.FindStringSubmatch(seg)
		if m == nil {
			return path.Empty(), false
		}
		if i == 0 {
			out = path.Root(m[1])
		} else {
			out = out.AtName(m[1])
		}
		for _, ix := range indexRE.FindAllStringSubmatch(m[2], -1) {
			n, err := strconv.Atoi(ix[1])
			if err != nil {
				return path.Empty(), false
			}
			out = out.AtListIndex(n)
		}
	}
	return out, true
}

// fromSpec sets the attributes from a stored spec, as read back from the
// broker. prior is the state before the read: where it and the broker hold
// the same value written differently (a duration "72h" stored as "3d", a GPU
// alias), the prior spelling is kept so that only real changes show as
// drift.
func (w *workloadSpec) fromSpec(s specJSON, prior *workloadSpec) {
	if prior == nil {
		prior = &workloadSpec{}
	}
	w.Deadline = sameDuration(s.Deadline, prior.Deadline)
	w.CheckpointInterval = sameDuration(s.CheckpointInterval, prior.CheckpointInterval)
	w.RestartOverhead = sameDuration(s.RestartOverhead, prior.RestartOverhead)
	w.Spot = strVal(s.Spot)
	w.SpotPolicy = strVal(s.SpotPolicy)
	w.Schedule = strVal(s.Schedule)
	w.GPU, w.Work, w.Replicas, w.Spread, w.Placement = nil, nil, nil, nil, nil
	w.Scaling, w.Autoscale, w.Availability, w.Load = nil, nil, nil, nil
	if g := s.GPU; g != nil {
		var pm []types.String
		if prior.GPU != nil {
			pm = prior.GPU.Models
		}
		w.GPU = &gpuSpec{Models: sameGPUs(g.Models, pm), Count: i64Val(g.Count), MinMemoryGiB: f64Val(g.MinMemoryGiB), Interconnect: strVal(g.Interconnect)}
	}
	if sc := s.Scaling; sc != nil {
		w.Scaling = &scalingSpec{IntraNode: f64Val(sc.IntraNode), InterNode: f64Val(sc.InterNode)}
	}
	if a := s.Autoscale; a != nil {
		pa := prior.Autoscale
		if pa == nil {
			pa = &autoscaleSpec{}
		}
		w.Autoscale = &autoscaleSpec{ScaleUpWindow: sameDuration(a.ScaleUpWindow, pa.ScaleUpWindow),
			ScaleDownWindow: sameDuration(a.ScaleDownWindow, pa.ScaleDownWindow)}
		if pm := a.Prometheus; pm != nil {
			w.Autoscale.Prometheus = &prometheusSpec{URL: strVal(pm.URL), Query: strVal(pm.Query), TargetPerReplica: f64Val(pm.TargetPerReplica)}
		}
	}
	if a := s.Availability; a != nil {
		var pw types.String
		if prior.Availability != nil {
			pw = prior.Availability.Window
		}
		w.Availability = &availabilitySpec{Goal: f64Val(a.Goal), Window: sameDuration(a.Window, pw)}
	}
	if l := s.Load; l != nil {
		w.Load = &loadSpec{ReplicasByHour: i64sVal(l.ReplicasByHour), RequestsPerSecond: f64sVal(l.RequestsPerSecond), RequestsPerReplica: f64Val(l.RequestsPerReplica)}
	}
	if k := s.Work; k != nil {
		var pr types.String
		if prior.Work != nil {
			pr = prior.Work.ReferenceGPU
		}
		w.Work = &workSpec{GPUHours: f64Val(k.GPUHours), ReferenceGPU: sameGPU(k.ReferenceGPU, pr)}
	}
	if r := s.Replicas; r != nil {
		w.Replicas = &replicasSpec{Min: i64Val(r.Min), Max: i64Val(r.Max), TargetUtilization: f64Val(r.TargetUtilization)}
	}
	if sp := s.Spread; sp != nil {
		w.Spread = &spreadSpec{MinZones: i64Val(sp.MinZones), MinClouds: i64Val(sp.MinClouds)}
	}
	if p := s.Placement; p != nil {
		w.Placement = &placementSpec{Clouds: strsVal(p.Clouds), Regions: strsVal(p.Regions), Zones: strsVal(p.Zones), Residency: strsVal(p.Residency)}
	}
}

func strVal(s *string) types.String {
	if s == nil {
		return types.StringNull()
	}
	return types.StringValue(*s)
}

func i64Val(n *int64) types.Int64 {
	if n == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*n)
}

func f64Val(f *float64) types.Float64 {
	if f == nil {
		return types.Float64Null()
	}
	return types.Float64Value(*f)
}

func strsVal(ss *[]string) []types.String {
	if ss == nil {
		return nil
	}
	out := make([]types.String, 0, len(*ss))
	for _, s := range *ss {
		out = append(out, types.StringValue(s))
	}
	return out
}

func i64sVal(ns *[]int64) []types.Int64 {
	if ns == nil {
		return nil
	}
	out := make([]types.Int64, 0, len(*ns))
	for _, n := range *ns {
		out = append(out, types.Int64Value(n))
	}
	return out
}

func f64sVal(fs *[]float64) []types.Float64 {
	if fs == nil {
		return nil
	}
	out := make([]types.Float64, 0, len(*fs))
	for _, f := range *fs {
		out = append(out, types.Float64Value(f))
	}
	return out
}

// sameDuration keeps the prior spelling of an equal duration ("0s" for a
// stored 0).
func sameDuration(remote *durationValue, prior types.String) types.String {
	if remote == nil {
		return types.StringNull()
	}
	r := string(*remote)
	if p := str(prior); p != nil && *p != r {
		a, errA := policy.ParseDuration(*p)
		b, errB := policy.ParseDuration(r)
		if errA == nil && errB == nil && a == b {
			return prior
		}
	}
	return types.StringValue(r)
}

// sameGPU keeps the prior spelling of the same GPU model ("a100-80gb" for
// "A100-80GB").
func sameGPU(remote *string, prior types.String) types.String {
	if remote == nil {
		return types.StringNull()
	}
	if p := str(prior); p != nil && canonicalGPU(*p) == canonicalGPU(*remote) {
		return prior
	}
	return types.StringValue(*remote)
}

// sameGPUs reads gpu.models back. "any", which the policy takes only on its
// own, is no limit: the attribute left out, as a configuration writes it.
func sameGPUs(remote *stringOrList, prior []types.String) []types.String {
	if remote != nil && len(*remote) == 1 && strings.EqualFold((*remote)[0], "any") {
		return nil
	}
	out := strsVal((*[]string)(remote))
	if len(out) != len(prior) {
		return out
	}
	for i := range out {
		r := out[i].ValueString()
		out[i] = sameGPU(&r, prior[i])
	}
	return out
}

func canonicalGPU(s string) string {
	if m, ok := pricing.ParseGPUModel(s); ok {
		return string(m)
	}
	return s
}
