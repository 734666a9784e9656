// Command snapshotgen turns the public catalog CSVs in shared/data/catalog
// (AWS, GCP and Azure rows copied from SkyPilot's public catalog, plus the
// extra/ rows of the same catalog) into gpubroker's own snapshot format,
// which pricing embeds. Run it through `go generate ./pricing`.
//
// Every row keeps its provenance: the snapshot's source column names the
// file and catalog version it came from (aws-v7, gcp-v8-extra, ...).
//
// GCP bills a GPU VM as its host machine plus the attached GPUs, and the
// source keeps those on separate rows; this generator pairs each host machine
// type with the accelerator count it carries (pairs below) and adds the two
// prices, zone by zone, and only within one file: a host row is never paired
// with a GPU row of another file or catalog version.
//
// A4 (B200) is the exception. GCP sells A4 by the "GPU slice" (SKU "A4
// Nvidia B200 (1 gpu slice)"): one B200 with its share of the machine's
// vCPUs, memory and bundled Local SSD. There are no A4 core or RAM SKUs, so
// the catalog's a4-highgpu-8g host rows carry 0.0, and the B200 row's price
// is the whole VM's. Host rows of other families priced 0.0 are unknown, not
// free, and make no offer.
//
// Dating: the source states no pricing date. The snapshot says so ("#
// prices-as-of: unknown") and carries the day the rows were copied, a
// property of the source files, not of the build.
package main

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

func main() {
	dir := flag.String("catalog", "../../shared/data/catalog", "folder with aws.csv, gcp.csv, azure.csv and extra/")
	out := flag.String("out", "snapshot.csv", "snapshot file to write")
	flag.Parse()
	var buf bytes.Buffer
	n, err := generate(&buf, *dir)
	if err != nil {
		log.Fatalf("snapshotgen: %v", err)
	}
	// Write to a temporary file and rename, so a failed run never leaves a
	// half-written snapshot behind.
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "snapshotgen: wrote %d offers to %s\n", n, *out)
}

// copiedAt is the day the rows of every source file were copied from the
// public catalog (shared/data/catalog/SOURCE.md and extra/SOURCE.md). The
// catalog itself states no pricing date, so this is the newest the prices
// can be.
var copiedAt = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// provenance is written into the snapshot header.
var provenance = []string{
	"public GPU prices, USD per hour, copied row-for-row from skypilot-org/skypilot-catalog (see row-source lines).",
	"The source states no pricing date: prices-as-of is unknown and copied-at is the day the rows were copied.",
	"GCP offers are host + attached GPUs of the same file; A4 (B200) is sold by the GPU slice, whose price includes the host.",
	"Corrections: Standard_ND96isr_H100_v5 listed with 12 GPUs has 8; duplicate p4de.24xlarge rows merged.",
	"AWS zones are AZ IDs (use1-az4); Azure offers are regional (no zone).",
}

// sourceFile is one input CSV and the provenance its rows carry.
type sourceFile struct {
	id    string // row-source id
	path  string // relative to the catalog folder
	desc  string
	parse func([][]string) ([]pricing.Offer, error)
	cols  int
}

var sourceFiles = []sourceFile{
	{"aws-v7", "aws.csv", "aws.csv: catalogs/v7/aws/vms.csv @001367d22a0033fac286a8c71aeac7109e431bcb", awsOffers, 10},
	{"aws-v7-extra", "extra/aws.csv", "extra/aws.csv: catalogs/v7/aws/vms.csv @001367d22a0033fac286a8c71aeac7109e431bcb (more regions and g6e sizes)", awsOffers, 10},
	{"aws-v8-extra", "extra/aws-v8.csv", "extra/aws-v8.csv: catalogs/v8/aws/vms.csv @00148f2af3672e2229b4f7bf8157d5a3f36e3c35 (p6-b200, p6-b300; Arch column)", awsOffers, 11},
	{"gcp-v7", "gcp.csv", "gcp.csv: catalogs/v7/gcp/vms.csv @017e2502fb63c7a28757acd94002b2d6099d3e3d", gcpOffers, 10},
	{"gcp-v7-extra", "extra/gcp.csv", "extra/gcp.csv: catalogs/v7/gcp/vms.csv @017e2502fb63c7a28757acd94002b2d6099d3e3d (A3 Ultra, more L4 and A100 regions)", gcpOffers, 10},
	{"gcp-v8-extra", "extra/gcp-v8.csv", "extra/gcp-v8.csv: catalogs/v8/gcp/vms.csv @006059e0f18acb1341e22a27751e9f80df6ba92f (A4 B200)", gcpOffers, 10},
	{"azure-v6", "azure.csv", "azure.csv: catalogs/v6/azure/vms.csv @098741e70562f65d7af1cceb81e33b284f742604", azureOffers, 10},
	{"azure-extra", "extra/azure.csv", "extra/azure.csv: header only (no more Azure rows in any stored catalog version)", azureOffers, 10},
}

// generate reads the catalog CSVs in dir and writes the snapshot to w.
func generate(w io.Writer, dir string) (int, error) {
	var offers []pricing.Offer
	meta := pricing.SnapshotMeta{CopiedAt: copiedAt, Provenance: provenance, RowSources: map[string]string{}}
	seen := map[string]string{}
	for _, f := range sourceFiles {
		rows, err := readCSV(filepath.Join(dir, f.path), f.cols)
		if err != nil {
			return 0, err
		}
		got, err := f.parse(rows)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.path, err)
		}
		for i := range got {
			if prev, dup := seen[got[i].Key()]; dup {
				return 0, fmt.Errorf("%s: offer %s is also in %s; each offer must come from one file", f.path, got[i].Key(), prev)
			}
			seen[got[i].Key()] = f.path
			got[i].Source = pricing.SnapshotSourcePrefix + " " + f.id
		}
		meta.RowSources[f.id] = f.desc
		offers = append(offers, got...)
	}
	sort.Slice(offers, func(i, j int) bool { return offers[i].Key() < offers[j].Key() })
	if err := meta.Write(w, offers); err != nil {
		return 0, err
	}
	return len(offers), nil
}

// readCSV reads a catalog CSV and returns its data rows. A file holding only
// its header has no rows; every row must have cols fields.
func readCSV(path string, cols int) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = cols
	var rows [][]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, rec)
	}
	if len(rows) < 1 {
		return nil, fmt.Errorf("%s: no header line", path)
	}
	return rows[1:], nil // drop the header
}

var sizeInMiB = regexp.MustCompile(`'SizeInMiB': (\d+)`)

func gpuMemMiB(info string) int {
	m := sizeInMiB.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func price(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseFloat(s, 64)
}

func gpuMemGiB(model pricing.GPUModel, mib int) float64 {
	if mib > 0 {
		return float64(mib) / 1024
	}
	s, _ := pricing.Spec(model)
	return s.MemoryGiB
}

// awsOffers: InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone
func awsOffers(rows [][]string) ([]pricing.Offer, error) {
	byKey := map[string]*pricing.Offer{}
	var order []string
	for i, r := range rows {
		if len(r) != 10 && len(r) != 11 { // v8 adds Arch
			return nil, fmt.Errorf("row %d: %d fields", i+2, len(r))
		}
		mib := gpuMemMiB(r[5])
		gpu, ok := pricing.NormalizeGPU(r[1], mib)
		if !ok {
			return nil, fmt.Errorf("row %d: unknown GPU %q", i+2, r[1])
		}
		count, err1 := strconv.ParseFloat(r[2], 64)
		vcpu, err2 := strconv.ParseFloat(r[3], 64)
		mem, err3 := strconv.ParseFloat(r[4], 64)
		od, err4 := price(r[6])
		sp, err5 := price(r[7])
		for _, err := range []error{err1, err2, err3, err4, err5} {
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", i+2, err)
			}
		}
		o := pricing.Offer{Cloud: pricing.AWS, Region: r[8], Zone: r[9], InstanceType: r[0], GPU: gpu,
			GPUCount: int(count), GPUMemoryGiB: gpuMemGiB(gpu, mib), VCPUs: vcpu, MemoryGiB: mem,
			OnDemandPrice: od, SpotPrice: sp}
		// p4de.24xlarge appears twice per zone (one row with the on-demand
		// price, one with the spot price): merge them.
		if prev, ok := byKey[o.Key()]; ok {
			if prev.OnDemandPrice == 0 {
				prev.OnDemandPrice = o.OnDemandPrice
			}
			if prev.SpotPrice == 0 {
				prev.SpotPrice = o.SpotPrice
			}
			continue
		}
		byKey[o.Key()] = &o
		order = append(order, o.Key())
	}
	out := make([]pricing.Offer, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, nil
}

// gcpPairs maps GCP GPU machine types to the accelerator (source name) and
// count they carry. n1 machines take attachable GPUs; the generator offers
// each attachable GPU on the smallest n1 shape GCP allows for that count.
var gcpPairs = map[string][]struct {
	accel string
	count int
}{
	"a2-highgpu-1g":  {{"A100", 1}},
	"a2-highgpu-2g":  {{"A100", 2}},
	"a2-highgpu-4g":  {{"A100", 4}},
	"a2-highgpu-8g":  {{"A100", 8}},
	"a2-ultragpu-1g": {{"A100-80GB", 1}},
	"a2-ultragpu-8g": {{"A100-80GB", 8}},
	"a3-highgpu-8g":  {{"H100", 8}},
	"a3-megagpu-8g":  {{"H100-MEGA", 8}},
	"a3-ultragpu-8g": {{"H200", 8}},
	"a4-highgpu-8g":  {{"B200", 8}},
	"g2-standard-4":  {{"L4", 1}},
	"g2-standard-8":  {{"L4", 1}},
	"g2-standard-12": {{"L4", 1}},
	"g2-standard-24": {{"L4", 2}},
	"g2-standard-48": {{"L4", 4}},
	"g2-standard-96": {{"L4", 8}},
	"n1-standard-4":  {{"T4", 1}},
	"n1-standard-8":  {{"T4", 1}, {"V100", 1}, {"P100", 1}},
	"n1-standard-16": {{"T4", 2}, {"V100", 2}, {"P100", 2}},
	"n1-standard-32": {{"T4", 4}, {"V100", 4}, {"V100", 8}, {"P100", 4}},
}

// gpuSlices are the GCP machine types sold by the GPU slice (host included).
var gpuSlices = map[string]bool{"a4-highgpu-8g": true}

// gcpOffers: InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice
func gcpOffers(rows [][]string) ([]pricing.Offer, error) {
	type accelKey struct {
		name  string
		count int
		zone  string
	}
	type accel struct {
		od, spot float64
		mib      int
	}
	accels := map[accelKey]accel{}
	for i, r := range rows {
		if len(r) != 10 {
			return nil, fmt.Errorf("row %d: %d fields", i+2, len(r))
		}
		if r[0] != "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(r[4], ".0"))
		if err != nil {
			return nil, fmt.Errorf("row %d: accelerator count %q: %w", i+2, r[4], err)
		}
		od, err1 := price(r[8])
		sp, err2 := price(r[9])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("row %d: bad price", i+2)
		}
		accels[accelKey{r[3], n, r[7]}] = accel{od, sp, gpuMemMiB(r[5])}
	}
	var out []pricing.Offer
	hostSeen := map[[2]string]bool{}
	for i, r := range rows {
		if r[0] == "" {
			continue
		}
		// The source repeats some host rows (a4-highgpu-8g twice per zone).
		if k := [2]string{r[0], r[7]}; hostSeen[k] {
			continue
		} else {
			hostSeen[k] = true
		}
		pairs, ok := gcpPairs[r[0]]
		if !ok {
			return nil, fmt.Errorf("row %d: no GPU pairing for machine type %q", i+2, r[0])
		}
		vcpu, err1 := strconv.ParseFloat(r[1], 64)
		mem, err2 := strconv.ParseFloat(r[2], 64)
		hostOD, err3 := price(r[8])
		hostSpot, err4 := price(r[9])
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", i+2, err)
			}
		}
		for _, p := range pairs {
			a, ok := accels[accelKey{p.accel, p.count, r[7]}]
			if !ok {
				continue // that GPU is not offered in this zone
			}
			gpu, ok := pricing.NormalizeGPU(p.accel, a.mib)
			if !ok {
				return nil, fmt.Errorf("row %d: unknown accelerator %q", i+2, p.accel)
			}
			o := pricing.Offer{Cloud: pricing.GCP, Region: r[6], Zone: r[7], InstanceType: r[0], GPU: gpu,
				GPUCount: p.count, GPUMemoryGiB: gpuMemGiB(gpu, a.mib), VCPUs: vcpu, MemoryGiB: mem}
			if strings.HasPrefix(r[0], "n1-") {
				// n1 shapes carry different GPUs: name the pairing.
				o.InstanceType = fmt.Sprintf("%s+%dx%s", r[0], p.count, strings.ToLower(p.accel))
			}
			if gpuSlices[r[0]] {
				// Sold by the GPU slice: the accelerator row is the whole
				// VM; the host row must say 0.0 (included), not a price.
				if hostOD != 0 || hostSpot != 0 {
					return nil, fmt.Errorf("row %d: %s is sold by the GPU slice but its host row has a price", i+2, r[0])
				}
				o.OnDemandPrice, o.SpotPrice = round6(a.od), round6(a.spot)
			} else {
				if hostOD > 0 && a.od > 0 {
					o.OnDemandPrice = round6(hostOD + a.od)
				}
				if hostSpot > 0 && a.spot > 0 {
					o.SpotPrice = round6(hostSpot + a.spot)
				}
			}
			if o.OnDemandPrice == 0 && o.SpotPrice == 0 {
				continue
			}
			out = append(out, o)
		}
	}
	return out, nil
}

func round6(f float64) float64 { return float64(int64(f*1e6+0.5)) / 1e6 }

// azureCountFix corrects GPU counts the source gets wrong.
var azureCountFix = map[string]int{"Standard_ND96isr_H100_v5": 8}

// azureOffers: InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Generation
func azureOffers(rows [][]string) ([]pricing.Offer, error) {
	var out []pricing.Offer
	for i, r := range rows {
		if len(r) != 10 {
			return nil, fmt.Errorf("row %d: %d fields", i+2, len(r))
		}
		gpu, ok := pricing.NormalizeGPU(r[1], 0)
		if !ok {
			return nil, fmt.Errorf("row %d: unknown GPU %q", i+2, r[1])
		}
		count, err1 := strconv.Atoi(r[2])
		vcpu, err2 := strconv.ParseFloat(r[3], 64)
		mem, err3 := strconv.ParseFloat(r[4], 64)
		od, err4 := price(r[6])
		sp, err5 := price(r[7])
		for _, err := range []error{err1, err2, err3, err4, err5} {
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", i+2, err)
			}
		}
		if fix, ok := azureCountFix[r[0]]; ok {
			count = fix
		}
		out = append(out, pricing.Offer{Cloud: pricing.Azure, Region: r[8], InstanceType: r[0], GPU: gpu,
			GPUCount: count, GPUMemoryGiB: gpuMemGiB(gpu, 0), VCPUs: vcpu, MemoryGiB: mem,
			OnDemandPrice: od, SpotPrice: sp})
	}
	return out, nil
}
