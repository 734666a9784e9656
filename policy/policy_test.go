package policy

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\ninput:\n%s", err, src)
	}
	return p
}

func TestPolicyDefaults(t *testing.T) {
	p := mustParse(t, "workloads:\n  - {name: a, kind: training, work: {gpu_hours: 1}}\n")
	if !reflect.DeepEqual(p.Clouds, []pricing.Cloud{pricing.AWS, pricing.GCP, pricing.Azure}) {
		t.Errorf("Clouds = %v", p.Clouds)
	}
	if !reflect.DeepEqual(p.Regions, []string{"*"}) {
		t.Errorf("Regions = %v", p.Regions)
	}
	if p.Horizon != 720*time.Hour || p.Residency != nil || p.SpotDefaults != nil {
		t.Errorf("Horizon %v, Residency %v, SpotDefaults %v", p.Horizon, p.Residency, p.SpotDefaults)
	}
}

func TestWorkloadDefaults(t *testing.T) {
	tests := []struct {
		name, src string
		want      func(w *Workload) Workload
	}{
		{"training", "{name: a, kind: training, work: {gpu_hours: 100}}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Training, GPU: GPUNeed{Count: 1}, WorkGPUHours: 100,
				ReferenceGPU: pricing.A100_80, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer, Pos: w.Pos}
		}},
		{"one model is the reference", "{name: a, kind: batch, gpu: {models: [t4]}, work: {gpu_hours: 5}}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Batch, GPU: GPUNeed{Models: []pricing.GPUModel{pricing.T4}, Count: 1}, WorkGPUHours: 5,
				ReferenceGPU: pricing.T4, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer, Pos: w.Pos}
		}},
		{"two models: A100-80GB reference", "{name: a, kind: batch, gpu: {models: [T4, L4]}, work: {gpu_hours: 5}}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Batch, GPU: GPUNeed{Models: []pricing.GPUModel{pricing.T4, pricing.L4}, Count: 1}, WorkGPUHours: 5,
				ReferenceGPU: pricing.A100_80, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer, Pos: w.Pos}
		}},
		{"explicit zeros kept", "{name: a, kind: training, work: {gpu_hours: 1}, restart_overhead: 0, checkpoint_interval: 0s, spot: never}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Training, GPU: GPUNeed{Count: 1}, WorkGPUHours: 1,
				ReferenceGPU: pricing.A100_80, Spot: SpotNever, Pos: w.Pos}
		}},
		{"explicit zeros with a unit kept", "{name: a, kind: training, work: {gpu_hours: 1}, restart_overhead: 0m, checkpoint_interval: 0h, spot: never}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Training, GPU: GPUNeed{Count: 1}, WorkGPUHours: 1,
				ReferenceGPU: pricing.A100_80, Spot: SpotNever, Pos: w.Pos}
		}},
		{"inference", "{name: s, kind: inference, replicas: {min: 3}}", func(w *Workload) Workload {
			return Workload{Name: "s", Kind: Inference, GPU: GPUNeed{Count: 1}, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer,
				Replicas: Replicas{Min: 3, Max: 3, TargetUtilization: 0.7}, Spread: Spread{MinZones: 1, MinClouds: 1},
				Availability: Availability{Goal: 0.99, Window: 30 * 24 * time.Hour}, Pos: w.Pos}
		}},
		{"inference with an availability goal", "{name: s, kind: inference, replicas: {min: 4}, availability: {goal: 0.995, window: 7d}}", func(w *Workload) Workload {
			return Workload{Name: "s", Kind: Inference, GPU: GPUNeed{Count: 1}, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer,
				Replicas: Replicas{Min: 4, Max: 4, TargetUtilization: 0.7}, Spread: Spread{MinZones: 1, MinClouds: 1},
				Availability: Availability{Goal: 0.995, Window: 7 * 24 * time.Hour}, Pos: w.Pos}
		}},
		{"inference written out", "{name: s, kind: inference, team: t, gpu: {models: any, count: 2, min_memory_gib: 20.5}, replicas: {min: 2, max: 9, target_utilization: 1}, spread: {min_zones: 2, min_clouds: 2}, placement: {clouds: [AWS, gcp], zones: ['us-*']}}", func(w *Workload) Workload {
			return Workload{Name: "s", Team: "t", Kind: Inference, GPU: GPUNeed{Count: 2, MinMemoryGiB: 20.5}, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer,
				Replicas: Replicas{Min: 2, Max: 9, TargetUtilization: 1}, Spread: Spread{MinZones: 2, MinClouds: 2},
				Availability: Availability{Goal: 0.99, Window: 30 * 24 * time.Hour},
				Limits:       Limits{Clouds: []pricing.Cloud{pricing.AWS, pricing.GCP}, Zones: []string{"us-*"}}, Pos: w.Pos}
		}},
		{"multi-node job with interconnect and its own scaling", "{name: a, kind: training, gpu: {models: [H100], count: 64, interconnect: required}, work: {gpu_hours: 6400}, scaling: {inter_node: 0.8}}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Training, GPU: GPUNeed{Models: []pricing.GPUModel{pricing.H100}, Count: 64, Interconnect: InterconnectRequired}, WorkGPUHours: 6400,
				ReferenceGPU: pricing.H100, RestartOverhead: 10 * time.Minute, Spot: SpotPrefer, Scaling: Scaling{0.95, 0.8}, Pos: w.Pos}
		}},
		{"durations", "{name: a, kind: training, work: {gpu_hours: 1, reference_gpu: H100}, deadline: 1d12h, checkpoint_interval: 90m, restart_overhead: 2m30s}", func(w *Workload) Workload {
			return Workload{Name: "a", Kind: Training, GPU: GPUNeed{Count: 1}, WorkGPUHours: 1, ReferenceGPU: pricing.H100,
				Deadline: 36 * time.Hour, CheckpointInterval: 90 * time.Minute, RestartOverhead: 150 * time.Second, Spot: SpotPrefer, Pos: w.Pos}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, "workloads:\n  - "+tt.src+"\n")
			w := &p.Workloads[0]
			want := tt.want(w)
			if want.GPU.Interconnect == "" {
				want.GPU.Interconnect = InterconnectAny
			}
			if want.Scaling == (Scaling{}) {
				want.Scaling = Scaling{DefaultIntraNodeScaling, DefaultInterNodeScaling}
			}
			if !reflect.DeepEqual(*w, want) {
				t.Errorf("got  %+v\nwant %+v", *w, want)
			}
			if w.Pos != (Pos{"p.yaml", 2, 5}) {
				t.Errorf("Pos = %v", w.Pos)
			}
		})
	}
}

func TestBudgetDefaults(t *testing.T) {
	p := mustParse(t, `workloads:
  - {name: a, team: t, kind: training, work: {gpu_hours: 1}}
budgets:
  - {team: t, monthly_usd: 10}
  - {workload: a, monthly_usd: 5}
  - {monthly_usd: 100}
  - {name: mine, team: t, monthly_usd: 1}
`)
	var got []string
	for _, b := range p.Budgets {
		got = append(got, b.Name)
	}
	if want := []string{"team:t", "workload:a", "all", "mine"}; !reflect.DeepEqual(got, want) {
		t.Errorf("budget names = %q, want %q", got, want)
	}
	w := &p.Workloads[0]
	for _, b := range p.Budgets {
		if !b.Covers(w) {
			t.Errorf("budget %s does not cover workload a", b.Name)
		}
	}
	if (&Budget{Team: "other"}).Covers(w) || (&Budget{Workload: "b"}).Covers(w) {
		t.Error("budget for another team or workload covers a")
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"72h", 72 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"3d", 72 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"1.5d", 36 * time.Hour, ""},
		{"2d30m", 48*time.Hour + 30*time.Minute, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"", 0, "empty duration"},
		{"72", 0, `duration "72" has no unit; write e.g. 72h or 72m`},
		{"1.5", 0, "has no unit"},
		{"-1h", 0, `duration "-1h" is negative`},
		{"+1h", 0, "must not have a sign"},
		{"3w", 0, `unknown unit "w"`},
		{"d", 0, "invalid duration"},
		{"h1", 0, "invalid duration"},
		{"1..2h", 0, "invalid duration"},
		{"1.2.3d", 0, "invalid duration"},
		{"200000000d", 0, "too long"},
		{"106751d106751d", 0, "too long"},
		{"9999999999999h", 0, "invalid duration"},
		{"1 h", 0, `unknown unit " h"`},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ParseDuration(%q): %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.err)
		case tt.err == "" && got != tt.want:
			t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		72 * time.Hour:   "3d",
		36 * time.Hour:   "36h",
		90 * time.Minute: "1h30m",
		30 * time.Minute: "30m",
		10 * time.Second: "10s",
		0:                "0s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if d > 0 {
			if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
				t.Errorf("round trip %v: %v, %v", d, back, err)
			}
		}
	}
}

func TestInGeography(t *testing.T) {
	tests := []struct {
		cloud  pricing.Cloud
		region string
		want   []string
	}{
		{pricing.AWS, "us-east-1", []string{"us"}},
		{pricing.AWS, "us-west-2", []string{"us"}},
		{pricing.GCP, "us-central1", []string{"us"}},
		{pricing.Azure, "eastus", []string{"us"}},
		{pricing.Azure, "southcentralus", []string{"us"}},
		{pricing.AWS, "eu-west-1", []string{"eu", "europe"}},
		{pricing.AWS, "eu-central-1", []string{"eu", "europe"}},
		{pricing.AWS, "eu-west-2", []string{"europe", "uk"}},    // London
		{pricing.AWS, "eu-central-2", []string{"europe"}},       // Zurich
		{pricing.GCP, "europe-west4", []string{"eu", "europe"}}, // Netherlands
		{pricing.GCP, "europe-west2", []string{"europe", "uk"}},
		{pricing.GCP, "europe-west6", []string{"europe"}},
		{pricing.Azure, "westeurope", []string{"eu", "europe"}},
		{pricing.Azure, "uksouth", []string{"europe", "uk"}},
		{pricing.AWS, "ap-northeast-1", []string{"apac", "jp"}},
		{pricing.GCP, "asia-northeast1", []string{"apac", "jp"}},
		{pricing.Azure, "japaneast", []string{"apac", "jp"}},
		{pricing.AWS, "ap-southeast-2", []string{"apac"}},
		{pricing.AWS, "ca-central-1", []string{"ca"}},
		{pricing.GCP, "northamerica-northeast1", []string{"ca"}},
		{pricing.AWS, "sa-east-1", nil},
		{pricing.Azure, "brandnewregion", nil},
		{pricing.GCP, "eastus", nil}, // an Azure name on another cloud
	}
	for _, tt := range tests {
		if got := GeographiesOf(tt.cloud, tt.region); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("GeographiesOf(%s, %s) = %q, want %q", tt.cloud, tt.region, got, tt.want)
		}
	}
}

// TestResidencyCoversSnapshot makes sure every region in the embedded price
// snapshot is in some geography: a region missing from the table would be
// silently excluded by every residency limit.
func TestResidencyCoversSnapshot(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range cat.Offers() {
		k := string(o.Cloud) + "/" + o.Region
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(GeographiesOf(o.Cloud, o.Region)) == 0 {
			t.Errorf("region %s is in no geography", k)
		}
	}
	if len(seen) < 5 {
		t.Fatalf("only %d regions in the snapshot", len(seen))
	}
}

func TestRegionAllowed(t *testing.T) {
	p := &Policy{
		Clouds:    []pricing.Cloud{pricing.AWS, pricing.GCP},
		Regions:   []string{"us-*", "europe-*", "eu-*"},
		Residency: []string{"us", "eu"},
	}
	anywhere := &Workload{}
	usOnly := &Workload{Limits: Limits{Residency: []string{"us"}}}
	awsEast := &Workload{Limits: Limits{Clouds: []pricing.Cloud{pricing.AWS}, Regions: []string{"us-east-*"}}}
	zoned := &Workload{Limits: Limits{Zones: []string{"use1-az[14]", "us-central1-a"}}}
	tests := []struct {
		name   string
		w      *Workload
		cloud  pricing.Cloud
		region string
		zone   string
		want   bool
	}{
		{"policy only", nil, pricing.AWS, "us-east-1", "use1-az1", true},
		{"cloud not in policy", nil, pricing.Azure, "eastus", "", false},
		{"region glob misses", nil, pricing.AWS, "ap-northeast-1", "", false},
		{"residency excludes London", nil, pricing.AWS, "eu-west-2", "", false},
		{"residency admits Ireland", nil, pricing.AWS, "eu-west-1", "", true},
		{"GCP Netherlands", anywhere, pricing.GCP, "europe-west4", "europe-west4-a", true},
		{"GCP Zurich outside eu", anywhere, pricing.GCP, "europe-west6", "", false},
		{"workload residency", usOnly, pricing.GCP, "europe-west4", "", false},
		{"workload residency us", usOnly, pricing.GCP, "us-central1", "", true},
		{"workload cloud", awsEast, pricing.GCP, "us-east1", "", false},
		{"workload region", awsEast, pricing.AWS, "us-west-2", "", false},
		{"workload cloud and region", awsEast, pricing.AWS, "us-east-1", "use1-az2", true},
		{"zone glob", zoned, pricing.AWS, "us-east-1", "use1-az4", true},
		{"zone glob misses", zoned, pricing.AWS, "us-east-1", "use1-az2", false},
		{"regional offer under a zone limit", zoned, pricing.GCP, "us-central1", "", false},
	}
	for _, tt := range tests {
		if got := RegionAllowed(p, tt.w, tt.cloud, tt.region, tt.zone); got != tt.want {
			t.Errorf("%s: RegionAllowed(%s, %s, %s) = %v, want %v", tt.name, tt.cloud, tt.region, tt.zone, got, tt.want)
		}
	}
	// An empty policy admits everything.
	if !RegionAllowed(&Policy{}, nil, pricing.Azure, "anywhere", "") {
		t.Error("empty policy refused a region")
	}
	if got := AllowedClouds(p, awsEast); !reflect.DeepEqual(got, []pricing.Cloud{pricing.AWS}) {
		t.Errorf("AllowedClouds = %v", got)
	}
}

func TestAllowsGPU(t *testing.T) {
	anyBig := &Workload{GPU: GPUNeed{MinMemoryGiB: 40}}
	listed := &Workload{GPU: GPUNeed{Models: []pricing.GPUModel{pricing.T4, pricing.L4}}}
	tests := []struct {
		w    *Workload
		m    pricing.GPUModel
		mem  float64
		want bool
	}{
		{anyBig, pricing.A100_80, 80, true},
		{anyBig, pricing.A100_40, 40, true},
		{anyBig, pricing.L4, 24, false},
		{listed, pricing.T4, 16, true},
		{listed, pricing.A100_80, 80, false},
	}
	for _, tt := range tests {
		if got := tt.w.AllowsGPU(tt.m, tt.mem); got != tt.want {
			t.Errorf("%+v AllowsGPU(%s, %v) = %v", tt.w.GPU, tt.m, tt.mem, got)
		}
	}
}

func TestQuotaMatches(t *testing.T) {
	q := &Quota{Cloud: pricing.AWS, Region: "us-*", Family: "A100"}
	for _, tt := range []struct {
		cloud  pricing.Cloud
		region string
		m      pricing.GPUModel
		want   bool
	}{
		{pricing.AWS, "us-east-1", pricing.A100_40, true},
		{pricing.AWS, "us-east-1", pricing.A100_80, true},
		{pricing.AWS, "us-east-1", pricing.H100, false},
		{pricing.AWS, "eu-west-1", pricing.A100_80, false},
		{pricing.GCP, "us-east1", pricing.A100_80, false},
	} {
		if got := q.Matches(tt.cloud, tt.region, tt.m); got != tt.want {
			t.Errorf("Matches(%s, %s, %s) = %v", tt.cloud, tt.region, tt.m, got)
		}
	}
	if !(&Quota{MaxGPUs: 1}).Matches(pricing.Azure, "eastus", pricing.T4) {
		t.Error("empty quota does not match everything")
	}
}

// TestSetDefaultsAfterParse: SetDefaults on a parsed policy keeps the zeros
// the file wrote. The optimizer's fixture tests called it after Load and
// planned a fleet with the default restart overhead in place of a written
// 0 (differential seed 7112, whose "proof" then did not show).
func TestSetDefaultsAfterParse(t *testing.T) {
	p, err := Parse("zero.yaml", []byte("version: 1\nworkloads:\n  - {name: a, kind: training, work: {gpu_hours: 1}, restart_overhead: 0m, spot: never}\n  - {name: b, kind: training, work: {gpu_hours: 1}, spot: never}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetDefaults()
	if got := p.Workloads[0].RestartOverhead; got != 0 {
		t.Errorf("written restart_overhead 0m became %v", got)
	}
	if got := p.Workloads[1].RestartOverhead; got != DefaultRestartOverhead {
		t.Errorf("unwritten restart_overhead is %v, want the default %v", got, DefaultRestartOverhead)
	}
}

// TestValidateInCode checks policies built in code, the way the optimizer's
// tests build them: SetDefaults then Validate.
func TestValidateInCode(t *testing.T) {
	p := &Policy{Workloads: []Workload{
		{Name: "train", Kind: Training, WorkGPUHours: 100, Deadline: 48 * time.Hour},
		{Name: "serve", Kind: Inference, Replicas: Replicas{Min: 2}},
	}}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if p.Workloads[1].Replicas.Max != 2 || p.Workloads[0].RestartOverhead != DefaultRestartOverhead {
		t.Errorf("defaults not applied: %+v", p.Workloads)
	}

	bad := &Policy{Workloads: []Workload{
		{Name: "train", Kind: Training, WorkGPUHours: 100, Deadline: time.Hour, CheckpointInterval: 2 * time.Hour},
		{Name: "serve", Kind: Inference},
	}, Budgets: []Budget{{Workload: "nope", MonthlyUSD: 1}}}
	bad.SetDefaults()
	err := bad.Validate()
	want := []string{
		`workload "train": checkpoint_interval 2h is longer than the deadline 1h; checkpoint more often than the job may run`,
		`workload "serve": inference service needs replicas: {min: N, max: M}, with min at least 1`,
		`budget "workload:nope": budget names unknown workload "nope"`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("Validate =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestSummary(t *testing.T) {
	p, err := Load("../examples/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := Summary(p)
	want := "3 workloads (1 training, 1 inference, 1 batch) on [aws, gcp, azure]; 3 quotas, 3 budgets; planning horizon 30d."
	if got != want {
		t.Errorf("Summary =\n%s\nwant\n%s", got, want)
	}
}

func TestSuggest(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"gpc", "gcp"}, {"awz", "aws"}, {"azur", "azure"}, {"oracle", ""}, {"x", ""},
	} {
		if got := suggest(tt.in, cloudNames()); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSpotSignalDefaults(t *testing.T) {
	p := mustParse(t, "spot_defaults: {aws: 0.1}\nworkloads:\n  - {name: a, kind: batch, work: {gpu_hours: 1}}\n")
	d := p.SpotSignalDefaults()
	if got := d[pricing.AWS]; got.InterruptionsPerHour != 0.1 || !got.Default {
		t.Errorf("aws = %+v, want the policy's 0.1", got)
	}
	if got, want := d[pricing.GCP], pricing.DefaultSpotDefaults()[pricing.GCP]; got != want {
		t.Errorf("gcp = %+v, want the built-in %+v", got, want)
	}
}

// TestRegionAllowedAllocs holds RegionAllowed to its promise of no
// allocation: the optimizer calls it for every workload × offer pair.
func TestRegionAllowedAllocs(t *testing.T) {
	p, err := Load("../examples/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workload("llm-finetune")
	n := testing.AllocsPerRun(100, func() {
		RegionAllowed(p, w, pricing.GCP, "us-central1", "us-central1-a")
		RegionAllowed(p, w, pricing.Azure, "westeurope", "")
	})
	if n != 0 {
		t.Errorf("RegionAllowed allocates %v times per call pair", n)
	}
}

func BenchmarkRegionAllowed(b *testing.B) {
	p, err := Load("../examples/fleet.yaml")
	if err != nil {
		b.Fatal(err)
	}
	w := p.Workload("llm-finetune")
	for b.Loop() {
		RegionAllowed(p, w, pricing.GCP, "us-central1", "us-central1-a")
	}
}

func BenchmarkParseFleet(b *testing.B) {
	data, err := os.ReadFile("../examples/fleet.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("fleet.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
