package sim

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/internal/shareddata"
)

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		gap     int
		avail   []int
		wantErr string // substring; "" = must parse
	}{
		{name: "json", in: `{"metadata": {"gap_seconds": 195}, "data": [0, 1, 2]}`, gap: 195, avail: []int{0, 1, 2}},
		{name: "json data first, extra keys", in: "{\"data\": [1,0],\n \"note\": {\"x\": [1]}, \"metadata\": {\"source\": \"aws\", \"gap_seconds\": 600.0}}", gap: 600, avail: []int{1, 0}},
		{name: "csv with header", in: "seconds,available\n0,1\n60,0\n120,3\n", gap: 60, avail: []int{1, 0, 3}},
		{name: "csv no header, comments", in: "# zone a\n0, 1\n30, 1\n", gap: 30, avail: []int{1, 1}},
		{name: "csv with BOM and CRLF", in: "\ufeff0,1\r\n30,0\r\n", gap: 30, avail: []int{1, 0}},
		{name: "json negative count", in: "{\"metadata\": {\"gap_seconds\": 60},\n \"data\": [1, -1]}", wantErr: "t.json:2:14: data[1] = -1"},
		{name: "json fraction", in: `{"metadata": {"gap_seconds": 60}, "data": [0.5]}`, wantErr: "t.json:1:44: data[0] = 0.5"},
		{name: "json string count", in: `{"metadata": {"gap_seconds": 60}, "data": ["1"]}`, wantErr: "want a count"},
		{name: "json missing gap", in: `{"data": [1]}`, wantErr: `t.json:1:1: missing "metadata"`},
		{name: "json bad gap", in: `{"metadata": {"gap_seconds": 0}, "data": [1]}`, wantErr: "t.json:1:30: gap_seconds 0: want a whole number"},
		{name: "json empty data", in: `{"metadata": {"gap_seconds": 5}, "data": []}`, wantErr: `missing or empty "data"`},
		{name: "json truncated", in: "{\"metadata\": {\"gap_seconds\": 5},\n \"data\": [1, 0", wantErr: "t.json:2:15: unexpected end of file"},
		{name: "json syntax", in: "{\"metadata\": {\"gap_seconds\": 5}, \"data\": [1,, 0]}", wantErr: "t.json:1:45: invalid JSON"},
		{name: "json not object", in: `[1, 2]`, wantErr: "t.json:1:1:"},
		{name: "json data not array", in: `{"metadata": {"gap_seconds": 5}, "data": 3}`, wantErr: `want an array of instance counts for "data"`},
		{name: "csv uneven spacing", in: "0,1\n60,1\n100,0\n", wantErr: "t.json:3:1: row at 100 s; want 120"},
		{name: "csv first not zero", in: "5,1\n10,1\n", wantErr: "t.json:1:1: first row at 5 s; want 0"},
		{name: "csv bad count", in: "0,1\n60,x\n", wantErr: "t.json:2:4: available \"x\""},
		{name: "csv three fields", in: "0,1,2\n", wantErr: "t.json:1:1: 3 fields; want 2"},
		{name: "csv one row", in: "0,1\n", wantErr: "at least 2 rows"},
		{name: "csv bad quote", in: "0,1\n60,\"1\n", wantErr: "t.json:2:"},
		{name: "empty", in: "", wantErr: "at least 2 rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := ParseTrace("t.json", "t", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrTrace) {
					t.Fatalf("err = %v; want ErrTrace containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Gap != tc.gap || len(tr.Avail) != len(tc.avail) {
				t.Fatalf("got gap %d avail %v; want %d %v", tr.Gap, tr.Avail, tc.gap, tc.avail)
			}
			for i := range tc.avail {
				if tr.Avail[i] != tc.avail[i] {
					t.Fatalf("avail %v; want %v", tr.Avail, tc.avail)
				}
			}
		})
	}
}

func TestLoadTraceNameAndMissingFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "us-west-2a_v100_1.json")
	if err := os.WriteFile(p, []byte(`{"metadata":{"gap_seconds":10},"data":[1]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTrace(p)
	if err != nil || tr.Name != "us-west-2a_v100_1" {
		t.Fatalf("LoadTrace = %+v, %v", tr, err)
	}
	if _, err := LoadTrace(filepath.Join(dir, "nope.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v", err)
	}
}

func TestRealTracesParse(t *testing.T) {
	dir := shareddata.Dir(t, "spot-traces", "availability", "1-node")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces under %s: %v", dir, err)
	}
	for _, f := range files {
		tr, err := LoadTrace(f)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Gap <= 0 || len(tr.Avail) < 1000 {
			t.Errorf("%s: gap %d, %d ticks", f, tr.Gap, len(tr.Avail))
		}
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(`{"metadata": {"gap_seconds": 195}, "data": [0, 1, 2]}`))
	f.Add([]byte(`{"data": [1,0], "metadata": {"gap_seconds": 600.0}}`))
	f.Add([]byte("seconds,available\n0,1\n60,0\n"))
	f.Add([]byte("0,1\n60,\"1\n"))
	f.Add([]byte(`{"metadata": {"gap_seconds": 1e309}, "data": [1e400]}`))
	f.Add([]byte("{\"metadata\":{\"gap_seconds\":5},\"data\":[1,"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTrace("f", "f", b)
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("error not ErrTrace: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "bad trace: f:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if tr.Gap < 1 || len(tr.Avail) == 0 {
			t.Fatalf("accepted a trace without tick or data: %+v", tr)
		}
		for _, a := range tr.Avail {
			if a < 0 {
				t.Fatalf("negative availability accepted")
			}
		}
		// Replayed beside a trace of another tick: one is resampled,
		// and only to capacities it had.
		other := &Trace{Name: "o", Gap: 7, Avail: []int{3, 0, 1, 2, 0, 5, 4, 1, 0, 2}}
		p, err := NewPools([]*Trace{tr, other})
		if err != nil {
			if !errors.Is(err, ErrSetting) {
				t.Fatalf("error not ErrSetting: %v", err)
			}
			return
		}
		if p.Gap != min(tr.Gap, 7) || p.Len < 1 || p.Len*p.Gap > min(len(tr.Avail)*tr.Gap, 70) {
			t.Fatalf("pools of gap %d and %d ticks from ticks of %d and 7 s", p.Gap, p.Len, tr.Gap)
		}
		for k, q := range p.Traces {
			src := []*Trace{tr, other}[k]
			for _, a := range q.Avail[:p.Len] {
				if !slices.Contains(src.Avail, a) {
					t.Fatalf("resampled capacity %d not in the trace", a)
				}
			}
		}
	})
}
