package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestWorkloadFromJSONRecurring: schedule and load are accepted through the
// API exactly as in a file, and every error points at the line and column
// of the JSON spec where the mistake is.
func TestWorkloadFromJSONRecurring(t *testing.T) {
	good := []struct {
		name, kind, spec string
		check            func(w Workload) bool
	}{
		{"nightly", "training", `{"schedule":"0 2 * * *","gpu":{"models":["H100"],"count":8},"work":{"gpu_hours":64}}`,
			func(w Workload) bool { return w.Schedule == "0 2 * * *" }},
		{"search", "inference", "{\n\t\"gpu\": {\"models\": [\"T4\"]},\n\t\"replicas\": {\"min\": 1, \"max\": 20},\n\t\"load\": {\"replicas_by_hour\": [1,1,1,1,1,1,2,4,8,8,8,8,8,8,8,8,8,6,4,2,2,1,1,1]}\n}",
			func(w Workload) bool {
				return w.Load != nil && len(w.Load.ReplicasByHour) == 24 && w.Load.ReplicasByHour[8] == 8
			}},
		{"rate", "inference", `{"replicas":{"min":1,"max":10,"target_utilization":0.5},"load":{"requests_per_second":[10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,160,170,180,190,200,210,220,230,240],"requests_per_replica":50}}`,
			func(w Workload) bool {
				return w.Load != nil && w.Load.RequestsPerReplica == 50 && len(w.Load.RequestsPerSecond) == 24
			}},
	}
	for _, g := range good {
		w, err := WorkloadFromJSON("workload "+g.name, g.name, "ml", g.kind, []byte(g.spec))
		if err != nil {
			t.Errorf("%s: %v", g.name, err)
			continue
		}
		if !g.check(w) || w.Name != g.name || w.Team != "ml" {
			t.Errorf("%s: workload %+v", g.name, w)
		}
	}

	bad := []struct {
		desc, kind, spec string
		want             []string // each error, "workload x:" prefix left out
	}{
		{"cron syntax at the wrong field", "batch",
			`{"work":{"gpu_hours":1},"schedule":"0 25 * * *"}`,
			[]string{`1:39: schedule: hour "25": want 0 to 23`}},
		{"the docs/api.md example", "batch",
			`{"schedule":"0 25 * * *","work":{"gpu_hours":1}}`,
			[]string{`1:16: schedule: hour "25": want 0 to 23`}},
		{"never runs", "batch",
			"{\n  \"work\": {\"gpu_hours\": 1},\n  \"schedule\": \"0 0 31 2 *\"\n}",
			[]string{`3:20: schedule: schedule "0 0 31 2 *" never runs`}},
		{"schedule on a service", "inference",
			`{"replicas":{"min":1},"schedule":"@daily"}`,
			[]string{"1:34: schedule applies to training and batch jobs"}},
		{"schedule not a string", "batch",
			`{"work":{"gpu_hours":1},"schedule":5}`,
			[]string{"1:36: schedule: want a string, got the number 5"}},
		{"load on a job", "training",
			`{"work":{"gpu_hours":1},"load":{"replicas_by_hour":[1]}}`,
			[]string{"1:32: load applies to inference services only"}},
		{"profile of the wrong length", "inference",
			`{"replicas":{"min":1,"max":4},"load":{"replicas_by_hour":[1,2,3]}}`,
			[]string{"1:58: load.replicas_by_hour has 3 entries; want 24"}},
		{"a replica count that is not a number", "inference",
			"{\"replicas\":{\"min\":1,\"max\":4},\n \"load\":{\"replicas_by_hour\":[1,\"x\",3]}}",
			[]string{`2:32: load.replicas_by_hour[1]: want a whole number, got the string "x"`}},
		{"unknown load key", "inference",
			`{"replicas":{"min":1},"load":{"replicas_per_hour":[1]}}`,
			[]string{`1:30: load: want replicas_by_hour`, `1:31: load: unknown key "replicas_per_hour"`}},
		{"invalid JSON", "batch",
			"{\n  \"work\": {\"gpu_hours\": 1},\n  \"schedule\": \"@daily\",\n}",
			[]string{"4:1: spec is not valid JSON"}},
		{"YAML is not JSON", "batch",
			"work: {gpu_hours: 1}",
			[]string{"1:1: spec is not valid JSON"}},
		{"repeated key", "batch",
			"{\"work\":{\"gpu_hours\":1},\n\"work\":{\"gpu_hours\":2}}",
			[]string{`2:1: workload: key "work" repeated`}},
		{"name inside spec", "batch",
			`{"work":{"gpu_hours":1}, "name":"y"}`,
			[]string{"1:26: spec.name: give name beside spec"}},
	}
	for _, b := range bad {
		_, err := WorkloadFromJSON("workload x", "x", "", b.kind, []byte(b.spec))
		var el ErrorList
		if !errors.As(err, &el) {
			t.Errorf("%s: error %v, want an ErrorList", b.desc, err)
			continue
		}
		got := el.Error()
		for _, w := range b.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: errors\n%s\nlack %q", b.desc, got, w)
			}
		}
		if !strings.HasPrefix(got, "workload x:"+b.want[0]) && !strings.Contains(b.want[0], "not valid JSON") {
			t.Errorf("%s: first error %q, want it at workload x:%s", b.desc, el[0], b.want[0])
		}
		for _, e := range el {
			if e.Pos.File != "workload x" || e.Pos.Line < 1 || e.Pos.Col < 1 {
				t.Errorf("%s: error without a position in the spec: %q", b.desc, e)
			}
		}
	}
}

// TestSummaryRecurring: policy check's summary names scheduled jobs and
// load-profiled services, the same for one written in the file as for one
// registered through the API.
func TestSummaryRecurring(t *testing.T) {
	const file = `workloads:
  - name: nightly
    kind: training
    schedule: "0 2 * * *"
    gpu: {models: [H100], count: 8}
    work: {gpu_hours: 64}
  - name: weekly
    kind: batch
    schedule: "0 6 * * mon"
    work: {gpu_hours: 10}
  - name: search
    kind: inference
    gpu: {models: [T4]}
    replicas: {min: 1, max: 20}
    load:
      replicas_by_hour: [1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6, 4, 2, 2, 1, 1, 1]
  - name: flat
    kind: inference
    replicas: {min: 2}
`
	p, err := Parse("p.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	// The same workloads as the API gets them.
	api := []struct{ name, kind, spec string }{
		{"nightly", "training", `{"schedule":"0 2 * * *","gpu":{"models":["H100"],"count":8},"work":{"gpu_hours":64}}`},
		{"weekly", "batch", `{"schedule":"0 6 * * mon","work":{"gpu_hours":10}}`},
		{"search", "inference", `{"gpu":{"models":["T4"]},"replicas":{"min":1,"max":20},"load":{"replicas_by_hour":[1,1,1,1,1,1,2,4,8,8,8,8,8,8,8,8,8,6,4,2,2,1,1,1]}}`},
		{"flat", "inference", `{"replicas":{"min":2}}`},
	}
	var ws []Workload
	for _, a := range api {
		w, err := WorkloadFromJSON("workload "+a.name, a.name, "", a.kind, []byte(a.spec))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	fromAPI, _ := (&Policy{Clouds: p.Clouds, Regions: p.Regions, Horizon: p.Horizon}).WithWorkloads(ws)

	const want = "4 workloads (1 training, 2 inference, 1 batch), 2 scheduled (nightly 30 runs/month; weekly 4.29 runs/month), " +
		"1 load-profiled (search 101 replica-hours/day, peak 8) on [aws, gcp, azure]; 0 quotas, 0 budgets; planning horizon 30d."
	for _, tt := range []struct {
		name string
		p    *Policy
	}{{"file", p}, {"api", fromAPI}} {
		if got := Summary(tt.p); got != want {
			t.Errorf("%s: Summary =\n%s\nwant\n%s", tt.name, got, want)
		}
	}
}

func TestSummaryNamesAFew(t *testing.T) {
	var ws []Workload
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		ws = append(ws, Workload{Name: n, Kind: Batch, Schedule: "@daily"})
	}
	got := recurring(ws)
	want := "6 scheduled (a 30 runs/month; b 30 runs/month; c 30 runs/month; d 30 runs/month; 2 more)"
	if got != want {
		t.Errorf("recurring = %q, want %q", got, want)
	}
}

// FuzzWorkloadFromJSON: no spec may panic, and every failure is an
// ErrorList of errors positioned inside the spec.
//
//	go test ./policy -run '^$' -fuzz FuzzWorkloadFromJSON -fuzztime 30s
func FuzzWorkloadFromJSON(f *testing.F) {
	for _, s := range []string{
		`{"schedule":"0 2 * * *","gpu":{"models":["H100"],"count":8},"work":{"gpu_hours":64}}`,
		`{"replicas":{"min":1,"max":3},"load":{"requests_per_second":[1,2],"requests_per_replica":0.5}}`,
		"{\n\t\"load\": {\"replicas_by_hour\": [1, \"x\"]}\n}",
		`{"work":{"gpu_hours":1},"schedule":"*/5 1-3 * * mon"}`,
		`{"a":1,"a":2}`, `[]`, `null`, `"x"`, `{"work":{"gpu_hours":1e400}}`,
	} {
		f.Add("batch", []byte(s))
		f.Add("inference", []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind string, spec []byte) {
		// YAML, whose positions these are, ends a line at \n, \r\n or a lone \r.
		lines := 1 + strings.Count(strings.ReplaceAll(string(spec), "\r\n", "\n"), "\n") +
			strings.Count(strings.ReplaceAll(string(spec), "\r\n", ""), "\r")
		_, err := WorkloadFromJSON("w", "w", "", kind, spec)
		if err == nil {
			return
		}
		var el ErrorList
		if !errors.As(err, &el) || len(el) == 0 {
			t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
		}
		for _, e := range el {
			if e.Pos.File != "w" || e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 {
				t.Fatalf("error not positioned in the spec: %q", e)
			}
		}
	})
}
