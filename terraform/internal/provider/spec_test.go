package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/policy"
)

func sv(s string) types.String { return types.StringValue(s) }

func svs(ss ...string) []types.String {
	out := []types.String{}
	for _, s := range ss {
		out = append(out, sv(s))
	}
	return out
}

// training is a valid training workload with every job field set.
func training() workloadSpec {
	return workloadSpec{
		Name: sv("finetune"), Team: sv("ml"), Kind: sv("training"),
		GPU:                &gpuSpec{Models: svs("A100-80GB", "H100"), Count: types.Int64Value(8), MinMemoryGiB: types.Float64Value(40)},
		Work:               &workSpec{GPUHours: types.Float64Value(400), ReferenceGPU: sv("A100-80GB")},
		Deadline:           sv("3d"),
		CheckpointInterval: sv("1h"),
		RestartOverhead:    sv("0"),
		Spot:               sv("prefer"),
		Placement:          &placementSpec{Clouds: svs("aws", "gcp"), Regions: svs("us-*"), Residency: svs("us")},
	}
}

func TestAttributePath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want path.Path
		ok   bool
	}{
		{"workloads[0].gpu.models[1]", path.Root("gpu").AtName("models").AtListIndex(1), true},
		{"workloads[0].kind", path.Root("kind"), true},
		{"workloads[0].replicas.max", path.Root("replicas").AtName("max"), true},
		{"workloads[0].placement.regions[12]", path.Root("placement").AtName("regions").AtListIndex(12), true},
		{"horizon", path.Root("horizon"), true},
		{"workloads[0]", path.Empty(), false},
		{"", path.Empty(), false},
		{"budgets[0].name", path.Empty(), false},
		{"workloads[0].Bad-Key", path.Empty(), false},
	} {
		got, ok := attributePath(tc.in)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("attributePath(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPolicyDocumentParses checks that the attributes become a policy the
// policy package reads with every field as written (a written zero
// restart_overhead is kept, not replaced by the default).
func TestPolicyDocumentParses(t *testing.T) {
	w := training()
	p, diags := w.parsePolicy(types.StringNull())
	if diags.HasError() {
		t.Fatalf("valid workload rejected: %v", diags)
	}
	got := p.Workloads[0]
	if got.Name != "finetune" || got.Team != "ml" || got.Kind != policy.Training || got.GPU.Count != 8 ||
		len(got.GPU.Models) != 2 || got.GPU.MinMemoryGiB != 40 || got.WorkGPUHours != 400 || got.Deadline.Hours() != 72 ||
		got.CheckpointInterval.Hours() != 1 || got.RestartOverhead != 0 || got.Spot != policy.SpotPrefer ||
		len(got.Limits.Clouds) != 2 || got.Limits.Regions[0] != "us-*" || got.Limits.Residency[0] != "us" {
		t.Fatalf("parsed workload differs from the attributes: %+v", got)
	}
	// Left out, the policy's defaults apply.
	w = workloadSpec{Name: sv("svc"), Kind: sv("inference"), Replicas: &replicasSpec{Min: types.Int64Value(2)}}
	p, diags = w.parsePolicy(sv("240h"))
	if diags.HasError() {
		t.Fatalf("valid inference workload rejected: %v", diags)
	}
	if got := p.Workloads[0]; got.GPU.Count != policy.DefaultGPUCount || got.Replicas.Max != 2 || got.Spot != policy.DefaultSpot ||
		got.RestartOverhead != policy.DefaultRestartOverhead || p.Horizon.Hours() != 240 {
		t.Fatalf("defaults not applied: %+v horizon %s", got, p.Horizon)
	}
}

// TestValidationPaths checks that each policy problem becomes a diagnostic
// at the attribute it is about, with the policy package's own message.
func TestValidationPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(w *workloadSpec)
		at    path.Path
		msgRE string
	}{
		{"unknown GPU", func(w *workloadSpec) { w.GPU.Models = svs("A100-80GB", "A100-80") },
			path.Root("gpu").AtName("models").AtListIndex(1), `unknown GPU "A100-80"; did you mean`},
		{"too many GPUs", func(w *workloadSpec) { w.GPU.Count = types.Int64Value(99999) },
			path.Root("gpu").AtName("count"), "want 1 to 16384"},
		{"kind typo", func(w *workloadSpec) { w.Kind = sv("trainin") }, path.Root("kind"), `did you mean "training"`},
		{"bad duration", func(w *workloadSpec) { w.Deadline = sv("3 days") }, path.Root("deadline"), "deadline"},
		{"checkpoint past deadline", func(w *workloadSpec) { w.CheckpointInterval = sv("4d") }, path.Root("checkpoint_interval"), "longer than the deadline"},
		{"bad cloud", func(w *workloadSpec) { w.Placement.Clouds = svs("aws", "gpc") }, path.Root("placement").AtName("clouds").AtListIndex(1), "gpc"},
		{"bad glob", func(w *workloadSpec) { w.Placement.Regions = svs("us-[") }, path.Root("placement").AtName("regions").AtListIndex(0), "us-\\["},
		{"no work", func(w *workloadSpec) { w.Work = nil }, path.Root("work").AtName("gpu_hours"), "needs work"},
		{"replicas on a job", func(w *workloadSpec) { w.Replicas = &replicasSpec{Min: types.Int64Value(1)} }, path.Root("replicas"), "inference services only"},
		{"bad name", func(w *workloadSpec) { w.Name = sv("Fine Tune") }, path.Root("name"), "lower-case"},
		{"spot typo", func(w *workloadSpec) { w.Spot = sv("prefered") }, path.Root("spot"), `did you mean "prefer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := training()
			tc.edit(&w)
			_, diags := w.parsePolicy(types.StringNull())
			if !diags.HasError() {
				t.Fatal("no error")
			}
			var found []string
			for _, d := range diags.Errors() {
				dp, ok := d.(interface{ Path() path.Path })
				if ok && dp.Path().Equal(tc.at) && matches(t, tc.msgRE, d.Detail()) {
					return
				}
				at := "(no path)"
				if ok {
					at = dp.Path().String()
				}
				found = append(found, at+": "+d.Detail())
			}
			t.Fatalf("no error at %s matching %q; got:\n%s", tc.at, tc.msgRE, strings.Join(found, "\n"))
		})
	}
}

// TestSpecRoundTrip checks the spec sent to the broker reads back as the
// same attributes, and that a value the broker holds in another spelling
// (a duration, a GPU alias) keeps the configuration's.
func TestSpecRoundTrip(t *testing.T) {
	w := training()
	b, err := json.Marshal(w.spec())
	if err != nil {
		t.Fatal(err)
	}
	var s specJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	var back workloadSpec
	back.Name, back.Team, back.Kind = w.Name, w.Team, w.Kind
	back.fromSpec(s, nil)
	if a, b := string(w.policyDocument(types.StringNull())), string(back.policyDocument(types.StringNull())); a != b {
		t.Fatalf("round trip changed the workload:\n%s\n%s", a, b)
	}
	// The broker holds 72h and a100-80gb; the configuration says 3d and
	// A100-80GB: same values, no drift.
	remote := strings.NewReplacer(`"3d"`, `"72h"`, `"A100-80GB"`, `"a100-80gb"`).Replace(string(b))
	if err := json.Unmarshal([]byte(remote), &s); err != nil {
		t.Fatal(err)
	}
	prior := w
	back.fromSpec(s, &prior)
	if back.Deadline.ValueString() != "3d" || back.GPU.Models[0].ValueString() != "A100-80GB" || back.Work.ReferenceGPU.ValueString() != "A100-80GB" {
		t.Fatalf("equal values in another spelling show as drift: %+v %+v", back.Deadline, back.GPU.Models)
	}
	// A real change shows.
	remote = strings.Replace(string(b), `"3d"`, `"96h"`, 1)
	_ = json.Unmarshal([]byte(remote), &s)
	back.fromSpec(s, &prior)
	if back.Deadline.ValueString() != "96h" {
		t.Fatalf("changed deadline not read back: %s", back.Deadline)
	}
	// Written empty lists stay empty lists, absent ones stay null.
	w.Placement.Zones = svs()
	b, _ = json.Marshal(w.spec())
	if !strings.Contains(string(b), `"zones":[]`) || strings.Contains(string(b), "spread") {
		t.Fatalf("spec %s: want zones [] and no spread", b)
	}
}
