package refresh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "gpubroker.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func gpuOffer(region, zone string, od, spot float64) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: region, Zone: zone, InstanceType: "g6.xlarge", GPU: pricing.L4,
		GPUCount: 1, GPUMemoryGiB: 24, VCPUs: 4, MemoryGiB: 16, OnDemandPrice: od, SpotPrice: spot}
}

// clock is the time the fake cloud stamps its offers with; refresh sets it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

var fakeClock = &clock{now: t0}

// source returns a registry holding one fake AWS source.
func source(t *testing.T) (*fake.Source, Registry) {
	t.Helper()
	f, err := fake.New(t.Context(), fake.Config{Cloud: pricing.AWS, Now: fakeClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f, Registry{pricing.AWS: func(context.Context, SourceConfig) (OfferSource, error) { return f, nil }}
}

func refresh(t *testing.T, st Store, reg Registry, regions []string, at time.Time, opt Options) *Report {
	t.Helper()
	targets, err := Plan(reg, nil, regions)
	if err != nil {
		t.Fatal(err)
	}
	opt.Now = func() time.Time { return at }
	fakeClock.Set(at)
	return Run(t.Context(), st, targets, opt)
}

func byKey(t *testing.T, st *store.Store) map[string]pricing.Offer {
	t.Helper()
	offers, err := st.Offers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]pricing.Offer{}
	for _, o := range offers {
		m[o.Key()] = o
	}
	return m
}

func statuses(rep *Report) map[string]Status {
	m := map[string]Status{}
	for _, c := range rep.Clouds {
		if len(c.Regions) == 0 {
			m[string(c.Cloud)] = c.Status
		}
		for _, r := range c.Regions {
			m[r.Region] = r.Status
		}
	}
	return m
}

// TestMergeKeepsGoodData: of three regions, one answers with new prices,
// one answers with nothing and one fails after returning partial offers.
// Only the first may change; the others keep their offers and observed-at.
func TestMergeKeepsGoodData(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	regions := []string{"us-east-1", "us-west-2", "eu-west-1"}
	for _, r := range regions {
		f.SetOffers(r, gpuOffer(r, r+"a", 0.80, 0.30), gpuOffer(r, r+"b", 0.80, 0.31))
	}
	rep := refresh(t, st, reg, regions, t0, Options{})
	if err := rep.Err(); err != nil || rep.Count(Refreshed) != 3 {
		t.Fatalf("first refresh: %d refreshed, err %v", rep.Count(Refreshed), err)
	}
	before := byKey(t, st)

	t1 := t0.Add(6 * time.Hour)
	f.SetOffers("us-east-1", gpuOffer("us-east-1", "us-east-1a", 0.80, 0.25)) // b not mentioned
	f.SetOffers("us-west-2")                                                  // empty answer
	boom := errors.New("RequestLimitExceeded: Request limit exceeded")
	partial := gpuOffer("eu-west-1", "eu-west-1a", 0.80, 0) // spot price missing
	f.FailRegion("eu-west-1", boom, partial)
	rep = refresh(t, st, reg, regions, t1, Options{})

	want := map[string]Status{"us-east-1": Refreshed, "us-west-2": Empty, "eu-west-1": Failed}
	if got := statuses(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if err := rep.Err(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "aws eu-west-1") {
		t.Errorf("Report.Err() = %v, want the eu-west-1 failure", err)
	}
	after := byKey(t, st)
	if len(after) != len(before) {
		t.Fatalf("%d offers after the second refresh, want %d", len(after), len(before))
	}
	for k, o := range after {
		switch {
		case strings.HasPrefix(k, "aws/us-east-1/us-east-1a/"):
			if o.SpotPrice != 0.25 || !o.ObservedAt.Equal(t1) {
				t.Errorf("%s: spot %v at %v, want 0.25 at %v", k, o.SpotPrice, o.ObservedAt, t1)
			}
		default:
			if !reflect.DeepEqual(o, before[k]) {
				t.Errorf("%s changed:\n got %+v\nwant %+v", k, o, before[k])
			}
		}
	}
	for _, c := range rep.Clouds {
		for _, r := range c.Regions {
			if r.Status != Refreshed && r.Kept != 2 {
				t.Errorf("%s: kept %d, want 2", r.Region, r.Kept)
			}
		}
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"us-east-1  refreshed  1 offers (0 new), 1 price changes",
		"us-west-2  empty      no offers returned; kept 2 stored offers",
		"eu-west-1  failed     RequestLimitExceeded: Request limit exceeded; kept 2 stored offers",
		"1 region refreshed, 1 empty, 1 failed; 0 clouds skipped"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, buf.String())
		}
	}
}

func TestHistoryRecordedOnlyOnChange(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	o := gpuOffer("us-east-1", "us-east-1a", 0.80, 0.30)
	spots := []float64{0.30, 0.30, 0.30, 0.27, 0.27, 0.33}
	wantChanges := []int{0, 0, 0, 1, 0, 1}
	for i, sp := range spots {
		o.SpotPrice = sp
		f.SetOffers("us-east-1", o)
		rep := refresh(t, st, reg, []string{"us-east-1"}, t0.Add(time.Duration(i)*time.Hour), Options{})
		if got := rep.Clouds[0].Regions[0].Saved.PriceChanges; got != wantChanges[i] {
			t.Errorf("refresh %d: %d price changes, want %d", i, got, wantChanges[i])
		}
	}
	h, err := st.PriceHistory(t.Context(), o.Key(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range h {
		got = append(got, fmt.Sprintf("%s@%d", p.Capacity, p.ObservedAt.Hour()))
	}
	want := []string{"on-demand@6", "spot@6", "spot@9", "spot@11"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
}

// TestConcurrencyIsBounded: clouds are fetched side by side, one call
// each, and each source gets the bound for its regions.
func TestConcurrencyIsBounded(t *testing.T) {
	for _, bound := range []int{1, 3} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			st := openStore(t)
			reg := Registry{}
			fakes := map[pricing.Cloud]*fake.Source{}
			var mu sync.Mutex
			for _, c := range pricing.Clouds() {
				reg[c] = func(ctx context.Context, cfg SourceConfig) (OfferSource, error) {
					f, err := fake.New(ctx, fake.Config{Cloud: c, MaxConcurrency: cfg.Concurrency})
					if err != nil {
						return nil, err
					}
					f.SetDelay(40 * time.Millisecond)
					for _, r := range cfg.Regions {
						f.SetOffers(r)
					}
					mu.Lock()
					fakes[c] = f
					mu.Unlock()
					return f, nil
				}
			}
			targets, err := Plan(reg, nil, []string{"us-east-1", "us-east-2", "us-west-1", "us-west-2", "us-central1", "us-east1", "us-east4", "us-east5", "eastus", "eastus2", "southcentralus", "westus2"})
			if err != nil {
				t.Fatal(err)
			}
			rep := Run(t.Context(), st, targets, Options{Concurrency: bound})
			if rep.Count(Empty) != 12 {
				t.Errorf("%d regions empty, want 12", rep.Count(Empty))
			}
			for c, f := range fakes {
				if f.Calls() != 1 || len(f.Queries()[0].Regions) != 4 {
					t.Errorf("%s: %d calls %v, want one call for its 4 regions", c, f.Calls(), f.Queries())
				}
				if got := f.MaxInFlight(); got != bound {
					t.Errorf("%s: at most %d regions in flight, want exactly the bound %d", c, got, bound)
				}
			}
		})
	}
}

func TestCloudsWithoutCredentialsAreSkipped(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	f.SetOffers("us-east-1", gpuOffer("us-east-1", "", 1, 0))
	reg[pricing.GCP] = func(ctx context.Context, _ SourceConfig) (OfferSource, error) {
		return fake.New(ctx, fake.Config{Cloud: pricing.GCP, NoCredentials: true})
	}
	reg[pricing.Azure] = func(context.Context, SourceConfig) (OfferSource, error) {
		return nil, errors.New("azure: resource graph endpoint: bad URL")
	}
	var logs bytes.Buffer
	lp := LogProgress{Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))}
	rep := refresh(t, st, reg, []string{"us-east-1", "us-central1", "eastus"}, t0, Options{Progress: lp})
	want := map[string]Status{"us-east-1": Refreshed, "gcp": Skipped, "azure": Failed}
	if got := statuses(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if err := rep.Err(); err == nil || strings.Contains(err.Error(), "gcp") || !strings.Contains(err.Error(), "bad URL") {
		t.Errorf("Report.Err() = %v; want the azure failure only", err)
	}
	if n := strings.Count(logs.String(), "cloud skipped"); n != 1 || !strings.Contains(logs.String(), `level=INFO msg="cloud skipped" cloud=gcp reason="no credentials; run 'gcloud auth application-default login' or set GOOGLE_APPLICATION_CREDENTIALS"`) {
		t.Errorf("want exactly one clear skip line, got:\n%s", logs.String())
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestInvalidAndForeignOffersAreDropped(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	noPrice := gpuOffer("us-east-1", "us-east-1c", 0, 0)
	foreign := gpuOffer("us-west-2", "us-west-2a", 1, 0) // a region not asked for
	otherCloud := gpuOffer("us-east-1", "us-east-1d", 1, 0)
	otherCloud.Cloud = pricing.GCP
	dup := gpuOffer("us-east-1", "us-east-1a", 1, 0)
	dup.ObservedAt = t0.Add(time.Minute)
	f.SetOffers("us-east-1", gpuOffer("us-east-1", "us-east-1a", 0.9, 0), noPrice, foreign, otherCloud, dup)
	rep := refresh(t, st, reg, []string{"us-east-1"}, t0, Options{})
	r := rep.Clouds[0].Regions[0]
	if r.Status != Refreshed || r.Offers != 1 || r.Dropped != 3 {
		t.Fatalf("result %+v, want 1 offer refreshed and 3 dropped", r)
	}
	stored := byKey(t, st)
	if got := stored[dup.Key()]; got.OnDemandPrice != 1 {
		t.Errorf("of duplicates the newest should win; got price %v", got.OnDemandPrice)
	}
	if len(stored) != 1 {
		t.Errorf("stored %d offers, want only the valid one: %v", len(stored), stored)
	}
}

// failingStore fails every save, like a full disk.
type failingStore struct{ *store.Store }

func (failingStore) SaveOffers(context.Context, pricing.Cloud, string, []pricing.Offer, time.Time) (store.SaveResult, error) {
	return store.SaveResult{}, errors.New("disk I/O error")
}

func TestStoreFailureFailsTheRegion(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	f.SetOffers("us-east-1", gpuOffer("us-east-1", "", 1, 0))
	rep := refresh(t, failingStore{st}, reg, []string{"us-east-1"}, t0, Options{})
	if r := rep.Clouds[0].Regions[0]; r.Status != Failed || !strings.Contains(r.Err.Error(), "disk I/O") {
		t.Fatalf("result %+v, want failed with the store's error", r)
	}
}

type panicking struct{ OfferSource }

func (panicking) Offers(context.Context, providers.Query) ([]pricing.Offer, error) {
	panic("index out of range")
}

func TestPanickingSourceFailsItsRegion(t *testing.T) {
	st := openStore(t)
	f, _ := source(t)
	reg := Registry{pricing.AWS: func(context.Context, SourceConfig) (OfferSource, error) { return panicking{f}, nil },
		pricing.GCP: func(context.Context, SourceConfig) (OfferSource, error) { panic("nil map") }}
	rep := refresh(t, st, reg, []string{"us-east-1", "us-central1"}, t0, Options{})
	if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "panicked: index out of range") || !strings.Contains(err.Error(), "panicked: nil map") {
		t.Fatalf("Report.Err() = %v, want both panics as errors", err)
	}
}

func TestCancelLeavesStoreIntact(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	for _, r := range []string{"us-east-1", "us-east-2", "us-west-2"} {
		f.SetOffers(r, gpuOffer(r, "", 1, 0))
	}
	refresh(t, st, reg, []string{"us-east-1", "us-east-2", "us-west-2"}, t0, Options{})
	before := byKey(t, st)
	for _, r := range []string{"us-east-1", "us-east-2", "us-west-2"} {
		f.SetOffers(r, gpuOffer(r, "", 2, 0))
	}
	f.SetDelay(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	targets, _ := Plan(reg, nil, []string{"us-east-1", "us-east-2", "us-west-2"})
	rep := Run(ctx, st, targets, Options{Concurrency: 1})
	if rep.Count(Failed) != 3 || !errors.Is(rep.Err(), context.Canceled) {
		t.Fatalf("after cancel: %d failed, err %v; want 3 failed with context.Canceled", rep.Count(Failed), rep.Err())
	}
	if after := byKey(t, st); !reflect.DeepEqual(after, before) {
		t.Errorf("a cancelled refresh changed the store")
	}
}

func TestOneQueryPerCloudWithGPUs(t *testing.T) {
	st := openStore(t)
	f, reg := source(t)
	f.SetOffers("us-east-1")
	f.SetOffers("us-west-2")
	refresh(t, st, reg, []string{"us-east-1", "us-west-2"}, t0, Options{GPUs: []pricing.GPUModel{pricing.H100}})
	q := f.Queries()
	if len(q) != 1 || !reflect.DeepEqual(q[0].Regions, []string{"us-east-1", "us-west-2"}) || !reflect.DeepEqual(q[0].GPUs, []pricing.GPUModel{pricing.H100}) {
		t.Errorf("queries %+v, want one for us-east-1, us-west-2 and H100", q)
	}
}

// whole fails the entire call with an error tied to no region.
type whole struct{ OfferSource }

func (w whole) Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error) {
	offers, _ := w.OfferSource.Offers(ctx, q)
	return offers, errors.New("billing catalog: 503 Service Unavailable")
}

func TestErrorNotTiedToARegionFailsAll(t *testing.T) {
	st := openStore(t)
	f, _ := source(t)
	f.SetOffers("us-east-1", gpuOffer("us-east-1", "", 1, 0))
	f.SetOffers("us-west-2", gpuOffer("us-west-2", "", 1, 0))
	reg := Registry{pricing.AWS: func(context.Context, SourceConfig) (OfferSource, error) { return whole{f}, nil }}
	rep := refresh(t, st, reg, []string{"us-east-1", "us-west-2"}, t0, Options{})
	if rep.Count(Failed) != 2 {
		t.Errorf("%d regions failed, want both", rep.Count(Failed))
	}
	if got := byKey(t, st); len(got) != 0 {
		t.Errorf("offers saved despite a whole-call error: %v", got)
	}
}

func TestSplitErrors(t *testing.T) {
	a := &providers.RegionError{Cloud: pricing.AWS, Region: "us-east-1", Err: errors.New("throttled")}
	b := &providers.RegionError{Cloud: pricing.AWS, Region: "us-west-2", Err: errors.New("timeout")}
	odd := &providers.RegionError{Cloud: pricing.AWS, Region: "mars-1", Err: errors.New("?")}
	other := errors.New("spot advisor: 500")
	per, rest := splitErrors(errors.Join(a, errors.Join(b, other), odd), []string{"us-east-1", "us-west-2"})
	if !errors.Is(per["us-east-1"], a) || !errors.Is(per["us-west-2"], b) || len(per) != 2 {
		t.Errorf("per-region errors %v", per)
	}
	if !errors.Is(rest, other) || !errors.Is(rest, odd) {
		t.Errorf("rest %v, want the untied error and the region not asked for", rest)
	}
	if per, rest := splitErrors(nil, nil); len(per) != 0 || rest != nil {
		t.Errorf("nil error split into %v, %v", per, rest)
	}
}

func TestBarsRedrawInPlace(t *testing.T) {
	var buf bytes.Buffer
	b := NewBars(&buf, []pricing.Cloud{pricing.AWS, pricing.GCP})
	b.CloudStarted(pricing.AWS, 2)
	b.RegionDone(RegionResult{Cloud: pricing.AWS, Region: "us-east-1", Status: Refreshed, Offers: 40, Saved: store.SaveResult{PriceChanges: 3}})
	b.CloudDone(CloudResult{Cloud: pricing.GCP, Status: Skipped, Err: fmt.Errorf("gcp: %w: run gcloud auth application-default login", providers.ErrNoCredentials)})
	out := buf.String()
	if strings.Count(out, "\x1b[2A") != 2 {
		t.Errorf("want two moves back over the two bars, got %q", out)
	}
	last := out[strings.LastIndex(out, "\x1b[2A"):]
	for _, s := range []string{"aws    [===============               ]  1/2  regions     40 offers    3 price changes  fetching",
		"gcp    [                              ]  0/0  regions      0 offers    0 price changes  skipped: no credentials; run 'gcloud auth application-defau…\n"} {
		if !strings.Contains(last, s) {
			t.Errorf("last drawing lacks %q:\n%q", s, last)
		}
	}
}

func TestResolveRegions(t *testing.T) {
	cases := []struct {
		cloud    pricing.Cloud
		patterns []string
		want     []string
		err      string
	}{
		{pricing.AWS, []string{"us-*"}, []string{"us-east-1", "us-east-2", "us-west-1", "us-west-2"}, ""},
		{pricing.GCP, []string{"us-*"}, []string{"us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west4"}, ""},
		{pricing.Azure, []string{"us-*"}, nil, ""},
		{pricing.Azure, []string{"*us*"}, []string{"eastus", "eastus2", "southcentralus", "westus2", "westus3", "centralus", "northcentralus", "australiaeast"}, ""},
		{pricing.AWS, []string{"me-central-1", "us-east-1", "eastus"}, []string{"me-central-1", "us-east-1"}, ""},
		{pricing.Azure, []string{"me-central-1", "eastus"}, []string{"eastus"}, ""},
		{pricing.GCP, []string{"europe-west4", "europe-*"}, []string{"europe-west4", "europe-west1", "europe-west2", "europe-west3"}, ""},
		{pricing.AWS, nil, DefaultRegions(pricing.AWS), ""},
		{pricing.AWS, []string{"us-[east"}, nil, "syntax error"},
		{pricing.AWS, []string{"US East"}, nil, "not an AWS"},
	}
	for _, c := range cases {
		got, err := ResolveRegions(c.cloud, c.patterns)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ResolveRegions(%s, %q) err = %v, want %q", c.cloud, c.patterns, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ResolveRegions(%s, %q) = %q, %v; want %q", c.cloud, c.patterns, got, err, c.want)
		}
	}
}

func TestDefaultRegionsHaveTheirCloudsShape(t *testing.T) {
	for _, c := range pricing.Clouds() {
		for _, r := range DefaultRegions(c) {
			if got := CloudOfRegion(r); got != c {
				t.Errorf("CloudOfRegion(%q) = %q, want %q", r, got, c)
			}
		}
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range cat.Offers() {
		if got := CloudOfRegion(o.Region); got != o.Cloud {
			t.Errorf("snapshot region %q: CloudOfRegion = %q, want %q", o.Region, got, o.Cloud)
		}
	}
}

func TestPlanRejectsUnknownCloud(t *testing.T) {
	_, reg := source(t)
	if _, err := Plan(reg, []pricing.Cloud{pricing.GCP}, nil); err == nil || !strings.Contains(err.Error(), `no price source for cloud "gcp"`) {
		t.Errorf("Plan = %v", err)
	}
	targets, err := Plan(reg, nil, []string{"eastus"})
	if err != nil || len(targets) != 1 || len(targets[0].Regions) != 0 {
		t.Fatalf("Plan = %+v, %v", targets, err)
	}
	rep := Run(t.Context(), openStore(t), targets, Options{})
	if c := rep.Clouds[0]; c.Status != Skipped || !strings.Contains(c.Err.Error(), "no aws regions match [eastus]") {
		t.Errorf("cloud without regions: %+v", c)
	}
}
