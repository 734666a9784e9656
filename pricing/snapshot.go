package pricing

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

//go:generate go run ./internal/snapshotgen -catalog ../../shared/data/catalog -out snapshot.csv

// embeddedSnapshot is the committed price snapshot generated from public
// catalog data; see snapshot.csv's header for provenance.
//
//go:embed snapshot.csv
var embeddedSnapshot string

// snapshotMagic is the first line of every snapshot file.
const snapshotMagic = "# gpubroker price snapshot v1"

// snapshotColumns are the data columns, in order.
var snapshotColumns = []string{"cloud", "region", "zone", "instance_type", "gpu", "gpu_count",
	"gpu_memory_gib", "vcpus", "memory_gib", "on_demand_usd_per_hour", "spot_usd_per_hour"}

// ErrSnapshot is wrapped by every snapshot parse error.
var ErrSnapshot = errors.New("bad price snapshot")

// Snapshot is a parsed snapshot file.
type Snapshot struct {
	GeneratedAt time.Time
	// Provenance lines from the header, in order.
	Provenance []string
	Offers     []Offer
}

// EmbeddedSnapshot parses the snapshot compiled into the binary.
func EmbeddedSnapshot() (*Snapshot, error) {
	return ParseSnapshot("embedded snapshot.csv", strings.NewReader(embeddedSnapshot))
}

// EmbeddedCatalog is the catalog of the embedded snapshot with the built-in
// spot defaults applied.
func EmbeddedCatalog() (*Catalog, error) {
	s, err := EmbeddedSnapshot()
	if err != nil {
		return nil, err
	}
	return s.Catalog().WithSpotDefaults(DefaultSpotDefaults()), nil
}

// Catalog turns the snapshot into a catalog.
func (s *Snapshot) Catalog() *Catalog {
	return NewCatalog(s.Offers, s.GeneratedAt, "embedded snapshot of "+s.GeneratedAt.Format("2006-01-02"))
}

// WriteSnapshot writes offers in the snapshot format. Offers are written in
// the order given; callers sort them for stable output.
func WriteSnapshot(w io.Writer, generatedAt time.Time, provenance []string, offers []Offer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, snapshotMagic)
	fmt.Fprintf(bw, "# generated-at: %s\n", generatedAt.UTC().Format(time.RFC3339))
	for _, p := range provenance {
		fmt.Fprintf(bw, "# source: %s\n", strings.ReplaceAll(p, "\n", " "))
	}
	fmt.Fprintf(bw, "# columns: %s\n", strings.Join(snapshotColumns, ","))
	for _, o := range offers {
		if err := o.Validate(); err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
		fields := []string{string(o.Cloud), o.Region, o.Zone, o.InstanceType, string(o.GPU),
			strconv.Itoa(o.GPUCount), num(o.GPUMemoryGiB), num(o.VCPUs), num(o.MemoryGiB),
			num(o.OnDemandPrice), num(o.SpotPrice)}
		for _, f := range fields {
			if strings.ContainsAny(f, ",\n\r\"#") {
				return fmt.Errorf("write snapshot: offer %s: field %q holds a separator", o.Key(), f)
			}
		}
		fmt.Fprintln(bw, strings.Join(fields, ","))
	}
	return bw.Flush()
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// ParseSnapshot reads a snapshot file. name is used in errors, which read
// "name:line:col: what is wrong".
func ParseSnapshot(name string, r io.Reader) (*Snapshot, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	s := &Snapshot{}
	line := 0
	fail := func(col int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d:%d: %s", ErrSnapshot, name, line, col, fmt.Sprintf(format, args...))
	}
	sawColumns := false
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if line == 1 {
			if text != snapshotMagic {
				return nil, fail(1, "first line must be %q", snapshotMagic)
			}
			continue
		}
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "#") {
			key, val, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(text, "#")), ":")
			val = strings.TrimSpace(val)
			switch key {
			case "generated-at":
				t, err := time.Parse(time.RFC3339, val)
				if err != nil {
					return nil, fail(16, "generated-at %q is not an RFC 3339 time such as 2026-12-02T00:00:00Z", val)
				}
				s.GeneratedAt = t
			case "source":
				s.Provenance = append(s.Provenance, val)
			case "columns":
				if val != strings.Join(snapshotColumns, ",") {
					return nil, fail(12, "columns must be %s", strings.Join(snapshotColumns, ","))
				}
				sawColumns = true
			}
			continue
		}
		if !sawColumns {
			return nil, fail(1, "data before the '# columns:' header line")
		}
		o, col, err := parseSnapshotRow(text)
		if err != nil {
			return nil, fail(col, "%v", err)
		}
		o.ObservedAt = s.GeneratedAt
		o.Source = "snapshot"
		s.Offers = append(s.Offers, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s:%d: %v", ErrSnapshot, name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: %s: empty file", ErrSnapshot, name)
	}
	if s.GeneratedAt.IsZero() {
		return nil, fmt.Errorf("%w: %s: no '# generated-at:' header line", ErrSnapshot, name)
	}
	return s, nil
}

// parseSnapshotRow parses one data row; on error it returns the 1-based
// column where the bad field starts.
func parseSnapshotRow(text string) (Offer, int, error) {
	fields := strings.Split(text, ",")
	if len(fields) != len(snapshotColumns) {
		return Offer{}, 1, fmt.Errorf("%d fields, want %d (%s)", len(fields), len(snapshotColumns), strings.Join(snapshotColumns, ","))
	}
	cols := make([]int, len(fields))
	c := 1
	for i, f := range fields {
		cols[i] = c
		c += len(f) + 1
	}
	var o Offer
	cloud, err := ParseCloud(fields[0])
	if err != nil {
		return o, cols[0], err
	}
	o.Cloud, o.Region, o.Zone, o.InstanceType = cloud, fields[1], fields[2], fields[3]
	gpu, ok := ParseGPUModel(fields[4])
	if !ok {
		return o, cols[4], fmt.Errorf("unknown GPU model %q", fields[4])
	}
	o.GPU = gpu
	n, err := strconv.Atoi(fields[5])
	if err != nil || n <= 0 || n > 64 {
		return o, cols[5], fmt.Errorf("gpu_count %q must be a whole number from 1 to 64", fields[5])
	}
	o.GPUCount = n
	floats := []*float64{&o.GPUMemoryGiB, &o.VCPUs, &o.MemoryGiB, &o.OnDemandPrice, &o.SpotPrice}
	for i, dst := range floats {
		k := 6 + i
		if fields[k] == "" {
			continue
		}
		v, err := strconv.ParseFloat(fields[k], 64)
		if err != nil || !validPrice(v) || v > 1e6 {
			return o, cols[k], fmt.Errorf("%s %q must be a non-negative number", snapshotColumns[k], fields[k])
		}
		*dst = v
	}
	if err := o.Validate(); err != nil {
		return o, 1, err
	}
	return o, 0, nil
}
