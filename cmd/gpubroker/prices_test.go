//go:build !agentonly

package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
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

// TestPricesFlagValidation: values the query would otherwise accept
// silently are usage errors (exit 2) that say what would be right.
func TestPricesFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--region", "["}, `--region "[": syntax error in pattern`},
		{[]string{"--limit", "-1"}, "--limit -1: want 0"},
		{[]string{"--max-price", "-5"}, "--max-price -5: want 0"},
		{[]string{"--min-gpu-memory", "-1"}, "--min-gpu-memory -1"},
		{[]string{"--min-gpus", "-2"}, "--min-gpus -2"},
		{[]string{"--db", filepath.Join(t.TempDir(), "missing.db")}, "no such database file"},
		{[]string{"--output", "yaml"}, `--output "yaml": want table, json or csv`},
	} {
		_, errOut, code := execute(t, newPricesCmd(), append([]string{"prices"}, tc.args...)...)
		if code != exitUsageError || !strings.Contains(errOut, tc.want) {
			t.Errorf("prices %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestPricesSaysDateAndFlags: the snapshot's unknown pricing date and the
// sanity flags show in table and JSON output.
func TestPricesSaysDateAndFlags(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	out, _, code := execute(t, newPricesCmd(), "prices", "--gpu", "H200", "--cloud", "aws", "--region", "us-west-2", "--spot", "--output", "json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var got pricesOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.PricesDate, "unknown for ") || got.UndatedOffers != len(got.Offers) || len(got.Offers) == 0 {
		t.Errorf("prices_date %q, undated %d of %d", got.PricesDate, got.UndatedOffers, len(got.Offers))
	}
	flagged := false
	for _, r := range got.Offers {
		if r.InstanceType == "p5e.48xlarge" && len(r.Issues) == 1 && r.Issues[0] == pricing.NoOnDemand && r.Stale && r.DateUnknown {
			flagged = true
		}
	}
	if !flagged {
		t.Errorf("p5e.48xlarge (spot only) not flagged: %s", out)
	}
}
