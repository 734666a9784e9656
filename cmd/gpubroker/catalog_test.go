//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/refresh"
)

// fakeClouds is a registry of fake clouds: AWS answering for us-east-1,
// GCP without credentials, Azure failing in eastus.
func fakeClouds(t *testing.T, spot float64) (refresh.Registry, *fake.Source) {
	t.Helper()
	aws, _ := fake.New(t.Context(), fake.Config{Cloud: pricing.AWS})
	aws.SetOffers("us-east-1", pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
		GPU: pricing.H100, GPUCount: 8, GPUMemoryGiB: 80, VCPUs: 192, MemoryGiB: 2048, OnDemandPrice: 55.04, SpotPrice: spot})
	az, _ := fake.New(t.Context(), fake.Config{Cloud: pricing.Azure})
	az.FailRegion("eastus", context.DeadlineExceeded)
	return refresh.Registry{
		pricing.AWS: func(context.Context, refresh.SourceConfig) (refresh.OfferSource, error) { return aws, nil },
		pricing.GCP: func(ctx context.Context, _ refresh.SourceConfig) (refresh.OfferSource, error) {
			return fake.New(ctx, fake.Config{Cloud: pricing.GCP, NoCredentials: true})
		},
		pricing.Azure: func(context.Context, refresh.SourceConfig) (refresh.OfferSource, error) { return az, nil },
	}, aws
}

func execute(t *testing.T, cmd *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	root := &cobra.Command{Use: "gpubroker", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(cmd)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := exitOK
	if err := root.ExecuteContext(t.Context()); err != nil {
		errb.WriteString("gpubroker: " + err.Error() + "\n")
		code = exitUsageError
		if ee, ok := err.(*exitError); ok {
			code = ee.code
		}
	}
	return out.String(), errb.String(), code
}

func TestCatalogRefreshThenPrices(t *testing.T) {
	db := filepath.Join(t.TempDir(), "g.db")
	reg, _ := fakeClouds(t, 21.5)
	out, errOut, code := execute(t, newCatalogCmd(reg), "catalog", "refresh", "--db", db, "--region", "us-east-1,us-central1,eastus")
	if code != exitFailure {
		t.Errorf("exit code %d, want 1 (azure eastus failed)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, s := range []string{
		"aws    us-east-1  refreshed  1 offers (1 new), 0 price changes",
		"gcp: skipped: no credentials; run 'gcloud auth application-default login'",
		"azure  eastus     failed     context deadline exceeded; kept 0 stored offers",
		"Store: " + db,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("refresh output lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(errOut, `msg="region refreshed" cloud=aws region=us-east-1`) || !strings.Contains(errOut, "refresh incomplete") {
		t.Errorf("want log lines (not a terminal) and the failure on stderr:\n%s", errOut)
	}

	// A second refresh with a new spot price records one change.
	reg, _ = fakeClouds(t, 19.0)
	out, _, _ = execute(t, newCatalogCmd(reg), "catalog", "refresh", "--db", db, "--cloud", "aws", "--region", "us-east-1")
	if !strings.Contains(out, "1 offers (0 new), 1 price changes") {
		t.Errorf("second refresh:\n%s", out)
	}

	out, errOut, code = execute(t, newPricesCmd(), "prices", "--db", db, "--gpu", "H100", "--cloud", "aws", "--region", "us-east-1", "--output", "json")
	if code != exitOK {
		t.Fatalf("prices: %d %s", code, errOut)
	}
	var got pricesOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.CatalogSource, "store "+db+" (1 offers) over the embedded snapshot") {
		t.Errorf("catalog source %q", got.CatalogSource)
	}
	if len(got.Offers) != 1 || got.Offers[0].InstanceType != "p5.48xlarge" || *got.Offers[0].SpotPerHour != 19.0 || got.Offers[0].Stale {
		t.Errorf("prices from the store: %+v", got.Offers)
	}

	out, _, code = execute(t, newPricesCmd(), "prices", "--db", db, "--history", "aws/us-east-1/us-east-1a/p5.48xlarge")
	if code != exitOK {
		t.Fatalf("history exit %d", code)
	}
	for _, s := range []string{`aws/us-east-1/us-east-1a/p5\.48xlarge +on-demand +\S+ +55\.0400 +first`, `spot +\S+ +21\.5000 +first`,
		`spot +\S+ +19\.0000 +-11\.6%`, "1 offers;"} {
		if !regexp.MustCompile(s).MatchString(out) {
			t.Errorf("history lacks %q:\n%s", s, out)
		}
	}
	out, _, _ = execute(t, newPricesCmd(), "prices", "--db", db, "--history", "--gpu", "H100", "--cloud", "aws", "--output", "json")
	var hist struct {
		Offers []historySeries `json:"offers"`
	}
	if err := json.Unmarshal([]byte(out), &hist); err != nil {
		t.Fatal(err)
	}
	var stored *historySeries
	for i := range hist.Offers {
		if hist.Offers[i].Key == "aws/us-east-1/us-east-1a/p5.48xlarge" {
			stored = &hist.Offers[i]
		}
	}
	if stored == nil || len(stored.Points) != 3 {
		t.Errorf("history by filters: %+v", hist.Offers)
	}
}

func TestPricesMarksStaleStoredOffers(t *testing.T) {
	db := filepath.Join(t.TempDir(), "g.db")
	reg, _ := fakeClouds(t, 21.5)
	if _, errOut, code := execute(t, newCatalogCmd(reg), "catalog", "refresh", "--db", db, "--cloud", "aws", "--region", "us-east-1"); code != exitOK {
		t.Fatalf("refresh: %s", errOut)
	}
	out, _, _ := execute(t, newPricesCmd(), "prices", "--db", db, "--gpu", "H100", "--region", "us-east-1", "--cloud", "aws", "--stale-after", "1ns")
	if !strings.Contains(out, "p5.48xlarge (stale)") || !strings.Contains(out, "Offers marked (stale)") {
		t.Errorf("stale offers not marked:\n%s", out)
	}
}

func TestPricesWithoutStoreUsesSnapshot(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	out, _, code := execute(t, newPricesCmd(), "prices", "--gpu", "H100", "--limit", "1")
	if code != exitOK || !strings.Contains(out, "Catalog: embedded snapshot, prices of unknown date copied 2026-12-02") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if entries, _ := os.ReadDir(os.Getenv("XDG_DATA_HOME")); len(entries) != 0 {
		t.Errorf("prices created a database: %v", entries)
	}
	_, errOut, code := execute(t, newPricesCmd(), "prices", "--history", "aws/us-east-1//p5.48xlarge")
	if code != exitFailure || !strings.Contains(errOut, "run 'gpubroker catalog refresh' first") {
		t.Errorf("history without a store: %d %s", code, errOut)
	}
}

func TestCatalogRefreshUsageErrors(t *testing.T) {
	reg, _ := fakeClouds(t, 1)
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	_ = os.WriteFile(pol, []byte("clouds: [aws, ibm]\n"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--cloud", "ibm"}, `unknown cloud "ibm"`},
		{[]string{"--region", "US East"}, "is not an AWS"},
		{[]string{"--concurrency", "0"}, "want 1 or more"},
		{[]string{"--gpu", "H1000"}, `unknown GPU "H1000"`},
		{[]string{"-f", pol}, `unknown cloud "ibm"`},
		{[]string{"-f", filepath.Join(dir, "missing.yaml")}, "no such file"},
	}
	for _, c := range cases {
		args := append([]string{"catalog", "refresh", "--db", filepath.Join(dir, "g.db")}, c.args...)
		_, errOut, code := execute(t, newCatalogCmd(reg), args...)
		if code != exitUsageError || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestCatalogRefreshFromPolicy(t *testing.T) {
	reg, aws := fakeClouds(t, 1)
	aws.SetOffers("us-east-2")
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	_ = os.WriteFile(pol, []byte("clouds: [aws]\nregions: [\"us-east-*\"]\nworkloads:\n  - {name: svc, kind: inference, replicas: {min: 1}}\n"), 0o600)
	out, errOut, code := execute(t, newCatalogCmd(reg), "catalog", "refresh", "--db", filepath.Join(dir, "g.db"), "-f", pol)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var asked []string
	for _, q := range aws.Queries() {
		asked = append(asked, q.Regions...)
	}
	if strings.Join(asked, ",") != "us-east-1,us-east-2" && strings.Join(asked, ",") != "us-east-2,us-east-1" {
		t.Errorf("asked for %v, want us-east-1 and us-east-2", asked)
	}
	if !strings.Contains(out, "us-east-2  empty") {
		t.Errorf("output:\n%s", out)
	}
}

func TestCatalogCheck(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	out, _, code := execute(t, newCatalogCmd(nil), "catalog", "check", "--output", "json", "--limit", "0")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	var r checkReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range r.Counts {
		total += n
	}
	if r.Offers < 1000 || r.Flagged == 0 || len(r.Listed) != r.Flagged || total < r.Flagged ||
		r.ByCloud["aws"][pricing.NoOnDemand] != r.Counts[pricing.NoOnDemand] {
		t.Errorf("report %+v", r)
	}
	table, _, _ := execute(t, newCatalogCmd(nil), "catalog", "check", "--limit", "2")
	if !strings.Contains(table, "spot-not-below-on-demand") || !strings.Contains(table, "more (--limit 0 lists all)") {
		t.Errorf("table:\n%s", table)
	}
	if _, errOut, code := execute(t, newCatalogCmd(nil), "catalog", "check", "--limit", "-3"); code != exitUsageError || !strings.Contains(errOut, "--limit -3") {
		t.Errorf("exit %d %s", code, errOut)
	}
}

// TestCatalogRefreshWithoutCredentials: one short line per skipped cloud,
// no SDK chain, and no database left behind when nothing was saved.
func TestCatalogRefreshWithoutCredentials(t *testing.T) {
	reg := refresh.Registry{}
	for _, c := range pricing.Clouds() {
		reg[c] = func(ctx context.Context, _ refresh.SourceConfig) (refresh.OfferSource, error) {
			return fake.New(ctx, fake.Config{Cloud: c, NoCredentials: true})
		}
	}
	dir := filepath.Join(t.TempDir(), "new")
	db := filepath.Join(dir, "g.db")
	out, errOut, code := execute(t, newCatalogCmd(reg), "catalog", "refresh", "--db", db, "--region", "us-east-1,us-central1,eastus")
	if code != exitFailure {
		t.Errorf("exit %d, want 1 (nothing refreshed)", code)
	}
	for _, c := range []string{"aws", "gcp", "azure"} {
		if n := strings.Count(out, c+": skipped: no credentials; "); n != 1 {
			t.Errorf("%s: %d skip lines, want 1:\n%s", c, n, out)
		}
	}
	if strings.Contains(out, "CLOUD  REGION") || strings.Contains(errOut, "cloud skipped") || strings.Contains(out, "(simulated)") {
		t.Errorf("skips said more than once:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("refresh that saved nothing left %s behind (%v)", dir, err)
	}
	if !strings.Contains(out, "no database was created") {
		t.Errorf("stdout:\n%s", out)
	}
}

// TestCatalogCheckGolden pins the full report on the embedded snapshot.
func TestCatalogCheckGolden(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, output string }{{"catalog-check.txt", "table"}, {"catalog-check.json", "json"}} {
		var b bytes.Buffer
		if err := writeCatalogCheck(&b, cat, f.output, 0); err != nil {
			t.Fatal(err)
		}
		golden(t, f.name, b.Bytes())
	}
}
