package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

var update = flag.Bool("update", false, "rewrite golden files")

const project = "gpubroker-test"

// API paths the SDK's REST clients request.
const (
	pathAccels   = "/compute/v1/projects/" + project + "/aggregated/acceleratorTypes"
	pathMachines = "/compute/v1/projects/" + project + "/aggregated/machineTypes"
	pathSKUs     = "/v1/services/" + ComputeEngineService + "/skus"
)

// fault is one scripted misbehaviour of the fake API.
type fault = string

const (
	fThrottle  fault = "429"       // RESOURCE_EXHAUSTED
	fRateLimit fault = "403-rate"  // 403 rateLimitExceeded
	fUnavail   fault = "503"       // UNAVAILABLE
	fNotFound  fault = "404"       // NOT_FOUND, not retried
	fTruncated fault = "truncated" // body cut off mid-way
	fMalformed fault = "malformed" // 200 with a body that is not JSON
	fHang      fault = "hang"      // no answer until the client gives up
)

// fakeGCP answers the Compute Engine and Cloud Billing REST APIs from
// testdata, page by page, with scripted faults.
type fakeGCP struct {
	t  *testing.T
	mu sync.Mutex
	// pages maps an API path to its pages; a page's index is its
	// pageToken's position (page 0 has no token).
	pages map[string][]string
	// faults are served, in order, before the path answers normally; a
	// fault written "persist:<fault>" is served for ever.
	faults map[string][]fault
	calls  map[string]int
}

func newFakeGCP(t *testing.T) *fakeGCP {
	return &fakeGCP{t: t,
		pages: map[string][]string{
			pathAccels:   {"accelerator-types-1.json", "accelerator-types-2.json"},
			pathMachines: {"machine-types-1.json", "machine-types-2.json"},
			pathSKUs:     {"skus-1.json", "skus-2.json"},
		},
		faults: map[string][]fault{}, calls: map[string]int{}}
}

var filterRe = regexp.MustCompile(`^name eq "([^"]+)"$`)

// tokens are the nextPageToken values in testdata, in page order.
var tokens = map[string]int{"CgVhY2NlbDI=": 1, "CgVtYWNoMg==": 1, "CiBza3VzLXBhZ2UtMg": 1}

func (f *fakeGCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls[r.URL.Path]++
	var ft fault
	if q := f.faults[r.URL.Path]; len(q) > 0 {
		var persist bool
		ft, persist = strings.CutPrefix(q[0], "persist:")
		if !persist {
			f.faults[r.URL.Path] = q[1:]
		}
	}
	pages := f.pages[r.URL.Path]
	f.mu.Unlock()

	if r.Method != http.MethodGet {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if pages == nil {
		gcpError(w, http.StatusNotFound, "NOT_FOUND", "notFound", "The resource '"+r.URL.Path+"' was not found")
		return
	}
	if r.URL.Path == pathMachines {
		// Compute filters: `field eq "RE2 literal"` matching the whole field.
		m := filterRe.FindStringSubmatch(r.URL.Query().Get("filter"))
		if m == nil {
			gcpError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid", "Invalid value for field 'filter': '"+r.URL.Query().Get("filter")+"'. Invalid list filter expression.")
			return
		}
		if _, err := regexp.Compile("^(?:" + m[1] + ")$"); err != nil {
			gcpError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid", "Invalid regular expression in filter: "+err.Error())
			return
		}
	}
	if r.URL.Path == pathSKUs && r.URL.Query().Get("currencyCode") != "USD" {
		gcpError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "badRequest", "currencyCode must be USD in this fake")
		return
	}
	page := 0
	if tok := r.URL.Query().Get("pageToken"); tok != "" {
		p, ok := tokens[tok]
		if !ok {
			gcpError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid", "Invalid value for field 'pageToken': '"+tok+"'.")
			return
		}
		page = p
	}
	body, err := os.ReadFile(filepath.Join("testdata", pages[page]))
	if err != nil {
		f.t.Errorf("fake: %v", err)
		http.Error(w, err.Error(), 500)
		return
	}
	switch ft {
	case fThrottle:
		gcpError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'")
		return
	case fRateLimit:
		gcpError(w, http.StatusForbidden, "PERMISSION_DENIED", "rateLimitExceeded", "Rate Limit Exceeded")
		return
	case fUnavail:
		gcpError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "backendError", "The service is currently unavailable.")
		return
	case fNotFound:
		gcpError(w, http.StatusNotFound, "NOT_FOUND", "notFound", "The resource 'projects/"+project+"' was not found")
		return
	case fMalformed:
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"items": {"zones/us-central1-a": [oops`))
		return
	case fTruncated:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:len(body)/2])
		return // the server closes the connection: the client reads an unexpected EOF
	case fHang:
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Write(body)
}

// gcpError writes Google's JSON error envelope.
func gcpError(w http.ResponseWriter, code int, status, reason, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": code, "message": msg, "status": status,
		"errors": []map[string]string{{"message": msg, "domain": "global", "reason": reason}},
	}})
}

var testNow = time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)

func newTestSource(t *testing.T, f *fakeGCP, mod func(*Config)) *Source {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	hc := srv.Client()
	hc.Timeout = 2 * time.Second
	cfg := Config{
		Project: project, HTTPClient: hc, Now: func() time.Time { return testNow },
		ComputeEndpoint: srv.URL, BillingEndpoint: srv.URL, WithoutAuthentication: true,
		Retry: Retry{Attempts: 4, Initial: time.Millisecond, Max: 5 * time.Millisecond},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkGolden(t *testing.T, name string, offers []pricing.Offer) {
	t.Helper()
	got, err := json.MarshalIndent(offers, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("offers differ from %s (rerun with -update after checking):\n%s", path, got)
	}
}

func TestOffers(t *testing.T) {
	tests := []struct {
		name       string
		query      providers.Query
		cfgRegions []string
		golden     string
		faults     map[string][]fault
		// calls each path must have received (pages plus retries).
		calls map[string]int
	}{
		{name: "all pages", golden: "offers.golden.json",
			calls: map[string]int{pathAccels: 2, pathMachines: 2, pathSKUs: 2}},
		{name: "one region", query: providers.Query{Regions: []string{"europe-west4"}}, golden: "offers-europe-west4.golden.json"},
		{name: "regions from config", cfgRegions: []string{"europe-west4"}, golden: "offers-europe-west4.golden.json"},
		{name: "one GPU model", query: providers.Query{GPUs: []pricing.GPUModel{pricing.T4}}, golden: "offers-t4.golden.json"},
		{name: "429 RESOURCE_EXHAUSTED then OK", golden: "offers.golden.json",
			faults: map[string][]fault{pathSKUs: {fThrottle, fThrottle}},
			calls:  map[string]int{pathSKUs: 4}},
		{name: "403 rateLimitExceeded then OK", golden: "offers.golden.json",
			faults: map[string][]fault{pathAccels: {fRateLimit}},
			calls:  map[string]int{pathAccels: 3}},
		{name: "503 then OK", golden: "offers.golden.json",
			faults: map[string][]fault{pathMachines: {fUnavail}},
			calls:  map[string]int{pathMachines: 3}},
		{name: "truncated body then OK", golden: "offers.golden.json",
			faults: map[string][]fault{pathSKUs: {fTruncated}},
			calls:  map[string]int{pathSKUs: 3}},
		{name: "timeout then OK", golden: "offers.golden.json",
			faults: map[string][]fault{pathAccels: {fHang}},
			calls:  map[string]int{pathAccels: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGCP(t)
			f.faults = tc.faults
			s := newTestSource(t, f, func(c *Config) {
				c.Regions = tc.cfgRegions
				if tc.name == "timeout then OK" {
					c.HTTPClient.Timeout = 300 * time.Millisecond
				}
			})
			offers, err := s.Offers(context.Background(), tc.query)
			if err != nil {
				t.Fatalf("Offers: %v", err)
			}
			for _, o := range offers {
				if err := o.Validate(); err != nil {
					t.Errorf("invalid offer: %v", err)
				}
			}
			checkGolden(t, tc.golden, offers)
			for p, n := range tc.calls {
				if f.calls[p] != n {
					t.Errorf("%s: %d requests, want %d", p, f.calls[p], n)
				}
			}
		})
	}
}

// TestOfferPrice checks one price by hand, as GCP's pricing page computes it.
func TestOfferPrice(t *testing.T) {
	s := newTestSource(t, newFakeGCP(t), nil)
	offers, err := s.Offers(context.Background(), providers.Query{Regions: []string{"us-central1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{
		// 12 vCPU × 0.031611 + 85 GiB × 0.004237 + 1 × 2.933908
		"a2-highgpu-1g": {3.673385, 12*0.00949 + 85*0.00127 + 1.1},
		// 8 × 0.031611 + 30 × 0.004237 + 2 × 2.48 (n1-standard-16 for 2 V100s would be 16 vCPU; 1 V100 gets n1-standard-8)
		"n1-standard-8+nvidia-tesla-v100x1": {8*0.031611 + 30*0.004237 + 2.48, 8*0.006655 + 30*0.000892 + 0.992},
		// A3 Mega hosts are billed by their own "A3Plus" core and RAM SKUs,
		// not A3 High's; no Spot SKU in the fixture: on-demand only.
		"a3-megagpu-8g": {208*0.026924 + 1872*0.002344 + 8*10.42, 0},
	}
	seen := 0
	for _, o := range offers {
		w, ok := want[o.InstanceType]
		if !ok {
			continue
		}
		seen++
		if !near(o.OnDemandPrice, w[0]) || !near(o.SpotPrice, w[1]) {
			t.Errorf("%s: on-demand %v spot %v, want %v %v", o.InstanceType, o.OnDemandPrice, o.SpotPrice, w[0], w[1])
		}
		if o.Source != SourceName || !o.ObservedAt.Equal(testNow) || o.Region != "us-central1" || !strings.HasPrefix(o.Zone, "us-central1-") {
			t.Errorf("%s: source %q observed %v region %q zone %q", o.InstanceType, o.Source, o.ObservedAt, o.Region, o.Zone)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d shapes", seen, len(want))
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-6 && d > -1e-6 }

func TestOffersFailures(t *testing.T) {
	regions := []string{"us-central1", "europe-west4"}
	tests := []struct {
		name    string
		faults  map[string][]fault
		pages   map[string][]string
		wantErr string
		// failed regions; offers must still come for the others.
		failed     []string
		wantOffers bool
		calls      map[string]int
	}{
		{name: "persistent 429", faults: map[string][]fault{pathSKUs: {"persist:429"}},
			wantErr: "Error 429", failed: regions, calls: map[string]int{pathSKUs: 4}},
		{name: "persistent 503", faults: map[string][]fault{pathMachines: {"persist:503"}},
			wantErr: "503", failed: regions, calls: map[string]int{pathMachines: 4}},
		{name: "malformed body is not retried", faults: map[string][]fault{pathAccels: {fMalformed}},
			wantErr: "accelerator types", failed: regions, calls: map[string]int{pathAccels: 1}},
		{name: "404 is not retried", faults: map[string][]fault{pathSKUs: {fNotFound}},
			wantErr: "SKUs", failed: regions, calls: map[string]int{pathSKUs: 1}},
		{name: "unreachable zone fails its region only",
			pages:   map[string][]string{pathMachines: {"machine-types-1.json", "machine-types-2-unreachable.json"}},
			wantErr: "europe-west4-a not listed: UNREACHABLE", failed: []string{"europe-west4"}, wantOffers: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGCP(t)
			f.faults = tc.faults
			for p, pg := range tc.pages {
				f.pages[p] = pg
			}
			s := newTestSource(t, f, nil)
			offers, err := s.Offers(context.Background(), providers.Query{Regions: regions})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			var failed []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var re *providers.RegionError
				if !errors.As(e, &re) || re.Cloud != pricing.GCP {
					t.Fatalf("error %v is not a GCP RegionError", e)
				}
				failed = append(failed, re.Region)
			}
			if fmt.Sprint(failed) != fmt.Sprint(tc.failed) {
				t.Errorf("failed regions %v, want %v", failed, tc.failed)
			}
			if tc.wantOffers != (len(offers) > 0) {
				t.Errorf("%d offers; want some: %v", len(offers), tc.wantOffers)
			}
			for _, o := range offers {
				for _, r := range tc.failed {
					if o.Region == r {
						t.Errorf("offer %s from failed region", o.Key())
					}
				}
			}
			for p, n := range tc.calls {
				if f.calls[p] != n {
					t.Errorf("%s: %d requests, want %d", p, f.calls[p], n)
				}
			}
		})
	}
}

func TestOffersContextCanceled(t *testing.T) {
	f := newFakeGCP(t)
	f.faults = map[string][]fault{pathSKUs: {"persist:hang"}}
	s := newTestSource(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Offers(ctx, providers.Query{}); err == nil {
		t.Fatal("no error after the context ended")
	}
}

func TestNewWithoutCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(dir, "missing.json"))
	t.Setenv("HOME", dir)
	t.Setenv("CLOUDSDK_CONFIG", dir)
	_, err := New(context.Background(), Config{Project: project})
	if !errors.Is(err, providers.ErrNoCredentials) {
		t.Fatalf("New: %v, want ErrNoCredentials", err)
	}
}

// TestOffersEveryFamily prices one shape of every GPU family GCP sells from
// the catalog's real SKU spellings (testdata/families, written by gen.py):
// N1 with T4, P4, P100 and V100; G2 (L4); A2 (A100 40 GB and 80 GB); A3
// High, Mega (its host SKUs are "A3Plus", its GPU "H100 80GB Plus"), Edge
// and Ultra (the H200 SKU has no "Nvidia"); A4 (B200, sold by the GPU
// slice) and G4 (RTX PRO 6000, a SKU without the word "GPU").
func TestOffersEveryFamily(t *testing.T) {
	f := newFakeGCP(t)
	f.pages = map[string][]string{
		pathAccels:   {"families/accelerator-types.json"},
		pathMachines: {"families/machine-types.json"},
		pathSKUs:     {"families/skus.json"},
	}
	s := newTestSource(t, f, nil)
	offers, err := s.Offers(context.Background(), providers.Query{})
	if err != nil {
		t.Fatal(err)
	}
	n1 := func(vcpu, gib, gpu float64) float64 { return vcpu*0.031611 + gib*0.004237 + gpu }
	a3 := func(core, ram, gpu float64) float64 { return 208*core + 1872*ram + 8*gpu }
	want := map[string]struct {
		gpu      pricing.GPUModel
		od, spot float64
	}{
		"n1-standard-8+nvidia-tesla-t4x1":   {pricing.T4, n1(8, 30, 0.35), 8*0.006655 + 30*0.000892 + 0.14},
		"n1-standard-8+nvidia-tesla-p4x1":   {pricing.P4, n1(8, 30, 0.60), 8*0.006655 + 30*0.000892 + 0.24},
		"n1-standard-8+nvidia-tesla-p100x1": {pricing.P100, n1(8, 30, 1.46), 0},
		"n1-standard-8+nvidia-tesla-v100x1": {pricing.V100, n1(8, 30, 2.48), 0},
		"g2-standard-4":                     {pricing.L4, 4*0.024988 + 16*0.002927 + 0.56004, 0},
		"a2-highgpu-1g":                     {pricing.A100_40, 12*0.031611 + 85*0.004237 + 2.933908, 0},
		"a2-ultragpu-1g":                    {pricing.A100_80, 12*0.031611 + 170*0.004237 + 3.92808, 0},
		"a3-highgpu-8g":                     {pricing.H100, a3(0.029563, 0.002478, 9.79655), a3(0.00887, 0.000743, 2.25)},
		"a3-edgegpu-8g":                     {pricing.H100, a3(0.029563, 0.002478, 9.79655), a3(0.00887, 0.000743, 2.25)},
		// A3Plus host rates, not A3 High's; no Mega Spot SKU.
		"a3-megagpu-8g":  {pricing.H100, a3(0.026924, 0.002344, 10.344276), 0},
		"a3-ultragpu-8g": {pricing.H200, 224*0.028096 + 2952*0.002411 + 8*9.31174, 224*0.01124 + 2952*0.000964 + 8*3.72},
		// 8 slices; the DWS Calendar Mode SKU is not on-demand.
		"a4-highgpu-8g":  {pricing.B200, 8 * 16.11, 8 * 5.6},
		"g4-standard-48": {pricing.RTXPro6000, 48*0.0245 + 180*0.0029 + 2.25, 0},
	}
	got := map[string]pricing.Offer{}
	for _, o := range offers {
		got[o.InstanceType] = o
	}
	for it, w := range want {
		o, ok := got[it]
		if !ok {
			t.Errorf("%s: no offer", it)
			continue
		}
		if o.GPU != w.gpu || !near(o.OnDemandPrice, w.od) || !near(o.SpotPrice, w.spot) {
			t.Errorf("%s: %s on-demand %v spot %v; want %s %v %v", it, o.GPU, o.OnDemandPrice, o.SpotPrice, w.gpu, w.od, w.spot)
		}
	}
	checkGolden(t, "offers-families.golden.json", offers)
}
