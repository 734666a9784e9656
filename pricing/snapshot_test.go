package pricing

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEmbeddedSnapshot(t *testing.T) {
	s, err := EmbeddedSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Offers) < 800 {
		t.Fatalf("embedded snapshot has %d offers", len(s.Offers))
	}
	if len(s.Provenance) == 0 || !strings.Contains(strings.Join(s.Provenance, " "), "skypilot-catalog") {
		t.Errorf("provenance missing: %v", s.Provenance)
	}
	seen := map[Cloud]map[GPUModel]bool{}
	for _, o := range s.Offers {
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		if seen[o.Cloud] == nil {
			seen[o.Cloud] = map[GPUModel]bool{}
		}
		seen[o.Cloud][o.GPU] = true
	}
	for _, c := range Clouds() {
		for _, g := range []GPUModel{T4, A100_80, H100} {
			if !seen[c][g] {
				t.Errorf("snapshot has no %s offer on %s", g, c)
			}
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, at, []string{"test"}, testOffers()); err != nil {
		t.Fatal(err)
	}
	s, err := ParseSnapshot("x.csv", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Offers) != len(testOffers()) || !s.GeneratedAt.Equal(at) {
		t.Fatalf("round trip lost data: %d offers at %v", len(s.Offers), s.GeneratedAt)
	}
	for i, o := range s.Offers {
		w := testOffers()[i]
		if o.Key() != w.Key() || o.OnDemandPrice != w.OnDemandPrice || o.SpotPrice != w.SpotPrice || o.GPU != w.GPU {
			t.Errorf("offer %d: got %+v want %+v", i, o, w)
		}
	}
}

const goodHead = "# gpubroker price snapshot v1\n# generated-at: 2026-12-02T00:00:00Z\n# columns: cloud,region,zone,instance_type,gpu,gpu_count,gpu_memory_gib,vcpus,memory_gib,on_demand_usd_per_hour,spot_usd_per_hour\n"

func TestParseSnapshotErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "x.csv: empty file"},
		{"magic", "hello\n", "x.csv:1:1: first line must be"},
		{"no date", "# gpubroker price snapshot v1\n# columns: cloud,region,zone,instance_type,gpu,gpu_count,gpu_memory_gib,vcpus,memory_gib,on_demand_usd_per_hour,spot_usd_per_hour\n", "no '# copied-at:' header line"},
		{"bad date", "# gpubroker price snapshot v1\n# generated-at: yesterday\n", "x.csv:2:16: generated-at \"yesterday\" is not an RFC 3339 time"},
		{"bad columns", "# gpubroker price snapshot v1\n# columns: a,b\n", "x.csv:2:12: columns must be"},
		{"data before header", "# gpubroker price snapshot v1\naws,x\n", "x.csv:2:1: data before the '# columns:' header line"},
		{"field count", goodHead + "aws,us-east-1\n", "x.csv:4:1: 2 fields, want 11"},
		{"cloud", goodHead + "ibm,r,z,t,T4,1,16,4,16,1,0\n", "x.csv:4:1: unknown cloud \"ibm\""},
		{"gpu", goodHead + "aws,r,z,t,T5,1,16,4,16,1,0\n", "x.csv:4:11: unknown GPU model \"T5\""},
		{"count", goodHead + "aws,r,z,t,T4,0,16,4,16,1,0\n", "x.csv:4:14: gpu_count \"0\" must be a whole number"},
		{"price", goodHead + "aws,r,z,t,T4,1,16,4,16,-1,0\n", "x.csv:4:24: on_demand_usd_per_hour \"-1\" must be a non-negative number"},
		{"nan", goodHead + "aws,r,z,t,T4,1,16,4,16,NaN,0\n", "on_demand_usd_per_hour \"NaN\""},
		{"no price", goodHead + "aws,r,z,t,T4,1,16,4,16,0,0\n", "neither an on-demand nor a spot price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSnapshot("x.csv", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			if !errors.Is(err, ErrSnapshot) {
				t.Errorf("error %v does not wrap ErrSnapshot", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func FuzzParseSnapshot(f *testing.F) {
	f.Add([]byte(goodHead + "aws,us-east-1,use1-az1,p4d.24xlarge,A100-40GB,8,40,96,1152,32.7726,12.1\n"))
	f.Add([]byte(goodHead + "gcp,r,,t,T4,1,16,4,16,,0.1\n"))
	f.Add([]byte(embeddedSnapshot[:2000]))
	f.Add([]byte("# gpubroker price snapshot v1\n# copied-at: 2026-12-02T00:00:00Z\n# prices-as-of: unknown\n# row-source: a-1 = x\n# columns: " +
		strings.Join(snapshotColumns, ",") + ",source\naws,us-east-1,use1-az1,p4d.24xlarge,A100-40GB,8,40,96,1152,32.7726,12.1,a-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSnapshot("fuzz.csv", bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrSnapshot) && !strings.Contains(err.Error(), "fuzz.csv") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		// Whatever parses must be valid and must survive a round trip.
		var buf bytes.Buffer
		if err := WriteSnapshot(&buf, s.GeneratedAt, nil, s.Offers); err != nil {
			return // e.g. a region holding '#': parseable but not writable is acceptable
		}
		again, err := ParseSnapshot("again.csv", &buf)
		if err != nil {
			t.Fatalf("re-parse of written snapshot failed: %v", err)
		}
		if len(again.Offers) != len(s.Offers) {
			t.Fatalf("round trip changed offer count %d → %d", len(s.Offers), len(again.Offers))
		}
	})
}

// TestSnapshotDating: the snapshot is dated by its source. The embedded one
// states no pricing date, so its catalog says so and its offers are stale;
// a snapshot with a stated date goes stale seven days after it.
func TestSnapshotDating(t *testing.T) {
	s, err := EmbeddedSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	cat := s.Catalog()
	if !s.PricesAsOf.IsZero() || !strings.Contains(cat.Source, "unknown date") || !strings.Contains(cat.Source, "copied 2026-12-02") {
		t.Errorf("embedded snapshot dated %v, source %q", s.PricesAsOf, cat.Source)
	}
	o := s.Offers[0]
	if !DateUnknown(o) || !Stale(o, s.GeneratedAt.Add(time.Hour), 7*24*time.Hour) {
		t.Errorf("undated offer %+v not stale", o)
	}
	if len(s.RowSources) < 6 || !strings.HasPrefix(o.Source, "snapshot ") {
		t.Errorf("row sources %v, offer source %q", s.RowSources, o.Source)
	}

	asOf := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	offers := testOffers()
	for i := range offers {
		offers[i].Source = "snapshot test-1"
	}
	meta := SnapshotMeta{CopiedAt: asOf.AddDate(0, 0, 3), PricesAsOf: asOf, RowSources: map[string]string{"test-1": "a test"}}
	if err := meta.Write(&buf, offers); err != nil {
		t.Fatal(err)
	}
	dated, err := ParseSnapshot("dated.csv", &buf)
	if err != nil {
		t.Fatal(err)
	}
	d := dated.Offers[0]
	if DateUnknown(d) || !d.ObservedAt.Equal(asOf) || d.Source != "snapshot test-1" || !dated.Catalog().GeneratedAt.Equal(asOf) {
		t.Errorf("dated offer %+v", d)
	}
	if Stale(d, asOf.Add(6*24*time.Hour), 7*24*time.Hour) || !Stale(d, asOf.Add(8*24*time.Hour), 7*24*time.Hour) {
		t.Error("a dated snapshot must go stale after 7 days, not before")
	}
}

func TestParseSnapshotRowSourceErrors(t *testing.T) {
	head := "# gpubroker price snapshot v1\n# copied-at: 2026-12-02T00:00:00Z\n"
	cols := "# columns: " + strings.Join(snapshotColumns, ",") + ",source\n"
	row := "aws,us-east-1,use1-az1,p4d.24xlarge,A100-40GB,8,40,96,1152,32.7726,12.1,"
	for name, tc := range map[string]struct{ in, want string }{
		"unknown id":   {head + "# row-source: a = x\n" + cols + row + "b\n", `x.csv:5:73: source "b" has no`},
		"bad id":       {head + "# row-source: a b = x\n" + cols, "x.csv:3:15: row-source"},
		"bad as-of":    {head + "# prices-as-of: last week\n", "x.csv:3:17: prices-as-of"},
		"bad copied":   {"# gpubroker price snapshot v1\n# copied-at: today\n", "x.csv:2:13: copied-at"},
		"bad columns":  {head + "# columns: cloud\n", "x.csv:3:12: columns must be"},
		"row no field": {head + "# row-source: a = x\n" + cols + "nocommas\n", "x.csv:5:1"},
	} {
		_, err := ParseSnapshot("x.csv", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}
