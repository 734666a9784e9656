package azure

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

var update = flag.Bool("update", false, "rewrite golden files")

const subscription = "00000000-0000-0000-0000-00000000cafe"

// Routes of the fake, named for fault scripts and call counts.
const (
	rSKUs   = "skus"
	rRetail = "retail"
	rGraph  = "graph"
)

// fakeAzure answers ARM (resource SKUs, Resource Graph) and the Retail
// Prices API from testdata, with nextLink / NextPageLink / $skipToken
// pointing back at itself, and scripted faults.
type fakeAzure struct {
	t    *testing.T
	base string
	mu   sync.Mutex
	// pages per route and scope (a region, or "all" for unfiltered SKUs).
	pages map[string]map[string][]string
	// faults per route, served in order before normal answers; a fault
	// written "persist:<fault>" is served for ever. Faults may be scoped to
	// one region as "<fault>@<region>".
	faults map[string][]string
	calls  map[string]int
	// queries holds Resource Graph queries received.
	queries []string
}

func newFakeAzure(t *testing.T) *fakeAzure {
	return &fakeAzure{t: t,
		pages: map[string]map[string][]string{
			rSKUs: {
				"eastus":     {"skus-eastus-1.json", "skus-eastus-2.json"},
				"westeurope": {"skus-westeurope.json"},
				"all":        {"skus-eastus-1.json", "skus-eastus-2.json", "skus-westeurope.json"},
			},
			rRetail: {
				"eastus":     {"retail-eastus-1.json", "retail-eastus-2.json"},
				"westeurope": {"retail-westeurope.json"},
			},
			rGraph: {"all": {"graph-1.json", "graph-2.json"}},
		},
		faults: map[string][]string{}, calls: map[string]int{}}
}

var (
	locFilter    = regexp.MustCompile(`^location eq '([a-z0-9]+)'$`)
	retailFilter = regexp.MustCompile(`^serviceName eq 'Virtual Machines' and armRegionName eq '([a-z0-9]+)' and priceType eq 'Consumption'$`)
)

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var route, scope, pageArg string
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/subscriptions/"+subscription+"/providers/Microsoft.Compute/skus":
		route, scope, pageArg = rSKUs, "all", q.Get("$skiptoken")
		if fl := q.Get("$filter"); fl != "" {
			m := locFilter.FindStringSubmatch(fl)
			if m == nil {
				armError(w, 400, "InvalidFilter", "The filter '"+fl+"' is not supported.")
				return
			}
			scope = m[1]
		}
		if q.Get("api-version") == "" {
			armError(w, 400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
			return
		}
	case r.Method == http.MethodPost && r.URL.Path == "/providers/Microsoft.ResourceGraph/resources":
		route, scope = rGraph, "all"
		var req struct {
			Query         string   `json:"query"`
			Subscriptions []string `json:"subscriptions"`
			Options       struct {
				SkipToken    string `json:"$skipToken"`
				ResultFormat string `json:"resultFormat"`
			} `json:"options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasPrefix(req.Query, "SpotResources") ||
			len(req.Subscriptions) != 1 || req.Subscriptions[0] != subscription {
			armError(w, 400, "BadRequest", fmt.Sprintf("Please provide below info when asking for support: query %q: %v", req.Query, err))
			return
		}
		f.mu.Lock()
		f.queries = append(f.queries, req.Query)
		f.mu.Unlock()
		if req.Options.SkipToken != "" {
			pageArg = "1"
		}
	case r.Method == http.MethodGet && r.URL.Path == "/api/retail/prices":
		route, pageArg = rRetail, q.Get("$skip")
		m := retailFilter.FindStringSubmatch(q.Get("$filter"))
		if m == nil {
			http.Error(w, `{"Error":{"Code":"BadRequest","Message":"Invalid OData parameters supplied"}}`, 400)
			return
		}
		scope = m[1]
		if r.Header.Get("Authorization") != "" {
			f.t.Errorf("retail prices request carries credentials")
		}
	default:
		armError(w, 404, "NotFound", "No route for "+r.Method+" "+r.URL.Path)
		return
	}
	if route != rRetail && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		armError(w, 401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
		return
	}

	f.mu.Lock()
	f.calls[route+"/"+scope]++
	ft := ""
	qs := f.faults[route]
	for i, x := range qs {
		name, persist := strings.CutPrefix(x, "persist:")
		name, only, scoped := strings.Cut(name, "@")
		if scoped && only != scope {
			continue
		}
		ft = name
		if !persist {
			f.faults[route] = append(qs[:i:i], qs[i+1:]...)
		}
		break
	}
	pages := f.pages[route][scope]
	f.mu.Unlock()

	switch ft {
	case "429":
		// ARM and the Retail Prices API both throttle with 429 and Retry-After.
		w.Header().Set("Retry-After", "1")
		armError(w, http.StatusTooManyRequests, "TooManyRequests", "The request is being throttled.")
		return
	case "429-now":
		w.Header().Set("Retry-After", "0")
		armError(w, http.StatusTooManyRequests, "TooManyRequests", "The request is being throttled.")
		return
	case "503":
		armError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "The server is currently unable to handle the request.")
		return
	case "500":
		armError(w, http.StatusInternalServerError, "InternalServerError", "Encountered internal server error.")
		return
	case "hang":
		<-r.Context().Done()
		return
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"value": [{"name": "Standard_NC24ads_A100_v4", "capabilities": [`)
		return
	}
	if len(pages) == 0 {
		pages = []string{""} // a scope with nothing: an empty page
	}
	page := 0
	if pageArg != "" {
		n, err := strconv.Atoi(pageArg)
		if err != nil || n < 0 || n >= len(pages) {
			armError(w, 400, "InvalidSkipToken", "The skip token '"+pageArg+"' is not valid.")
			return
		}
		page = n
	}
	var body []byte
	if pages[page] == "" {
		body = map[string][]byte{rSKUs: []byte(`{"value":[]}`), rRetail: []byte(`{"BillingCurrency":"USD","Items":[],"NextPageLink":null,"Count":0}`)}[route]
	} else {
		var err error
		if body, err = os.ReadFile(filepath.Join("testdata", pages[page])); err != nil {
			f.t.Errorf("fake: %v", err)
		}
	}
	next := "null"
	if page+1 < len(pages) {
		u := *r.URL
		u.Scheme, u.Host = "http", strings.TrimPrefix(f.base, "http://")
		nq := u.Query()
		switch route {
		case rSKUs:
			nq.Set("$skiptoken", strconv.Itoa(page+1))
		case rRetail:
			nq.Set("$skip", strconv.Itoa(page+1))
		}
		u.RawQuery = nq.Encode()
		next = strconv.Quote(u.String())
	}
	body = []byte(strings.ReplaceAll(string(body), `"{{NEXT}}"`, next))
	if ft == "truncated" {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body[:len(body)/3])
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Write(body)
}

// armError writes ARM's error envelope.
func armError(w http.ResponseWriter, code int, errCode, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("x-ms-failure-cause", "gateway")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": errCode, "message": msg}})
}

var testNow = time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)

// testConfig points every API at a local server.
func testConfig(base string, hc *http.Client) Config {
	return Config{
		SubscriptionID: subscription, HTTPClient: hc, Now: func() time.Time { return testNow },
		Credential: &azfake.TokenCredential{},
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: base, Audience: "https://management.azure.com"},
			},
		},
		RetailPricesURL:                 base + "/api/retail/prices",
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: 3, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Second},
	}
}

func newTestSource(t *testing.T, f *fakeAzure, mod func(*Config)) *Source {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	f.base = srv.URL
	hc := srv.Client()
	hc.Timeout = 2 * time.Second
	cfg := testConfig(srv.URL, hc)
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
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

var both = []string{"eastus", "westeurope"}

func TestOffers(t *testing.T) {
	tests := []struct {
		name    string
		query   providers.Query
		cfgRegs []string
		golden  string
		faults  map[string][]string
		timeout time.Duration
		calls   map[string]int
	}{
		{name: "two regions, all pages", query: providers.Query{Regions: both}, golden: "offers.golden.json",
			calls: map[string]int{"skus/eastus": 2, "skus/westeurope": 1, "retail/eastus": 2, "retail/westeurope": 1, "graph/all": 2}},
		{name: "regions from config", cfgRegs: both, golden: "offers.golden.json"},
		{name: "every region", golden: "offers.golden.json", calls: map[string]int{"skus/all": 3, "retail/eastus": 2}},
		{name: "one GPU model", query: providers.Query{Regions: both, GPUs: []pricing.GPUModel{pricing.T4}}, golden: "offers-t4.golden.json"},
		{name: "retail 429 with Retry-After then OK", query: providers.Query{Regions: both}, golden: "offers.golden.json",
			faults: map[string][]string{rRetail: {"429@eastus"}}, calls: map[string]int{"retail/eastus": 3}},
		{name: "ARM 503 then OK", query: providers.Query{Regions: both}, golden: "offers.golden.json",
			faults: map[string][]string{rSKUs: {"503@eastus", "503@eastus"}}, calls: map[string]int{"skus/eastus": 4}},
		{name: "truncated retail page then OK", query: providers.Query{Regions: both}, golden: "offers.golden.json",
			faults: map[string][]string{rRetail: {"truncated@westeurope"}}, calls: map[string]int{"retail/westeurope": 2}},
		{name: "resource graph timeout then OK", query: providers.Query{Regions: both}, golden: "offers.golden.json",
			faults: map[string][]string{rGraph: {"hang"}}, timeout: 300 * time.Millisecond, calls: map[string]int{"graph/all": 3}},
		{name: "resource graph down: offers without signals", query: providers.Query{Regions: both}, golden: "offers-nosignal.golden.json",
			faults: map[string][]string{rGraph: {"persist:500"}}, calls: map[string]int{"graph/all": 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAzure(t)
			f.faults = tc.faults
			s := newTestSource(t, f, func(c *Config) {
				c.Regions = tc.cfgRegs
				if tc.timeout > 0 {
					c.HTTPClient.Timeout = tc.timeout
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
			for k, n := range tc.calls {
				if f.calls[k] != n {
					t.Errorf("%s: %d requests, want %d (all: %v)", k, f.calls[k], n, f.calls)
				}
			}
		})
	}
}

// TestOfferDetails checks by hand what the golden file holds: restrictions,
// zones, latest price, Spot and eviction rate.
func TestOfferDetails(t *testing.T) {
	f := newFakeAzure(t)
	s := newTestSource(t, f, nil)
	offers, err := s.Offers(context.Background(), providers.Query{Regions: both})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]pricing.Offer{}
	for _, o := range offers {
		byKey[o.Key()] = o
		if o.Source != SourceName || !o.ObservedAt.Equal(testNow) || o.Cloud != pricing.Azure {
			t.Errorf("%s: source %q observed %v", o.Key(), o.Source, o.ObservedAt)
		}
	}
	for _, k := range []string{
		"azure/eastus//Standard_NC6s_v3",          // NotAvailableForSubscription
		"azure/eastus//Standard_NV6ads_A10_v5",    // a sixth of a GPU
		"azure/eastus//Standard_D4s_v5",           // no GPU
		"azure/eastus/1/Standard_NC40ads_H100_v5", // no price
		"azure/eastus/3/Standard_ND96asr_v4",      // zone 3 restricted
		"azure/eastus/1/Standard_NC4as_T4_v3",     // all zones restricted: regional only
	} {
		if _, ok := byKey[k]; ok {
			t.Errorf("unexpected offer %s", k)
		}
	}
	a100 := byKey["azure/eastus/2/Standard_NC24ads_A100_v4"]
	if a100.OnDemandPrice != 3.673 || a100.SpotPrice != 0.7346 || a100.GPU != pricing.A100_80 || a100.GPUCount != 1 ||
		a100.VCPUs != 24 || a100.MemoryGiB != 220 || a100.Spot.Bucket != "0-5" {
		t.Errorf("NC24ads_A100_v4 in eastus zone 2: %+v", a100)
	}
	t4 := byKey["azure/eastus//Standard_NC4as_T4_v3"]
	if t4.SpotPrice != 0.0526 || t4.Spot.Bucket != "20+" || t4.Spot.InterruptionsPerHour <= 0 {
		t.Errorf("NC4as_T4_v3 regional: %+v", t4)
	}
	if o, ok := byKey["azure/westeurope/1/Standard_NC24ads_A100_v4"]; !ok || o.SpotPrice != 0 || o.Spot.Bucket != "" {
		t.Errorf("westeurope A100 (no Spot row): %+v", o)
	}
	// The confidential H100's Windows product is abbreviated "Srs Win":
	// its $8.68 / $2.84 rows must not replace the Linux $7.30 / $1.46.
	if ncc := byKey["azure/eastus//Standard_NCC40ads_H100_v5"]; ncc.OnDemandPrice != 7.30 || ncc.SpotPrice != 1.46 {
		t.Errorf("NCC40ads_H100_v5: on-demand %v spot %v, want the Linux 7.30 and 1.46", ncc.OnDemandPrice, ncc.SpotPrice)
	}
	// MI300X: the SKU has no GPUs capability; the count comes from the
	// documented size table. Its Windows row must not win.
	if mi := byKey["azure/eastus//Standard_ND96isr_MI300X_v5"]; mi.GPU != pricing.MI300X || mi.GPUCount != 8 ||
		mi.OnDemandPrice != 48 || mi.SpotPrice != 19.2 || mi.GPUMemoryGiB != 192 {
		t.Errorf("ND96isr_MI300X_v5: %+v", mi)
	}
	// NC16ads A10 v4: Linux price (not the Windows SKU-name row); no Low
	// Priority as Spot. NC8ads (half an A10) is not offered.
	if a10 := byKey["azure/eastus/1/Standard_NC16ads_A10_v4"]; a10.GPU != pricing.A10 || a10.OnDemandPrice != 1.60 || a10.SpotPrice != 0 {
		t.Errorf("NC16ads_A10_v4: %+v", a10)
	}
	if _, ok := byKey["azure/eastus/1/Standard_NC8ads_A10_v4"]; ok {
		t.Error("NC8ads_A10_v4 (half an A10) offered")
	}
	if len(f.queries) == 0 || !strings.Contains(f.queries[0], "'standard_nc24ads_a100_v4'") || !strings.Contains(f.queries[0], "'westeurope'") {
		t.Errorf("resource graph query %q", f.queries)
	}
}

func TestOffersFailures(t *testing.T) {
	tests := []struct {
		name    string
		faults  map[string][]string
		wantErr string
		failed  []string
		calls   map[string]int
	}{
		{name: "persistent 429 fails that region", faults: map[string][]string{rRetail: {"persist:429-now@eastus"}},
			wantErr: "429", failed: []string{"eastus"}, calls: map[string]int{"retail/eastus": 4, "retail/westeurope": 1}},
		{name: "persistent 503 on SKUs", faults: map[string][]string{rSKUs: {"persist:503@westeurope"}},
			wantErr: "503", failed: []string{"westeurope"}, calls: map[string]int{"skus/westeurope": 4, "retail/westeurope": 0}},
		{name: "malformed retail page is not retried", faults: map[string][]string{rRetail: {"malformed@eastus"}},
			wantErr: "retail prices page 1: decoding", failed: []string{"eastus"}, calls: map[string]int{"retail/eastus": 1}},
		{name: "malformed SKU page is not retried", faults: map[string][]string{rSKUs: {"malformed@westeurope"}},
			wantErr: "resource SKUs", failed: []string{"westeurope"}, calls: map[string]int{"skus/westeurope": 1}},
		{name: "truncated every time", faults: map[string][]string{rRetail: {"persist:truncated@westeurope"}},
			wantErr: "retail prices page 1", failed: []string{"westeurope"}, calls: map[string]int{"retail/westeurope": 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAzure(t)
			f.faults = tc.faults
			s := newTestSource(t, f, nil)
			offers, err := s.Offers(context.Background(), providers.Query{Regions: both})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			var failed []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var re *providers.RegionError
				if !errors.As(e, &re) || re.Cloud != pricing.Azure {
					t.Fatalf("error %v is not an Azure RegionError", e)
				}
				failed = append(failed, re.Region)
			}
			if fmt.Sprint(failed) != fmt.Sprint(tc.failed) {
				t.Errorf("failed regions %v, want %v", failed, tc.failed)
			}
			if len(offers) == 0 {
				t.Error("no offers from the healthy region")
			}
			for _, o := range offers {
				for _, r := range tc.failed {
					if o.Region == r {
						t.Errorf("offer %s from failed region", o.Key())
					}
				}
			}
			for k, n := range tc.calls {
				if f.calls[k] != n {
					t.Errorf("%s: %d requests, want %d (all: %v)", k, f.calls[k], n, f.calls)
				}
			}
		})
	}
}

func TestOffersBadRegionName(t *testing.T) {
	f := newFakeAzure(t)
	s := newTestSource(t, f, nil)
	offers, err := s.Offers(context.Background(), providers.Query{Regions: []string{"westeurope", "east us' or 1 eq 1"}})
	var re *providers.RegionError
	if !errors.As(err, &re) || re.Region != "east us' or 1 eq 1" || !strings.Contains(err.Error(), "invalid region name") {
		t.Fatalf("error %v, want a RegionError for the bad name", err)
	}
	if len(offers) == 0 || f.calls["retail/westeurope"] != 1 {
		t.Errorf("%d offers, calls %v: the good region should still be fetched", len(offers), f.calls)
	}
}

func TestNewWithoutCredentials(t *testing.T) {
	cred := &azfake.TokenCredential{}
	cred.SetError(errors.New("DefaultAzureCredential: failed to acquire a token"))
	tests := []struct {
		name string
		cfg  Config
	}{
		{"token fails", Config{SubscriptionID: subscription, Credential: cred}},
		{"no subscription", Config{Credential: &azfake.TokenCredential{}}},
	}
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.cfg)
			if !errors.Is(err, providers.ErrNoCredentials) {
				t.Fatalf("New: %v, want ErrNoCredentials", err)
			}
		})
	}
}

func TestOffersContextCanceled(t *testing.T) {
	f := newFakeAzure(t)
	f.faults = map[string][]string{rRetail: {"persist:hang"}}
	s := newTestSource(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Offers(ctx, providers.Query{Regions: both}); err == nil {
		t.Fatal("no error after the context ended")
	}
}
