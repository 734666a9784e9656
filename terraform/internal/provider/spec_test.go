package provider

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
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

func iv(n int64) types.Int64     { return types.Int64Value(n) }
func fv(f float64) types.Float64 { return types.Float64Value(f) }

// training is a valid training workload with every job field set.
func training() workloadSpec {
	return workloadSpec{
		Name: sv("finetune"), Team: sv("ml"), Kind: sv("training"),
		GPU: &gpuSpec{Models: svs("A100-80GB", "H100"), Count: iv(16), MinMemoryGiB: fv(40),
			Interconnect: sv("required")},
		Work:               &workSpec{GPUHours: fv(400), ReferenceGPU: sv("A100-80GB")},
		Deadline:           sv("3d"),
		CheckpointInterval: sv("1h"),
		RestartOverhead:    sv("0"),
		Spot:               sv("prefer"),
		SpotPolicy:         sv("uniform-progress"),
		Scaling:            &scalingSpec{IntraNode: fv(0.97), InterNode: fv(0.85)},
		// Weekly: a run may take the 3-day deadline before the next starts.
		Schedule:  sv("0 2 * * mon"),
		Placement: &placementSpec{Clouds: svs("aws", "gcp"), Regions: svs("us-*"), Residency: svs("us")},
	}
}

// inference is a valid inference service with every service field set,
// its load given as replicas by hour.
func inference() workloadSpec {
	byHour := make([]types.Int64, 24)
	for h := range byHour {
		byHour[h] = iv(int64(2 + h%9))
	}
	return workloadSpec{
		Name: sv("chat"), Team: sv("product"), Kind: sv("inference"),
		GPU:        &gpuSpec{Models: svs("L4", "A10G"), Count: iv(1), MinMemoryGiB: fv(20)},
		Spot:       sv("prefer"),
		SpotPolicy: sv("spot-hedge"),
		Replicas:   &replicasSpec{Min: iv(2), Max: iv(10), TargetUtilization: fv(0.6)},
		Autoscale: &autoscaleSpec{
			Prometheus: &prometheusSpec{URL: sv("http://prometheus.monitoring:9090"),
				Query: sv(`sum(rate(http_requests_total{service="chat"}[2m]))`), TargetPerReplica: fv(50)},
			ScaleUpWindow: sv("0"), ScaleDownWindow: sv("10m"),
		},
		Availability: &availabilitySpec{Goal: fv(0.995), Window: sv("30d")},
		Load:         &loadSpec{ReplicasByHour: byHour},
		Spread:       &spreadSpec{MinZones: iv(2), MinClouds: iv(1)},
		Placement:    &placementSpec{Residency: svs("eu")},
	}
}

// inferenceByRate is inference with its load as request rates.
func inferenceByRate() workloadSpec {
	w := inference()
	rps := make([]types.Float64, 24)
	for h := range rps {
		rps[h] = fv(12.5 * float64(1+h%7))
	}
	w.Load = &loadSpec{RequestsPerSecond: rps, RequestsPerReplica: fv(25)}
	return w
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
	if got.Name != "finetune" || got.Team != "ml" || got.Kind != policy.Training || got.GPU.Count != 16 ||
		len(got.GPU.Models) != 2 || got.GPU.MinMemoryGiB != 40 || got.WorkGPUHours != 400 || got.Deadline.Hours() != 72 ||
		got.CheckpointInterval.Hours() != 1 || got.RestartOverhead != 0 || got.Spot != policy.SpotPrefer ||
		len(got.Limits.Clouds) != 2 || got.Limits.Regions[0] != "us-*" || got.Limits.Residency[0] != "us" ||
		got.GPU.Interconnect != policy.InterconnectRequired || got.SpotDecider != "uniform-progress" ||
		got.Scaling != (policy.Scaling{IntraNode: 0.97, InterNode: 0.85}) || got.Schedule != "0 2 * * mon" {
		t.Fatalf("parsed workload differs from the attributes: %+v", got)
	}
	w = inference()
	p, diags = w.parsePolicy(types.StringNull())
	if diags.HasError() {
		t.Fatalf("valid inference workload rejected: %v", diags)
	}
	got = p.Workloads[0]
	if pm := got.Autoscale.Prometheus; pm == nil || pm.URL != "http://prometheus.monitoring:9090" || pm.TargetPerReplica != 50 ||
		!strings.Contains(pm.Query, `service="chat"`) || got.Autoscale.ScaleUpWindow != 0 || got.Autoscale.ScaleDownWindow.Minutes() != 10 ||
		got.Availability.Goal != 0.995 || got.Availability.Window.Hours() != 720 || got.SpotDecider != "spot-hedge" ||
		got.Load == nil || len(got.Load.ReplicasByHour) != 24 || got.Load.ReplicasByHour[8] != 10 {
		t.Fatalf("parsed inference workload differs from the attributes: %+v %+v", got, got.Autoscale.Prometheus)
	}
	w = inferenceByRate()
	if p, diags = w.parsePolicy(types.StringNull()); diags.HasError() {
		t.Fatalf("valid inference workload (load by rate) rejected: %v", diags)
	}
	if l := p.Workloads[0].Load; l == nil || len(l.RequestsPerSecond) != 24 || l.RequestsPerSecond[6] != 87.5 || l.RequestsPerReplica != 25 {
		t.Fatalf("load read as %+v", l)
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
	byHour := func(n int) []types.Int64 {
		out := make([]types.Int64, n)
		for h := range out {
			out[h] = iv(2)
		}
		return out
	}
	svc := func(edit func(w *workloadSpec)) func(w *workloadSpec) {
		return func(w *workloadSpec) { *w = inference(); edit(w) }
	}
	prom := path.Root("autoscale").AtName("prometheus")
	for _, tc := range []struct {
		name  string
		edit  func(w *workloadSpec)
		at    path.Path
		msgRE string
		// never must match no diagnostic: a secret the message must not show.
		never string
	}{
		{"unknown GPU", func(w *workloadSpec) { w.GPU.Models = svs("A100-80GB", "A100-80") },
			path.Root("gpu").AtName("models").AtListIndex(1), `unknown GPU "A100-80"; did you mean`, ""},
		{"too many GPUs", func(w *workloadSpec) { w.GPU.Count = types.Int64Value(99999) },
			path.Root("gpu").AtName("count"), "want 1 to 16384", ""},
		{"kind typo", func(w *workloadSpec) { w.Kind = sv("trainin") }, path.Root("kind"), `did you mean "training"`, ""},
		{"bad duration", func(w *workloadSpec) { w.Deadline = sv("3 days") }, path.Root("deadline"), "deadline", ""},
		{"checkpoint past deadline", func(w *workloadSpec) { w.CheckpointInterval = sv("4d") }, path.Root("checkpoint_interval"), "longer than the deadline", ""},
		{"bad cloud", func(w *workloadSpec) { w.Placement.Clouds = svs("aws", "gpc") }, path.Root("placement").AtName("clouds").AtListIndex(1), "gpc", ""},
		{"bad glob", func(w *workloadSpec) { w.Placement.Regions = svs("us-[") }, path.Root("placement").AtName("regions").AtListIndex(0), "us-\\[", ""},
		{"no work", func(w *workloadSpec) { w.Work = nil }, path.Root("work").AtName("gpu_hours"), "needs work", ""},
		{"replicas on a job", func(w *workloadSpec) { w.Replicas = &replicasSpec{Min: types.Int64Value(1)} }, path.Root("replicas"), "inference services only", ""},
		{"bad name", func(w *workloadSpec) { w.Name = sv("Fine Tune") }, path.Root("name"), "lower-case", ""},
		{"spot typo", func(w *workloadSpec) { w.Spot = sv("prefered") }, path.Root("spot"), `did you mean "prefer"`, ""},
		{"interconnect typo", func(w *workloadSpec) { w.GPU.Interconnect = sv("requried") },
			path.Root("gpu").AtName("interconnect"), `did you mean "required"`, ""},
		{"scaling above 1", func(w *workloadSpec) { w.Scaling.InterNode = fv(1.2) },
			path.Root("scaling").AtName("inter_node"), `scaling.inter_node 1.2: want .* in \(0, 1\]`, ""},
		{"bad cron", func(w *workloadSpec) { w.Schedule = sv("0 25 * * *") }, path.Root("schedule"), "schedule: .*hour", ""},
		{"schedule shorter than deadline", func(w *workloadSpec) { w.Schedule = sv("@daily") }, path.Root("deadline"), "between runs", ""},
		{"spot_policy of another kind", func(w *workloadSpec) { w.SpotPolicy = sv("spot-hedge") },
			path.Root("spot_policy"), `unknown training spot_policy "spot-hedge"; want one of on-demand, greedy`, ""},
		{"availability on a job", func(w *workloadSpec) { w.Availability = &availabilitySpec{Goal: fv(0.9)} },
			path.Root("availability"), "inference services only", ""},
		{"load on a job", func(w *workloadSpec) { w.Load = &loadSpec{ReplicasByHour: byHour(24)} }, path.Root("load"), "inference services only", ""},
		{"availability goal 1.5", svc(func(w *workloadSpec) { w.Availability.Goal = fv(1.5) }),
			path.Root("availability").AtName("goal"), "above 0 and below 1", ""},
		{"availability window", svc(func(w *workloadSpec) { w.Availability.Window = sv("100d") }),
			path.Root("availability").AtName("window"), "want 1h to 90d", ""},
		{"23 hours", svc(func(w *workloadSpec) { w.Load.ReplicasByHour = byHour(23) }),
			path.Root("load").AtName("replicas_by_hour"), "has 23 entries; want 24", ""},
		{"hour above max", svc(func(w *workloadSpec) { w.Load.ReplicasByHour[5] = iv(11) }),
			path.Root("load").AtName("replicas_by_hour").AtListIndex(5), "more than replicas.max 10", ""},
		{"negative rate", func(w *workloadSpec) { *w = inferenceByRate(); w.Load.RequestsPerSecond[3] = fv(-1) },
			path.Root("load").AtName("requests_per_second").AtListIndex(3), "want requests per second, 0 or more", ""},
		{"rate without per replica", func(w *workloadSpec) { *w = inferenceByRate(); w.Load.RequestsPerReplica = types.Float64Null() },
			path.Root("load").AtName("requests_per_replica"), "needs requests_per_replica", ""},
		{"scale up window", svc(func(w *workloadSpec) { w.Autoscale.ScaleUpWindow = sv("2h") }),
			path.Root("autoscale").AtName("scale_up_window"), "want 0 to 1h", ""},
		{"target per replica", svc(func(w *workloadSpec) { w.Autoscale.Prometheus.TargetPerReplica = fv(0) }),
			prom.AtName("target_per_replica"), "above 0", ""},
		{"credentials in the URL", svc(func(w *workloadSpec) { w.Autoscale.Prometheus.URL = sv("http://admin:hunter2@prometheus:9090") }),
			prom.AtName("url"), "credentials are not allowed", "hunter2"},
		{"unparsable URL with credentials", svc(func(w *workloadSpec) { w.Autoscale.Prometheus.URL = sv("http://admin:hunter2@prom etheus:9090") }),
			prom.AtName("url"), "not shown", "hunter2"},
		// The attribute is sensitive, so even a URL without credentials
		// is not repeated in the diagnostic.
		{"URL without scheme", svc(func(w *workloadSpec) { w.Autoscale.Prometheus.URL = sv("prometheus:9090/t0ps3cret") }),
			prom.AtName("url"), `autoscale.prometheus.url \(sensitive value\): want the server's http\(s\) URL`, "t0ps3cret"},
		{"URL with a token in its query string", svc(func(w *workloadSpec) { w.Autoscale.Prometheus.URL = sv("https://prom.example.com?token=t0ps3cret") }),
			prom.AtName("url"), `not shown: a query string may hold a token`, "t0ps3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := training()
			tc.edit(&w)
			_, diags := w.parsePolicy(types.StringNull())
			if !diags.HasError() {
				t.Fatal("no error")
			}
			if tc.never != "" {
				for _, d := range diags {
					if strings.Contains(d.Summary()+d.Detail(), tc.never) {
						t.Errorf("diagnostic shows the secret: %s", d.Detail())
					}
				}
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
	w = training()
	w.Placement.Zones = svs()
	b, _ = json.Marshal(w.spec())
	if !strings.Contains(string(b), `"zones":[]`) || strings.Contains(string(b), "spread") {
		t.Fatalf("spec %s: want zones [] and no spread", b)
	}
}

// roundTrip sends w to the broker's form and reads it back with prior, as
// a refresh does.
func roundTrip(t *testing.T, remote string, prior *workloadSpec) workloadSpec {
	t.Helper()
	var s specJSON
	if err := json.Unmarshal([]byte(remote), &s); err != nil {
		t.Fatal(err)
	}
	var back workloadSpec
	back.Name, back.Team, back.Kind = prior.Name, prior.Team, prior.Kind
	back.fromSpec(s, prior)
	return back
}

// TestSpecRoundTripEveryKey checks every workload key: what the broker
// stores for a job or a service reads back into exactly the attributes
// written (no drift), and durations the broker holds in another spelling
// keep the configuration's.
func TestSpecRoundTripEveryKey(t *testing.T) {
	for name, w := range map[string]workloadSpec{"training": training(), "inference": inference(), "inference by rate": inferenceByRate()} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(w.spec())
			if err != nil {
				t.Fatal(err)
			}
			if back := roundTrip(t, string(b), &w); !reflect.DeepEqual(back, w) {
				t.Fatalf("round trip changed the workload:\n%+v\n%+v\nspec %s", w, back, b)
			}
			// With no prior (import), the stored spelling is taken as is.
			if back := roundTrip(t, string(b), &workloadSpec{Name: w.Name, Team: w.Team, Kind: w.Kind}); !reflect.DeepEqual(back, w) {
				t.Fatalf("import changed the workload:\n%+v\n%+v", w, back)
			}
		})
	}
	w := inference()
	b, _ := json.Marshal(w.spec())
	for _, key := range []string{"spot_policy", "autoscale", "prometheus", "url", "query", "target_per_replica", "scale_up_window",
		"scale_down_window", "availability", "goal", "window", "load", "replicas_by_hour"} {
		if !strings.Contains(string(b), `"`+key+`":`) {
			t.Errorf("spec %s lacks %s", b, key)
		}
	}
	// The broker holds the same durations written differently: no drift.
	remote := strings.NewReplacer(`"30d"`, `"720h"`, `"10m"`, `"600s"`, `"scale_up_window":"0"`, `"scale_up_window":"0s"`).Replace(string(b))
	if remote == string(b) {
		t.Fatal("replacements did not apply")
	}
	if back := roundTrip(t, remote, &w); !reflect.DeepEqual(back, w) {
		t.Fatalf("equal durations in another spelling show as drift:\n%+v\n%+v", w.Autoscale, back.Autoscale)
	}
	// Real changes show.
	remote = strings.NewReplacer(`"30d"`, `"7d"`, `"10m"`, `"15m"`, `"goal":0.995`, `"goal":0.999`).Replace(string(b))
	back := roundTrip(t, remote, &w)
	if back.Availability.Window.ValueString() != "7d" || back.Autoscale.ScaleDownWindow.ValueString() != "15m" || back.Availability.Goal.ValueFloat64() != 0.999 {
		t.Fatalf("changes not read back: %+v %+v", back.Availability, back.Autoscale)
	}
	// A block the broker no longer holds is gone, not kept from the prior.
	back = roundTrip(t, `{"replicas":{"min":2}}`, &w)
	if back.Autoscale != nil || back.Availability != nil || back.Load != nil || !back.SpotPolicy.IsNull() {
		t.Fatalf("removed keys kept: %+v", back)
	}
}

// TestSpecAlternativeForms reads back specs written through the API or the
// CLI in forms the policy accepts but the provider never writes: gpu.models
// as one string ("any" or a single model) and the durations that may be 0
// as the JSON number 0. Each must read into the state without error (an
// import), and read against a configuration holding the same value must
// give that configuration back (no drift).
func TestSpecAlternativeForms(t *testing.T) {
	job := func(f func(w *workloadSpec)) workloadSpec {
		w := workloadSpec{Name: sv("w"), Kind: sv("training"), Work: &workSpec{GPUHours: fv(10)}}
		f(&w)
		return w
	}
	svc := func(f func(w *workloadSpec)) workloadSpec {
		w := workloadSpec{Name: sv("w"), Kind: sv("inference"), Replicas: &replicasSpec{Min: iv(1)}}
		f(&w)
		return w
	}
	const work, replicas = `"work":{"gpu_hours":10}`, `"replicas":{"min":1}`
	for _, tc := range []struct {
		name string
		spec string
		// want is the state an import reads; config is a configuration
		// holding the same values in the provider's spelling.
		want, config workloadSpec
	}{
		{"models any", `{"gpu":{"models":"any","count":2},` + work + `}`,
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Count: iv(2)} }),
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Count: iv(2)} })},
		{"models ANY", `{"gpu":{"models":"ANY"},` + work + `}`,
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{} }),
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{} })},
		{"models one name", `{"gpu":{"models":"H100"},` + work + `}`,
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Models: svs("H100")} }),
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Models: svs("H100")} })},
		{"models one alias", `{"gpu":{"models":"nvidia-h100-80gb"},` + work + `}`,
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Models: svs("nvidia-h100-80gb")} }),
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Models: svs("H100")} })},
		{"checkpoint_interval 0", `{` + work + `,"checkpoint_interval":0}`,
			job(func(w *workloadSpec) { w.CheckpointInterval = sv("0") }),
			job(func(w *workloadSpec) { w.CheckpointInterval = sv("0s") })},
		{"checkpoint_interval 0 as written", `{` + work + `,"checkpoint_interval":0}`,
			job(func(w *workloadSpec) { w.CheckpointInterval = sv("0") }),
			job(func(w *workloadSpec) { w.CheckpointInterval = sv("0") })},
		{"restart_overhead 0", `{` + work + `,"restart_overhead":0}`,
			job(func(w *workloadSpec) { w.RestartOverhead = sv("0") }),
			job(func(w *workloadSpec) { w.RestartOverhead = sv("0m") })},
		{"autoscale windows 0", `{` + replicas + `,"autoscale":{"scale_up_window":0,"scale_down_window":0}}`,
			svc(func(w *workloadSpec) { w.Autoscale = &autoscaleSpec{ScaleUpWindow: sv("0"), ScaleDownWindow: sv("0")} }),
			svc(func(w *workloadSpec) {
				w.Autoscale = &autoscaleSpec{ScaleUpWindow: sv("0s"), ScaleDownWindow: sv("0h")}
			})},
		{"null counts as left out", `{"gpu":{"models":null,"count":1},` + work + `,"deadline":null,"placement":null}`,
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Count: iv(1)} }),
			job(func(w *workloadSpec) { w.GPU = &gpuSpec{Count: iv(1)} })},
		{"all at once", `{"gpu":{"models":"any"},` + work + `,"checkpoint_interval":0,"restart_overhead":0}`,
			job(func(w *workloadSpec) {
				w.GPU = &gpuSpec{}
				w.CheckpointInterval, w.RestartOverhead = sv("0"), sv("0")
			}),
			job(func(w *workloadSpec) {
				w.GPU = &gpuSpec{}
				w.CheckpointInterval, w.RestartOverhead = sv("0s"), sv("0")
			})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The broker accepts the spec, and it means what config says.
			remote, err := policy.WorkloadFromJSON("spec", "w", "", tc.want.Kind.ValueString(), []byte(tc.spec))
			if err != nil {
				t.Fatalf("the policy refuses the spec, so no broker holds it: %v", err)
			}
			p, diags := tc.config.parsePolicy(types.StringNull())
			if diags.HasError() {
				t.Fatalf("config does not parse: %v", diags)
			}
			remote.Pos, p.Workloads[0].Pos = policy.Pos{}, policy.Pos{}
			if !reflect.DeepEqual(remote, p.Workloads[0]) {
				t.Fatalf("config is not the same workload as the spec:\n%+v\n%+v", remote, p.Workloads[0])
			}
			rec := apiv1.Workload{Name: "w", Kind: tc.want.Kind.ValueString(), Spec: []byte(tc.spec)}
			var m workloadModel
			if err := m.fromRecord(rec, nil); err != nil {
				t.Fatalf("import: %v", err)
			}
			if !reflect.DeepEqual(m.workloadSpec, tc.want) {
				t.Fatalf("import read\n%+v\nwant\n%+v", m.workloadSpec, tc.want)
			}
			if _, diags := m.parsePolicy(types.StringNull()); diags.HasError() {
				t.Fatalf("what import read does not parse: %v", diags)
			}
			prior := tc.config
			if err := m.fromRecord(rec, &prior); err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if !reflect.DeepEqual(m.workloadSpec, tc.config) {
				t.Fatalf("refresh against the configuration shows drift:\n%+v\nwant\n%+v", m.workloadSpec, tc.config)
			}
		})
	}
}
