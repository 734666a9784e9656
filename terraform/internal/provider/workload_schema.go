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
	desc     string
	nested   []field
}

type fieldKind int

const (
	kString fieldKind = iota
	kInt
	kFloat
	kStrings
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
			{name: "count", kind: kInt, desc: "GPUs per instance (per replica for inference); default 1."},
			{name: "min_memory_gib", kind: kFloat, desc: "Least memory per GPU, GiB."},
		}},
		{name: "work", kind: kObject, desc: "Work size of a training or batch job.", nested: []field{
			{name: "gpu_hours", kind: kFloat, desc: "Work in GPU-hours on the reference GPU."},
			{name: "reference_gpu", kind: kString, desc: "GPU the work is measured on; default A100-80GB, or the only allowed model."},
		}},
		{name: "deadline", kind: kString, desc: "How long after start a job must be done, e.g. `72h` or `3d`; leave out for none."},
		{name: "checkpoint_interval", kind: kString, desc: "How often a job saves progress, e.g. `1h`; `0` means a preemption loses everything since start."},
		{name: "restart_overhead", kind: kString, desc: "Time lost to each restart after a preemption; default `10m`."},
		{name: "spot", kind: kString, desc: "Spot policy: `never`, `prefer` (default) or `only`."},
		{name: "replicas", kind: kObject, desc: "Serving need of an inference service.", nested: []field{
			{name: "min", kind: kInt, desc: "Least replicas, at least 1."},
			{name: "max", kind: kInt, desc: "Most replicas; default min."},
			{name: "target_utilization", kind: kFloat, desc: "GPU utilisation autoscaling aims for, above 0 and at most 1; default 0.7."},
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
			out[f.name] = dsschema.StringAttribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kInt:
			out[f.name] = dsschema.Int64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloat:
			out[f.name] = dsschema.Float64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kStrings:
			out[f.name] = dsschema.ListAttribute{ElementType: types.StringType, Required: req, Optional: opt, MarkdownDescription: f.desc}
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
			out[f.name] = rschema.StringAttribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kInt:
			out[f.name] = rschema.Int64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kFloat:
			out[f.name] = rschema.Float64Attribute{Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kStrings:
			out[f.name] = rschema.ListAttribute{ElementType: types.StringType, Required: req, Optional: opt, MarkdownDescription: f.desc}
		case kObject:
			out[f.name] = rschema.SingleNestedAttribute{Attributes: resourceAttributes(f.nested), Required: req, Optional: opt, MarkdownDescription: f.desc}
		}
	}
	return out
}
