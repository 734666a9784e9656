package policy

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.bad.yaml.errors from the current output")

// goodFiles are the policies that must parse: the test corpus and every
// shipped example.
func goodFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"testdata/*.good.yaml", "../examples/*.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %d good policy files", len(files))
	}
	return files
}

func TestGoodFiles(t *testing.T) {
	for _, f := range goodFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("parsed policy does not validate: %v", err)
			}
			if p.File != f {
				t.Errorf("File = %q, want %q", p.File, f)
			}
			for _, w := range p.Workloads {
				if w.Pos.Line == 0 || w.Pos.File != f {
					t.Errorf("workload %s has no position: %+v", w.Name, w.Pos)
				}
			}
		})
	}
}

// TestBadFiles compares every error of each testdata/*.bad.yaml with its
// golden testdata/*.bad.yaml.errors (regenerate with -update, then review
// the diff).
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load = %v, want an ErrorList", err)
			}
			got := err.Error() + "\n"
			golden := f + ".errors"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			for i := 1; i < len(list); i++ {
				a, b := list[i-1].Pos, list[i].Pos
				if a.Line > b.Line || (a.Line == b.Line && a.Col > b.Col) {
					t.Errorf("errors not sorted: %v before %v", a, b)
				}
			}
			for _, e := range list {
				if e.Pos.File != f || e.Pos.Line < 1 || e.Pos.Col < 1 {
					t.Errorf("error without a full position: %q", e.Error())
				}
			}
		})
	}
}

// wrap puts a workload snippet into an otherwise valid policy.
func wrap(workload string) string {
	return "workloads:\n  - name: w\n" + indent(workload, "    ")
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestErrors is one case per rule, Prometheus style: a small policy and the
// exact errors it must produce.
func TestErrors(t *testing.T) {
	const train = "kind: training\nwork: {gpu_hours: 10}\n"
	const serve = "kind: inference\nreplicas: {min: 2, max: 4}\n"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown GPU", wrap(train + "gpu: {models: [A100-80]}"),
			[]string{`p.yaml:5:20: unknown GPU "A100-80"; did you mean "A100-80GB"?`}},
		{"unknown GPU scalar", wrap(train + "gpu: {models: H1000}"),
			[]string{`p.yaml:5:19: unknown GPU "H1000"; did you mean "H100"?`}},
		{"unknown GPU far off", wrap(train + "gpu: {models: [tpu-v5]}"),
			[]string{`p.yaml:5:20: unknown GPU "tpu-v5"; known GPUs: T4, L4, A10G, A10, L40S, P4, P100, V100, V100-32GB, A100-40GB, A100-80GB, H100, H200, B200, B300, GB200, MI300X, RTX-PRO-6000`}},
		{"unknown key", wrap(train + "deadlne: 3d"),
			[]string{`p.yaml:5:5: workload: unknown key "deadlne"; did you mean "deadline"?`}},
		{"unknown top key", "workload:\n  - name: w\n",
			[]string{`p.yaml:1:1: policy: unknown key "workload"; did you mean "workloads"?`,
				`p.yaml:1:1: no workloads; a policy needs at least one under workloads:`}},
		{"wrong type", wrap(train + "gpu: {count: eight}"),
			[]string{`p.yaml:5:18: gpu.count: want a whole number, got the string "eight"`}},
		{"unknown cloud", "clouds: [aws, gpc]\n" + wrap(train),
			[]string{`p.yaml:1:15: unknown cloud "gpc"; want aws, gcp or azure; did you mean "gcp"?`}},
		{"bad glob", wrap(train + "placement: {regions: [\"us-[east\"]}"),
			[]string{`p.yaml:5:27: bad pattern "us-[east": syntax error in pattern; patterns use *, ? and [a-z] as in path.Match`}},
		{"count below 1", wrap(train + "gpu: {count: 0}"),
			[]string{`p.yaml:5:18: gpu.count 0: want 1 to 16384 GPUs for the whole job (it may span several identical instances)`}},
		{"replica above 16 GPUs", wrap("kind: inference\nreplicas: {min: 1}\ngpu: {count: 32}"),
			[]string{`p.yaml:5:18: gpu.count 32: want 1 to 16 GPUs per replica (one instance)`}},
		{"bad interconnect", wrap(train + "gpu: {count: 64, interconnect: infiniband}"),
			[]string{`p.yaml:5:36: gpu.interconnect "infiniband": want any or required`}},
		{"bad scaling", "scaling: {intra_node: 1.5}\n" + wrap(train+"scaling: {inter_node: 0}"),
			[]string{`p.yaml:1:23: scaling.intra_node 1.5: want the share of linear speed-up kept per doubling, in (0, 1], e.g. 0.9`,
				`p.yaml:6:27: scaling.inter_node 0: want the share of linear speed-up kept per doubling, in (0, 1], e.g. 0.9`}},
		{"min above max replicas", wrap("kind: inference\nreplicas: {min: 5, max: 3}"),
			[]string{`p.yaml:4:29: replicas.max 3 is less than replicas.min 5`}},
		{"negative hours", wrap("kind: batch\nwork: {gpu_hours: -5}"),
			[]string{`p.yaml:4:23: work.gpu_hours -5: want a positive number of GPU-hours`}},
		{"zero deadline", wrap(train + "deadline: 0h"),
			[]string{`p.yaml:5:15: deadline: want a positive duration, or leave it out`}},
		{"negative deadline", wrap(train + "deadline: -2h"),
			[]string{`p.yaml:5:15: deadline: duration "-2h" is negative; want a length of time such as 2h`}},
		{"checkpoint longer than deadline", wrap(train + "deadline: 1d\ncheckpoint_interval: 2d"),
			[]string{`p.yaml:6:26: checkpoint_interval 2d is longer than the deadline 1d; checkpoint more often than the job may run`}},
		{"utilization zero", wrap(serve + "replicas: {min: 1, target_utilization: 0}"),
			[]string{`p.yaml:5:5: workload: key "replicas" repeated (first at line 4)`}},
		{"utilization out of range", wrap("kind: inference\nreplicas: {min: 1, target_utilization: 0}"),
			[]string{`p.yaml:4:44: replicas.target_utilization 0: want a fraction above 0 and at most 1, e.g. 0.7`}},
		{"utilization above 1", wrap("kind: inference\nreplicas: {min: 1, target_utilization: 1.01}"),
			[]string{`p.yaml:4:44: replicas.target_utilization 1.01: want a fraction above 0 and at most 1, e.g. 0.7`}},
		{"duplicate names", "workloads:\n  - {name: a, kind: batch, work: {gpu_hours: 1}}\n  - {name: a, kind: batch, work: {gpu_hours: 1}}\n",
			[]string{`p.yaml:3:12: duplicate workload name "a" (first defined at p.yaml:2:12)`}},
		{"budget for unknown workload", wrap(train) + "budgets:\n  - {workload: v, monthly_usd: 10}\n",
			[]string{`p.yaml:6:16: budget names unknown workload "v"; did you mean "w"?`}},
		{"quota max_gpus", wrap(train) + "quotas:\n  - {cloud: aws, max_gpus: -1}\n",
			[]string{`p.yaml:6:28: max_gpus -1: want at least 1 (remove the cloud, region or family from the policy to forbid it)`}},
		{"inference without replicas", wrap("kind: inference"),
			[]string{`p.yaml:2:5: inference service needs replicas: {min: N, max: M}, with min at least 1`}},
		{"training without work", wrap("kind: training"),
			[]string{`p.yaml:2:5: training workload needs work: {gpu_hours: N} (GPU-hours on the reference GPU)`}},
		{"batch without work", wrap("kind: batch\nwork: {reference_gpu: T4}"),
			[]string{`p.yaml:4:11: batch workload needs work: {gpu_hours: N} (GPU-hours on the reference GPU)`}},
		{"no kind", wrap("work: {gpu_hours: 1}"),
			[]string{`p.yaml:2:5: workload has no kind; add kind: training, inference or batch`}},
		{"no name", "workloads:\n  - kind: batch\n    work: {gpu_hours: 1}\n",
			[]string{`p.yaml:2:5: workload has no name; add name: (lower-case letters, digits, '-')`}},
		{"memory nobody has", wrap(train + "gpu: {min_memory_gib: 300}"),
			[]string{`p.yaml:5:27: gpu.min_memory_gib 300: no GPU has that much memory; the largest is B300 with 288 GiB`}},
		{"unknown residency", "residency: [eu, mars]\n" + wrap(train),
			[]string{`p.yaml:1:17: unknown residency "mars"; want one of africa, apac, ca, eu, europe, jp, me, uk, us`}},
		{"spread beyond replicas", wrap(serve + "spread: {min_zones: 3}"),
			[]string{`p.yaml:5:25: spread.min_zones 3 needs at least 3 replicas, but replicas.min is 2`}},
		{"spread beyond clouds", "clouds: [aws]\n" + wrap(serve+"spread: {min_clouds: 2}"),
			[]string{`p.yaml:6:26: spread.min_clouds 2, but only 1 cloud(s) are allowed: [aws]`}},
		{"numeric name", "workloads:\n  - {name: 007, kind: batch, work: {gpu_hours: 1}}\n",
			[]string{`p.yaml:2:12: name: want a string, got the number 007 (quote it if you mean the text: "007")`}},
		{"kind typo", wrap("kind: trainng\nwork: {gpu_hours: 1}"),
			[]string{`p.yaml:3:11: unknown kind "trainng"; want training, inference or batch; did you mean "training"?`}},
		{"spot policy", wrap(train + "spot: always"),
			[]string{`p.yaml:5:11: unknown spot policy "always"; want never, prefer or only`}},
		{"duration without unit", wrap(train + "deadline: 72"),
			[]string{`p.yaml:5:15: deadline: duration "72" has no unit; write e.g. 72h or 72m`}},
		{"version", "version: 3\n" + wrap(train),
			[]string{`p.yaml:1:10: unsupported policy version 3; this gpubroker reads version 1`}},
		{"team and workload budget", wrap(train+"team: t") + "budgets:\n  - {team: t, workload: w, monthly_usd: 5}\n",
			[]string{`p.yaml:7:25: a budget covers a team or a workload, not both; split it in two`}},
		{"quota family", wrap(train) + "quotas:\n  - {family: H10, max_gpus: 8}\n",
			[]string{`p.yaml:6:14: unknown GPU family "H10"; want one of T4, L4, A10, L40S, P4, P100, V100, A100, H100, H200, B200, B300, GB200, MI300X, RTX-PRO-6000; did you mean "H100"?`}},
		{"not a mapping", "- a\n- b\n",
			[]string{`p.yaml:1:1: policy: want a mapping (key: value lines), got a list`}},
		{"syntax", "workloads:\n  - name: a\n    kind: batch\n   work: {gpu_hours: 1}\n",
			[]string{`p.yaml:4:4: invalid YAML: did not find expected '-' indicator`}},
		{"unknown alias", "workloads: *w\n",
			[]string{`p.yaml:1:1: invalid YAML: unknown anchor 'w' referenced`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v\nwant errors %q", p, tt.want)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T %v is not an ErrorList", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s\ninput:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"), tt.yaml)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load = %v, want ErrNotExist", err)
	}
	var list ErrorList
	if errors.As(err, &list) {
		t.Errorf("a missing file is not a policy error: %v", err)
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("big.yaml", make([]byte, MaxFileSize+1))
	if err == nil || !strings.Contains(err.Error(), "big.yaml:1:1: policy file is larger than") {
		t.Fatalf("Parse = %v", err)
	}
}

func TestSpotPolicyParsed(t *testing.T) {
	p, err := Load("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range p.Workloads {
		got[w.Name] = w.SpotDecider
	}
	if got["llm-finetune"] != "uniform-progress" {
		t.Errorf("spot_policy of the training job = %q, want uniform-progress (all: %v)", got["llm-finetune"], got)
	}
	if got["chat-serving"] != "" {
		t.Errorf("a workload without spot_policy has %q, want the default (empty)", got["chat-serving"])
	}
}
