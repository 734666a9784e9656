package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/internal/shareddata"
)

// TestCommittedSnapshotIsUpToDate regenerates the snapshot from the shared
// catalog CSVs and compares it with the committed one, so the embedded data
// can never drift from its declared source.
func TestCommittedSnapshotIsUpToDate(t *testing.T) {
	dir := shareddata.Dir(t, "catalog")
	var buf bytes.Buffer
	n, err := generate(&buf, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 800 {
		t.Errorf("only %d offers generated; the catalog has ~1,100 rows", n)
	}
	committed, err := os.ReadFile("../../snapshot.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), committed) {
		t.Fatal("pricing/snapshot.csv is out of date: run `go generate ./pricing`")
	}
}

func TestGCPHostPlusGPU(t *testing.T) {
	rows := [][]string{
		{"a2-highgpu-1g", "12.0", "85.0", "", "", "", "us-central1", "us-central1-a", "0.73948", "0.29576"},
		{"", "", "", "A100", "1", "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 40960}}]}", "us-central1", "us-central1-a", "2.93391", "1.1472"},
		// Host in a zone without that GPU: no offer.
		{"a2-highgpu-1g", "12.0", "85.0", "", "", "", "us-central1", "us-central1-f", "0.73948", "0.29576"},
	}
	offers, err := gcpOffers(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) != 1 {
		t.Fatalf("got %d offers, want 1: %+v", len(offers), offers)
	}
	o := offers[0]
	if o.OnDemandPrice != 3.67339 || o.SpotPrice != 1.44296 || o.GPUCount != 1 || o.GPUMemoryGiB != 40 {
		t.Errorf("offer = %+v; want host+GPU = 3.67339 on demand, 1.44296 spot", o)
	}
}

func TestAWSDuplicateRowsMerge(t *testing.T) {
	info := "{'Gpus': [{'Name': 'A100', 'Manufacturer': 'NVIDIA', 'Count': 8, 'MemoryInfo': {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 655360}"
	rows := [][]string{
		{"p4de.24xlarge", "A100-80GB", "8.0", "96.0", "1152.0", info, "40.96575", "", "us-east-1", "use1-az4"},
		{"p4de.24xlarge", "A100-80GB", "8.0", "96.0", "1152.0", info, "40.96575", "7.807400", "us-east-1", "use1-az4"},
	}
	offers, err := awsOffers(rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) != 1 || offers[0].OnDemandPrice != 40.96575 || offers[0].SpotPrice != 7.8074 || offers[0].GPUMemoryGiB != 80 {
		t.Fatalf("offers = %+v; want one merged offer with both prices", offers)
	}
}

// TestGCPPairsWithinOneFile: the A3 Ultra host rows of extra/gcp.csv in
// zones whose H200 row is in ../gcp.csv (europe-west4-a, us-central1-b, ...)
// make no offer, and the v7 B200 rows (no A4 host in v7) make none either.
func TestGCPPairsWithinOneFile(t *testing.T) {
	dir := shareddata.Dir(t, "catalog")
	var buf bytes.Buffer
	if _, err := generate(&buf, dir); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{
		"gcp,europe-west4,europe-west4-a,a3-ultragpu-8g,",
		"gcp,us-central1,us-central1-b,a3-ultragpu-8g,",
		"gcp,us-west1,us-west1-c,a3-ultragpu-8g,",
	} {
		if strings.Contains(out, bad) {
			t.Errorf("snapshot pairs a host and a GPU row of different files: %s...", bad)
		}
	}
	for _, good := range []string{
		"gcp,us-south1,us-south1-b,a3-ultragpu-8g,H200,8,141,224,2952,51.07645,44.57889,gcp-v7-extra\n",
		// A4: the v8 B200 row is the whole VM (host rows 0.0, sold by the slice).
		"gcp,europe-north1,europe-north1-b,a4-highgpu-8g,B200,8,180,224,3968,64.44,35.8672,gcp-v8-extra\n",
		"aws,us-west-2,usw2-az2,p6-b300.48xlarge,B300,8,",
		"aws,us-east-1,use1-atl2-az1,p6-b200.48xlarge,B200,8,",
	} {
		if !strings.Contains(out, good) {
			t.Errorf("snapshot lacks %q", good)
		}
	}
}

func TestGPUSliceHostMustBeZero(t *testing.T) {
	rows := [][]string{
		{"a4-highgpu-8g", "224.0", "3968.0", "", "", "", "us-east4", "us-east4-b", "3.5", "0.0"},
		{"", "", "", "B200", "8", "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 184320}}]}", "us-east4", "us-east4-b", "64.44", "32.6064"},
	}
	if _, err := gcpOffers(rows); err == nil || !strings.Contains(err.Error(), "GPU slice") {
		t.Fatalf("error %v; want a priced A4 host row refused", err)
	}
	rows[0][8] = "0.0"
	offers, err := gcpOffers(rows)
	if err != nil || len(offers) != 1 || offers[0].OnDemandPrice != 64.44 || offers[0].SpotPrice != 32.6064 {
		t.Fatalf("offers %+v, %v; want the B200 row's prices as the VM's", offers, err)
	}
}

func TestDuplicateOfferAcrossFilesRefused(t *testing.T) {
	dir := t.TempDir()
	src := shareddata.Dir(t, "catalog")
	for _, f := range sourceFiles {
		b, err := os.ReadFile(src + "/" + f.path)
		if err != nil {
			t.Fatal(err)
		}
		if f.path == "extra/aws.csv" {
			// Repeat a row of aws.csv here.
			base, _ := os.ReadFile(src + "/aws.csv")
			lines := strings.SplitN(string(base), "\n", 3)
			b = append(b, []byte(lines[1]+"\n")...)
		}
		if err := os.MkdirAll(dir+"/extra", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+f.path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := generate(&buf, dir); err == nil || !strings.Contains(err.Error(), "also in aws.csv") {
		t.Fatalf("error %v; want the repeated offer refused", err)
	}
}
