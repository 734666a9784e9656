//go:build !agentonly

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// fixedNow keeps the snapshot's age stable in golden output.
var fixedNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func TestPricesGolden(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		golden string
		opts   pricesOptions
	}{
		{"prices-a100-80-spot.txt", pricesOptions{gpus: []string{"A100-80GB"}, clouds: []string{"aws", "gcp"}, spot: true, sortBy: "gpu-hour", output: "table"}},
		{"prices-tflop-limit.json", pricesOptions{minMemory: 40, sortBy: "tflop", output: "json", limit: 5}},
		{"prices-t4-us.csv", pricesOptions{gpus: []string{"t4"}, regions: []string{"us-*", "eastus"}, maxPrice: 1, sortBy: "gpu-hour", output: "csv"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runPrices(&buf, cat, tt.opts, fixedNow); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.golden, buf.Bytes())
		})
	}
}

func TestPricesSortedAndFiltered(t *testing.T) {
	cat, _ := pricing.EmbeddedCatalog()
	var buf bytes.Buffer
	err := runPrices(&buf, cat, pricesOptions{gpus: []string{"H100", "A100-80GB"}, clouds: []string{"gcp", "azure"}, spot: true, sortBy: "tflop", output: "json"}, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	var out pricesOutput
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Offers) == 0 {
		t.Fatal("no offers")
	}
	for i, r := range out.Offers {
		if r.Cloud == "aws" || (r.GPU != "H100" && r.GPU != "A100-80GB") || r.SpotPerHour == nil {
			t.Errorf("row %d does not match the filter: %+v", i, r)
		}
		if i > 0 && r.PerTFLOPHour < out.Offers[i-1].PerTFLOPHour {
			t.Errorf("rows not sorted by $/TFLOP-hour at %d", i)
		}
		if r.SpotSignal == nil || !r.SpotSignal.Default {
			t.Errorf("row %d: snapshot spot signal should be marked default: %+v", i, r.SpotSignal)
		}
	}
	if out.AgeHours != 36 {
		t.Errorf("age_hours = %v, want 36", out.AgeHours)
	}
}

func TestPricesCLIErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"prices", "--gpu", "A100-80"}, 2, `unknown GPU "A100-80"; did you mean "A100-80GB"?`},
		{[]string{"prices", "--cloud", "ibm"}, 2, `unknown cloud "ibm"`},
		{[]string{"prices", "--output", "xml"}, 2, `--output "xml": want table, json or csv`},
		{[]string{"prices", "--sort", "name"}, 2, `--sort "name"`},
		{[]string{"prices", "--spot", "--on-demand"}, 2, "exclude each other"},
		{[]string{"prices", "--bogus"}, 2, "unknown flag"},
		{[]string{"nosuchcmd"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	code, stdout, _ := runCLI(t, "prices", "--gpu", "H200", "--limit", "3")
	if code != 0 || !strings.Contains(stdout, "H200") {
		t.Errorf("prices --gpu H200: exit %d\n%s", code, stdout)
	}
}
