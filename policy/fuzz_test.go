package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. No input may panic; every
// failure must be an ErrorList of positioned errors; every success must be a
// policy that validates and whose workloads all have positions.
//
//	go test ./policy -run '^$' -fuzz FuzzParse -fuzztime 30s
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	ex, _ := filepath.Glob("../examples/*.yaml")
	for _, s := range append(seeds, ex...) {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("workloads: [{name: a, kind: inference, replicas: {min: 1}}]"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("workloads:\n  - &w {name: a, kind: batch, work: {gpu_hours: 1}}\n  - *w\n"))
	f.Add([]byte("workloads:\n  - {name: a, kind: training, work: {gpu_hours: 1}, deadline: 1d, checkpoint_interval: 2d}\n"))
	f.Add([]byte("workloads:\n  - {name: a, kind: batch, schedule: \"*/5 1-3 * * mon\", work: {gpu_hours: 1}}\n"))
	f.Add([]byte("workloads:\n  - {name: a, kind: batch, schedule: '0 0 31 2 *', work: {gpu_hours: 1}}\n"))
	f.Add([]byte("workloads:\n  - {name: s, kind: inference, replicas: {min: 1, max: 3}, load: {requests_per_second: [1, 2], requests_per_replica: 0.5}}\n"))
	f.Add([]byte("spot_capacity: {default_gpus_per_pool: 8, pools: {aws/*/H100: 0, x: 1}}\nworkloads: [{name: a, kind: batch, work: {gpu_hours: 1}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("f.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Pos.File != "f.yaml" || e.Pos.Line < 1 || e.Pos.Col < 1 {
					t.Fatalf("error without a position: %q", e.Error())
				}
				if strings.TrimSpace(e.Msg) == "" {
					t.Fatal("empty error message")
				}
			}
			return
		}
		if p == nil {
			t.Fatal("nil policy without an error")
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed policy does not validate: %v\ninput:\n%s", err, data)
		}
		for _, w := range p.Workloads {
			if w.Pos.Line < 1 {
				t.Fatalf("workload %q without a position", w.Name)
			}
		}
		_ = Summary(p)
	})
}

// FuzzParseDuration: no input panics, and every accepted duration survives a
// round trip through FormatDuration.
//
//	go test ./policy -run '^$' -fuzz FuzzParseDuration -fuzztime 20s
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"72h", "90m", "3d", "1d12h", "1.5d", "0", "-1h", "1e3h", "106751d", "2562047h47m16.854775807s", ".5d", "1µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, d, FormatDuration(d), back, err)
		}
	})
}
