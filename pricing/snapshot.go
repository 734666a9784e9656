package pricing

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"sort"
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

// snapshotColumns are the data columns, in order. sourceColumn, when
// present, follows them and names the row's source (see "# row-source:").
var snapshotColumns = []string{"cloud", "region", "zone", "instance_type", "gpu", "gpu_count",
	"gpu_memory_gib", "vcpus", "memory_gib", "on_demand_usd_per_hour", "spot_usd_per_hour"}

const sourceColumn = "source"

// SnapshotSourcePrefix starts the Source of every snapshot offer; the row's
// source id follows ("snapshot aws-v7").
const SnapshotSourcePrefix = "snapshot"

// undatedSuffix ends the Source of snapshot offers whose source states no
// pricing date.
const undatedSuffix = " (prices of unknown date)"

// DateUnknown reports whether an offer's prices come from a source that
// states no pricing date. Its ObservedAt is then the day the rows were
// copied: a bound, not an observation.
func DateUnknown(o Offer) bool { return strings.HasSuffix(o.Source, undatedSuffix) }

// ErrSnapshot is wrapped by every snapshot parse error.
var ErrSnapshot = errors.New("bad price snapshot")

// Snapshot is a parsed snapshot file.
type Snapshot struct {
	// GeneratedAt is the day the rows were copied from their public source
	// ("# copied-at:"; older files say "# generated-at:"). It is the newest
	// the prices can be, not the day the binary was built.
	GeneratedAt time.Time
	// PricesAsOf is the pricing date the source states ("# prices-as-of:");
	// zero when it states none.
	PricesAsOf time.Time
	// Provenance lines from the header, in order.
	Provenance []string
	// RowSources describes each row-source id ("# row-source: id = ...").
	RowSources map[string]string
	Offers     []Offer
}

// SnapshotMeta is what a snapshot file's header says besides its rows.
type SnapshotMeta struct {
	CopiedAt   time.Time
	PricesAsOf time.Time // zero: unknown
	Provenance []string
	// RowSources maps a row-source id to its description; offers whose
	// Source is "snapshot <id>" are written with that id.
	RowSources map[string]string
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

// Catalog turns the snapshot into a catalog. Its source line says how the
// snapshot is dated: by the pricing date its source states or, when the
// source states none, by the day its rows were copied, said as such.
func (s *Snapshot) Catalog() *Catalog {
	return NewCatalog(s.Offers, s.dated(), "embedded snapshot, "+s.DateText())
}

func (s *Snapshot) dated() time.Time {
	if !s.PricesAsOf.IsZero() {
		return s.PricesAsOf
	}
	return s.GeneratedAt
}

// DateText says how old the snapshot's prices are, in words.
func (s *Snapshot) DateText() string {
	if !s.PricesAsOf.IsZero() {
		return "prices as of " + s.PricesAsOf.Format("2006-01-02")
	}
	return "prices of unknown date copied " + s.GeneratedAt.Format("2006-01-02") + " from a public catalog"
}

// WriteSnapshot writes offers in the snapshot format. Offers are written in
// the order given; callers sort them for stable output.
func WriteSnapshot(w io.Writer, generatedAt time.Time, provenance []string, offers []Offer) error {
	return SnapshotMeta{CopiedAt: generatedAt, Provenance: provenance}.Write(w, offers)
}

// Write writes a snapshot file with this header.
func (m SnapshotMeta) Write(w io.Writer, offers []Offer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, snapshotMagic)
	fmt.Fprintf(bw, "# copied-at: %s\n", m.CopiedAt.UTC().Format(time.RFC3339))
	if m.PricesAsOf.IsZero() {
		fmt.Fprintln(bw, "# prices-as-of: unknown")
	} else {
		fmt.Fprintf(bw, "# prices-as-of: %s\n", m.PricesAsOf.UTC().Format(time.RFC3339))
	}
	for _, p := range m.Provenance {
		fmt.Fprintf(bw, "# source: %s\n", strings.ReplaceAll(p, "\n", " "))
	}
	ids := make([]string, 0, len(m.RowSources))
	for id := range m.RowSources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !validRowSourceID(id) {
			return fmt.Errorf("write snapshot: row-source id %q: want letters, digits and '-'", id)
		}
		fmt.Fprintf(bw, "# row-source: %s = %s\n", id, strings.ReplaceAll(m.RowSources[id], "\n", " "))
	}
	cols := strings.Join(snapshotColumns, ",")
	if len(ids) > 0 {
		cols += "," + sourceColumn
	}
	fmt.Fprintf(bw, "# columns: %s\n", cols)
	for _, o := range offers {
		if err := o.Validate(); err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
		fields := []string{string(o.Cloud), o.Region, o.Zone, o.InstanceType, string(o.GPU),
			strconv.Itoa(o.GPUCount), num(o.GPUMemoryGiB), num(o.VCPUs), num(o.MemoryGiB),
			num(o.OnDemandPrice), num(o.SpotPrice)}
		if len(ids) > 0 {
			id := rowSourceID(o.Source)
			if _, ok := m.RowSources[id]; !ok {
				return fmt.Errorf("write snapshot: offer %s: source %q has no row-source line", o.Key(), o.Source)
			}
			fields = append(fields, id)
		}
		for _, f := range fields {
			if strings.ContainsAny(f, ",\n\r\"#") {
				return fmt.Errorf("write snapshot: offer %s: field %q holds a separator", o.Key(), f)
			}
		}
		fmt.Fprintln(bw, strings.Join(fields, ","))
	}
	return bw.Flush()
}

// rowSourceID is the id in an offer Source "snapshot <id>[ (prices of unknown date)]".
func rowSourceID(source string) string {
	id := strings.TrimSuffix(source, undatedSuffix)
	id = strings.TrimPrefix(id, SnapshotSourcePrefix)
	return strings.TrimSpace(id)
}

func validRowSourceID(id string) bool {
	if id == "" || len(id) > 40 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
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
	sawColumns, withSource := false, false
	var pending []int // offers whose ObservedAt and Source wait for the header's dates
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
			case "generated-at", "copied-at":
				t, err := time.Parse(time.RFC3339, val)
				if err != nil {
					return nil, fail(len(key)+4, "%s %q is not an RFC 3339 time such as 2026-12-02T00:00:00Z", key, val)
				}
				s.GeneratedAt = t
			case "prices-as-of":
				if val == "unknown" {
					continue
				}
				t, err := time.Parse(time.RFC3339, val)
				if err != nil {
					return nil, fail(17, "prices-as-of %q is not an RFC 3339 time such as 2026-12-02T00:00:00Z, or unknown", val)
				}
				s.PricesAsOf = t
			case "source":
				s.Provenance = append(s.Provenance, val)
			case "row-source":
				id, desc, ok := strings.Cut(val, "=")
				id = strings.TrimSpace(id)
				if !ok || !validRowSourceID(id) {
					return nil, fail(15, "row-source %q: want 'id = description' with an id of letters, digits and '-'", val)
				}
				if s.RowSources == nil {
					s.RowSources = map[string]string{}
				}
				s.RowSources[id] = strings.TrimSpace(desc)
			case "columns":
				switch val {
				case strings.Join(snapshotColumns, ","):
				case strings.Join(snapshotColumns, ",") + "," + sourceColumn:
					withSource = true
				default:
					return nil, fail(12, "columns must be %s[,%s]", strings.Join(snapshotColumns, ","), sourceColumn)
				}
				sawColumns = true
			}
			continue
		}
		if !sawColumns {
			return nil, fail(1, "data before the '# columns:' header line")
		}
		id := ""
		if withSource {
			i := strings.LastIndexByte(text, ',')
			if i < 0 {
				return nil, fail(1, "no %s field", sourceColumn)
			}
			id = text[i+1:]
			if _, ok := s.RowSources[id]; !ok {
				return nil, fail(i+2, "source %q has no '# row-source: %s = ...' line above", id, id)
			}
			text = text[:i]
		}
		o, col, err := parseSnapshotRow(text)
		if err != nil {
			return nil, fail(col, "%v", err)
		}
		o.Source = strings.TrimSpace(SnapshotSourcePrefix + " " + id)
		pending = append(pending, len(s.Offers))
		s.Offers = append(s.Offers, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s:%d: %v", ErrSnapshot, name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: %s: empty file", ErrSnapshot, name)
	}
	if s.GeneratedAt.IsZero() {
		return nil, fmt.Errorf("%w: %s: no '# copied-at:' header line", ErrSnapshot, name)
	}
	for _, i := range pending {
		s.Offers[i].ObservedAt = s.dated()
		if s.PricesAsOf.IsZero() {
			s.Offers[i].Source += undatedSuffix
		}
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
