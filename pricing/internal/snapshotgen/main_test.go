package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/shareddata"
)

// TestCommittedSnapshotIsUpToDate regenerates the snapshot from the shared
// catalog CSVs and compares it with the committed one, so the embedded data
// can never drift from its declared source.
func TestCommittedSnapshotIsUpToDate(t *testing.T) {
	dir := shareddata.Dir(t, "catalog")
	var buf bytes.Buffer
	n, err := generate(&buf, dir, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
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
