package provider

import (
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/pricing"
)

// field describes one workload attribute once, for both the data source's
// and the resource's schema (the framework has a schema type per kind).
type field struct {
	name     string
	kind     fieldKind
	required bool
	// sensitive hides the value in plans and state output: a URL may carry
	// a password or a token.
	sensitive bool
	desc      string
	nested    []field
}

type fieldKind int

const (
	kString fieldKind = iota
	kInt
	kFloat
	kStrings
	kInts
	kFloats
	kObject
)

// workloadFields mirror the policy file's workload keys (docs/policy.md).
// Defaults are the policy's: an attribute left out is left out of the
// policy too, and the policy's default applies.
func workloadFields() []field {
	return []field{
		{name: "name", kind: kString, required: true, desc: "Workload name: 1-63 lower-case letters, digits, `-`, `_` or `.`, starting with a letter or digit."},
		{name: "team", kind: kString, desc: "Team that owns the workload; budgets can cover a team."},
		{name: "kind", kind: kString, required: true, desc: "`training`, `inference` or `batch`."},
		{name: "gpu", kind: kObject, desc: "GPUs the workload needs.", nested: []field{
			{name: "models", kind: kStrings, desc: "Allowed GPU models (" + gpuList() + "); leave out for any model that fits."},
			{name: "count", kind: kInt, desc: "Training and batch: the job's total GPUs, 1 to 16384, which may span several identical " +
				"instances in one zone; inference: GPUs per replica, 1 to 16. Default 1."},
			{name: "min_memory_gib", kind: kFloat, desc: "Least memory per GPU, GiB."},
			{name: "interconnect", kind: kString, desc: "`any` (default) or `required`. Training and batch: `required` limits a job " +
				"that spans more than one instance to instance types with a GPU network (AWS EFA, GCP GPUDirect-TCPX/TCPXO/RDMA, Azure InfiniBand)."},
		}},
		{name: "work", kind: kObject, desc: "Work size of a training or batch job.", nested: []field{
			{name: "gpu_hours", kind: kFloat, desc: "Work in GPU-hours on the reference GPU."},
			{name: "reference_gpu", kind: kString, desc: "GPU the work is measured on; default A100-80GB, or the only allowed model."},
		}},
		{name: "deadline", kind: kString, desc: "How long after start a job must be done, e.g. `72h` or `3d`; leave out for none."},
		{name: "checkpoint_interval", kind: kString, desc: "How often a job saves progress, e.g. `1h`; `0` means a preemption loses everything since start."},
		{name: "restart_overhead", kind: kString, desc: "Time lost to each restart after a preemption; default `10m`."},
		{name: "spot", kind: kString, desc: "Spot policy: `never`, `prefer` (default) or `only`."},
		{name: "spot_policy", kind: kString, desc: "The live spot policy that runs the workload while it is up; default `adaptive`. " +
			"Training and batch: `on-demand`, `greedy`, `uniform-progress`, `adaptive`; inference: `on-demand`, `spot-hedge`, `adaptive`."},
		{name: "scaling", kind: kObject, desc: "Training and batch: this job's scaling efficiency; default the policy's (0.95 and 0.90).", nested: []field{
			{name: "intra_node", kind: kFloat, desc: "Share of linear speed-up kept per doubling of GPUs inside one instance, in (0, 1]; default 0.95."},
			{name: "inter_node", kind: kFloat, desc: "Share of linear speed-up kept per doubling of instances, in (0, 1]; default 0.90."},
		}},
		{name: "schedule", kind: kString, desc: "Training and batch: a cron expression in UTC on which the job recurs, e.g. `0 2 * * *` " +
			"or `@daily` (five fields `minute hour day-of-month month day-of-week`, or `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`); " +
			"leave out for a job that runs once. A `deadline` longer than the shortest time between runs is an error."},
		{name: "replicas", kind: kObject, desc: "Serving need of an inference service.", nested: []field{
			{name: "min", kind: kInt, desc: "Least replicas, at least 1."},
			{name: "max", kind: kInt, desc: "Most replicas; default min."},
			{name: "target_utilization", kind: kFloat, desc: "GPU utilisation autoscaling aims for, above 0 and at most 1; default 0.7."},
		}},
		{name: "autoscale", kind: kObject, desc: "Inference: how replicas follow load between `replicas.min` and `replicas.max`.", nested: []field{
			{name: "prometheus", kind: kObject, desc: "A load metric read from Prometheus; leave out to scale on GPU utilisation alone.", nested: []field{
				{name: "url", kind: kString, sensitive: true, desc: "The Prometheus server's http(s) URL, e.g. `http://prometheus:9090`; " +
					"credentials or a query string in the URL are refused (without showing them)."},
				{name: "query", kind: kString, desc: "PromQL giving the service's total load, e.g. `sum(rate(http_requests_total{service=\"chat\"}[2m]))`; at most 4096 characters."},
				{name: "target_per_replica", kind: kFloat, desc: "Load one replica should carry, above 0."},
			}},
			{name: "scale_up_window", kind: kString, desc: "A scale up takes the lowest recommendation of this window; default `0` (at once), 0 to `1h`."},
			{name: "scale_down_window", kind: kString, desc: "A scale down takes the highest recommendation of this window; default `5m`, 0 to `24h`."},
		}},
		{name: "availability", kind: kObject, desc: "Inference: the share of time the service should hold its replicas at target.", nested: []field{
			{name: "goal", kind: kFloat, desc: "Share of time at target, above 0 and below 1; default 0.99."},
			{name: "window", kind: kString, desc: "The rolling period the goal is measured over, `1h` to `90d`; default `30d`."},
		}},
		{name: "load", kind: kObject, desc: "Inference: the service's load over a day (24 hourly entries, UTC) or a week (168, from Monday 00:00 UTC); " +
			"the planner lays it out for the peak and costs it at the mean. Give `replicas_by_hour`, or `requests_per_second` with `requests_per_replica`.", nested: []field{
			{name: "replicas_by_hour", kind: kInts, desc: "Replicas per hour, 24 or 168 entries, each 0 or more and at most `replicas.max`; below `replicas.min` counts as `replicas.min`."},
			{name: "requests_per_second", kind: kFloats, desc: "Request rate per hour, 24 or 168 entries, each 0 or more; replicas per hour = " +
				"ceil(rate ÷ (`requests_per_replica` × `replicas.target_utilization`)), within `replicas.min`..`replicas.max`."},
			{name: "requests_per_replica", kind: kFloat, desc: "Requests per second one replica serves at full utilisation, above 0; required with `requests_per_second`, not allowed with `replicas_by_hour`."},
		}},
		{name: "spread", kind: kObject, desc: "How widely inference replicas are spread.", nested: []field{
			{name: "min_zones", kind: kInt, desc: "Least distinct zones; default 1."},
			{name: "min_clouds", kind: kInt, desc: "Least distinct clouds; default 1."},
		}},
		{name: "placement", kind: kObject, desc: "Where the workload may run.", nested: []field{
			{name: "clouds", kind: kStrings, desc: "Allowed clouds: `aws`, `gcp`, `azure`."},
			{name: "regions", kind: kStrings, desc: "Region globs, e.g. `us-*`."},
			{name: "zones", kind: kStrings, desc: "Zone globs."},
			{name: "residency", kind: kStrings, desc: "Data residency: `us`, `eu`, `apac`."},
		}},
	}
}

func gpuList() string {
	var s string
	for i, m := range pricing.GPUModels() {
		if i > 0 {
			s += ", "
		}
		s += "`" + string(m) + "`"
	}
	return s
}

func dsAttributes(fs []field) map[string]dsschema.Attribute {
	out := map[string]dsschema.Attribute{}
	for _, f := range fs {
		req, opt := f.required, !f.required
		switch f.kind {
		case kString:
			out[f.name] = dsschema.StringAttribute{Required: req, Optional: opt, Sensitive: f.sensitive, MarkdownDescription: f.desc}
		case kInt:
			out[f.name] = dsschema.Int64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloat:
			out[f.name] = dsschema.Float64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kStrings:
			out[f.name] = dsschema.ListAttribute{ElementType: types.StringType, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kInts:
			out[f.name] = dsschema.ListAttribute{ElementType: types.Int64Type, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloats:
			out[f.name] = dsschema.ListAttribute{ElementType: types.Float64Type, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kObject:
			out[f.name] = dsschema.SingleNestedAttribute{Attributes: dsAttributes(f.nested), Required: req, Optional: opt, MarkdownDescription: f.desc}
		}
	}
	return out
}

func resourceAttributes(fs []field) map[string]rschema.Attribute {
	out := map[string]rschema.Attribute{}
	for _, f := range fs {
		req, opt := f.required, !f.required
		switch f.kind {
		case kString:
			out[f.name] = rschema.StringAttribute{Required: req, Optional: opt, Sensitive: f.sensitive, MarkdownDescription: f.desc}
		case kInt:
			out[f.name] = rschema.Int64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloat:
			out[f.name] = rschema.Float64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kStrings:
			out[f.name] = rschema.ListAttribute{ElementType: types.StringType, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kInts:
			out[f.name] = rschema.ListAttribute{ElementType: types.Int64Type, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloats:
			out[f.name] = rschema.ListAttribute{ElementType: types.Float64Type, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kObject:
			out[f.name] = rschema.SingleNestedAttribute{Attributes: resourceAttributes(f.nested), Required: req, Optional: opt, MarkdownDescription: f.desc}
		}
	}
	return out
}
