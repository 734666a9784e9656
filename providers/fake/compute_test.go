package fake

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
	awsnotice "github.com/gpubroker/gpubroker/agent/notice/aws"
	"github.com/gpubroker/gpubroker/fleet/sim"
	"github.com/gpubroker/gpubroker/internal/shareddata"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// clock is a controlled clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{t: now} }
func p3(zone string) pricing.Offer   { return p3In("us-east-1", zone) }
func p3In(r, z string) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: r, Zone: z, InstanceType: "p3.2xlarge", GPU: pricing.V100, GPUCount: 1,
		OnDemandPrice: 3.06, SpotPrice: 0.97}
}

func launchReq(token string, ct pricing.CapacityType, offers ...pricing.Offer) providers.LaunchRequest {
	return providers.LaunchRequest{ClientToken: token, Name: token, Candidates: offers, Capacity: ct,
		Tags: map[string]string{"gpubroker-fleet": "test", "gpubroker-token": token}}
}

func TestLaunchIsIdempotentOnClientToken(t *testing.T) {
	clk := newClock()
	c := NewCompute(ComputeConfig{Offers: []pricing.Offer{p3("us-east-1a")}, Now: clk.Now, SpotScale: 5})
	ctx := t.Context()
	a, err := c.Launch(ctx, launchReq("tok-1", pricing.Spot, p3("us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Launch(ctx, launchReq("tok-1", pricing.Spot, p3("us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Fatalf("same token gave %s then %s", a.ID, b.ID)
	}
	// A lost response: the instance exists, the caller got an error; the
	// retry with the same token returns it instead of starting another.
	c.LoseNextLaunchResponses(1)
	if _, err := c.Launch(ctx, launchReq("tok-2", pricing.Spot, p3("us-east-1a"))); !errors.Is(err, ErrLostResponse) {
		t.Fatalf("want a lost response, got %v", err)
	}
	again, err := c.Launch(ctx, launchReq("tok-2", pricing.Spot, p3("us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Instances()); n != 2 {
		t.Fatalf("%d instances after retries, want 2:\n%s", n, c.Describe())
	}
	if c.Token(again.ID) != "tok-2" {
		t.Fatalf("token of %s = %q", again.ID, c.Token(again.ID))
	}
	if got := c.Calls()[APILaunch]; got != 4 {
		t.Fatalf("launch calls = %d, want 4", got)
	}
	if _, err := c.Launch(ctx, launchReq("", pricing.Spot, p3("us-east-1a"))); !errors.Is(err, providers.ErrBadConfig) {
		t.Fatalf("launch without a token: %v", err)
	}
}

func TestLaunchLatencyAndTerminatedStaysListed(t *testing.T) {
	clk := newClock()
	c := NewCompute(ComputeConfig{Offers: []pricing.Offer{p3("us-east-1a")}, Now: clk.Now, LaunchLatency: time.Minute})
	ctx := t.Context()
	i, err := c.Launch(ctx, launchReq("t", pricing.OnDemand, p3("us-east-1a")))
	if err != nil {
		t.Fatal(err)
	}
	if i.State != providers.StatePending {
		t.Fatalf("state %s, want pending", i.State)
	}
	clk.Add(59 * time.Second)
	list, _ := c.List(ctx, providers.Filter{})
	if list[0].State != providers.StatePending {
		t.Fatalf("running before the latency passed")
	}
	clk.Add(time.Second)
	list, _ = c.List(ctx, providers.Filter{})
	if list[0].State != providers.StateRunning {
		t.Fatalf("state %s after the latency, want running", list[0].State)
	}
	if err := c.Terminate(ctx, i.InstanceRef); err != nil {
		t.Fatal(err)
	}
	if err := c.Terminate(ctx, i.InstanceRef); err != nil {
		t.Fatalf("terminating twice: %v", err)
	}
	if err := c.Terminate(ctx, providers.InstanceRef{ID: "i-nope"}); !errors.Is(err, providers.ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
	list, _ = c.List(ctx, providers.Filter{})
	if len(list) != 1 || list[0].State != providers.StateTerminated {
		t.Fatalf("terminated instance should stay listed: %+v", list)
	}
	clk.Add(61 * time.Minute)
	if list, _ = c.List(ctx, providers.Filter{}); len(list) != 0 {
		t.Fatalf("terminated instance still listed after the TTL")
	}
}

func TestCapacityErrorsCarryThePoolAndFallBack(t *testing.T) {
	clk := newClock()
	a, b := p3("us-east-1a"), p3("us-east-1b")
	c := NewCompute(ComputeConfig{Offers: []pricing.Offer{a, b}, Now: clk.Now, SpotScale: 1})
	ctx := t.Context()
	if _, err := c.Launch(ctx, launchReq("1", pricing.Spot, a)); err != nil {
		t.Fatal(err)
	}
	// Pool a is full: the second candidate is taken.
	i, err := c.Launch(ctx, launchReq("2", pricing.Spot, a, b))
	if err != nil || i.Zone != "us-east-1b" {
		t.Fatalf("fallback: %v %v", i.Zone, err)
	}
	_, err = c.Launch(ctx, launchReq("3", pricing.Spot, a, b))
	var le *providers.LaunchError
	if !errors.As(err, &le) || !errors.Is(err, providers.ErrInsufficientCapacity) {
		t.Fatalf("want a capacity LaunchError, got %v", err)
	}
	if le.Pool != (providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}) {
		t.Fatalf("pool %+v", le.Pool)
	}
	// Injected errors: quota on a pool, throttling on the next call.
	c.FailPool(providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.OnDemand}, providers.ErrQuotaExceeded)
	if _, err := c.Launch(ctx, launchReq("4", pricing.OnDemand, a)); !errors.Is(err, providers.ErrQuotaExceeded) {
		t.Fatalf("pool quota: %v", err)
	}
	c.FailNext(APILaunch, providers.ErrThrottled)
	if _, err := c.Launch(ctx, launchReq("5", pricing.OnDemand, b)); !errors.Is(err, providers.ErrThrottled) {
		t.Fatalf("throttle: %v", err)
	}
	c.SetQuota(2)
	if _, err := c.Launch(ctx, launchReq("6", pricing.OnDemand, b)); !errors.Is(err, providers.ErrQuotaExceeded) {
		t.Fatalf("cloud quota: %v", err)
	}
}

func TestListPagesGrowWithRegionsAndPages(t *testing.T) {
	clk := newClock()
	var offers []pricing.Offer
	for _, r := range []string{"us-east-1", "us-west-2", "eu-west-1"} {
		offers = append(offers, p3In(r, r+"a"))
	}
	c := NewCompute(ComputeConfig{Offers: offers, Now: clk.Now, PageSize: 10})
	ctx := t.Context()
	for i := range 25 {
		if _, err := c.Launch(ctx, launchReq(string(rune('a'+i)), pricing.OnDemand, offers[0])); err != nil {
			t.Fatal(err)
		}
	}
	c.AddUntagged("us-west-2", "us-west-2a", "p3.2xlarge", nil)
	c.ResetCalls()
	list, err := c.List(ctx, providers.Filter{Tags: map[string]string{"gpubroker-fleet": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 25 {
		t.Fatalf("listed %d, want the 25 tagged", len(list))
	}
	// 3 pages in us-east-1, one each in the two others.
	if got := c.Calls()[APIListPage]; got != 5 {
		t.Fatalf("list pages = %d, want 5", got)
	}
	// Listed by region: the same instances, the same pages per region (a
	// region named twice is paged twice, its instances listed once; an
	// unknown one costs a page).
	for _, tc := range []struct {
		regions  []string
		n, pages int
	}{
		{[]string{"us-east-1"}, 25, 3},
		{[]string{"us-west-2", "eu-west-1"}, 0, 2},
		{[]string{"us-east-1", "us-east-1", "mars-1"}, 25, 7},
	} {
		c.ResetCalls()
		got, err := c.List(ctx, providers.Filter{Regions: tc.regions, Tags: map[string]string{"gpubroker-fleet": "test"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.n || c.Calls()[APIListPage] != tc.pages {
			t.Fatalf("list in %v: %d instances in %d pages, want %d in %d", tc.regions, len(got), c.Calls()[APIListPage], tc.n, tc.pages)
		}
	}
	if all, err := c.List(ctx, providers.Filter{}); err != nil || len(all) != 26 {
		t.Fatalf("untagged list: %d instances (%v), want 26", len(all), err)
	}
	c.FailNext(APIListPage, providers.ErrThrottled)
	if _, err := c.List(ctx, providers.Filter{}); !errors.Is(err, providers.ErrThrottled) {
		t.Fatalf("list error: %v", err)
	}
}

func loadTraces(t *testing.T, dir string) []Trace {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in %s", dir)
	}
	var out []Trace
	for _, f := range files {
		tr, err := sim.LoadTrace(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Trace{Name: tr.Name, Gap: time.Duration(tr.Gap) * time.Second, Avail: tr.Avail})
	}
	return out
}

// TestRealTracePreemptsAndNotifiesTheAgentWatcher replays a real
// availability trace: when the traced capacity drops to zero, the running
// spot instance gets a notice on its metadata path, which the agent's real
// IMDSv2 watcher reads, and it terminates two minutes later.
func TestRealTracePreemptsAndNotifiesTheAgentWatcher(t *testing.T) {
	dir := shareddata.Dir(t, "spot-traces", "availability", "1-node", "aws-02-15-2023")
	traces := loadTraces(t, dir)
	clk := newClock()
	a := p3("us-east-1a")
	c := NewCompute(ComputeConfig{Offers: []pricing.Offer{a}, Now: clk.Now, Traces: traces, Seed: 7, LaunchLatency: time.Second})
	k := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p3.2xlarge", Capacity: pricing.Spot}
	name, off := c.TraceOf(k)
	var tr *Trace
	for i := range traces {
		if traces[i].Name == name {
			tr = &traces[i]
		}
	}
	if tr == nil {
		t.Fatalf("pool has no trace")
	}
	// Same seed, same mapping.
	if n2, o2 := NewCompute(ComputeConfig{Offers: []pricing.Offer{a}, Now: clk.Now, Traces: traces, Seed: 7}).TraceOf(k); n2 != name || o2 != off {
		t.Fatalf("mapping not deterministic: %s/%d vs %s/%d", name, off, n2, o2)
	}
	// Move to a tick with capacity followed (later) by one without.
	tick := func() int { return (off + int(clk.Now().Sub(now)/tr.Gap)) % len(tr.Avail) }
	for steps := 0; tr.Avail[tick()] == 0; steps++ {
		if steps > len(tr.Avail) {
			t.Skip("trace never has capacity")
		}
		clk.Add(tr.Gap)
	}
	md := NewMetadata(c)
	c.OnNotice(md.Deliver)
	srv := httptest.NewServer(md)
	defer srv.Close()
	inst, err := c.Launch(t.Context(), launchReq("t", pricing.Spot, a))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w := awsnotice.New(awsnotice.Options{Endpoint: srv.URL + "/" + inst.ID, Interval: 20 * time.Millisecond})
	ch, err := w.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for steps := 0; tr.Avail[tick()] > 0; steps++ {
		if steps > len(tr.Avail) {
			t.Skip("trace never runs out")
		}
		clk.Add(tr.Gap)
	}
	c.Sync()
	if !c.Noticed(inst.ID) {
		t.Fatalf("no notice at a zero-capacity tick:\n%s", c.Describe())
	}
	var got notice.Notice
	select {
	case got = <-ch:
	case <-ctx.Done():
		t.Fatal("the agent's watcher saw no notice")
	}
	if got.Kind != notice.KindPreempt {
		t.Fatalf("notice kind %v", got.Kind)
	}
	clk.Add(2 * time.Minute)
	list, _ := c.List(t.Context(), providers.Filter{})
	if list[0].State != providers.StateTerminated {
		t.Fatalf("state %s two minutes after the notice", list[0].State)
	}
}

// List copies each instance's tags unless ShareTags is set: a caller that
// changes a listed copy leaves the fake alone, and with ShareTags every
// list hands out the fake's own map (the fleet simulator, which only reads
// them), with the same tags either way.
func TestListCopiesTagsUnlessShared(t *testing.T) {
	for _, share := range []bool{false, true} {
		c := NewCompute(ComputeConfig{Offers: []pricing.Offer{p3("us-east-1a")}, Now: newClock().Now, SpotScale: 5, ShareTags: share})
		ctx := t.Context()
		if _, err := c.Launch(ctx, launchReq("tok-1", pricing.Spot, p3("us-east-1a"))); err != nil {
			t.Fatal(err)
		}
		list := func() providers.Instance {
			out, err := c.List(ctx, providers.Filter{Tags: map[string]string{"gpubroker-fleet": "test"}})
			if err != nil || len(out) != 1 {
				t.Fatalf("share %v: list %v, %v; want the one instance", share, out, err)
			}
			return out[0]
		}
		a, b := list(), list()
		if a.Tags["gpubroker-token"] != "tok-1" || len(a.Tags) != 2 {
			t.Fatalf("share %v: listed tags %v; want the launch's", share, a.Tags)
		}
		if same := reflect.ValueOf(a.Tags).UnsafePointer() == reflect.ValueOf(b.Tags).UnsafePointer(); same != share {
			t.Fatalf("share %v: two lists share one tag map: %v", share, same)
		}
		if !share {
			a.Tags["gpubroker-token"] = "changed"
			if got := list().Tags["gpubroker-token"]; got != "tok-1" {
				t.Fatalf("a caller's change to a listed copy reached the fake: %q", got)
			}
		}
	}
}

// With ReuseList, List answers in its last answer's memory (its caller is
// done with it) and the answer is still the listing.
func TestReuseListAnswersInTheLastAnswersMemory(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		clk := newClock()
		c := NewCompute(ComputeConfig{Offers: []pricing.Offer{p3("us-east-1a")}, Now: clk.Now, SpotScale: 5, ReuseList: reuse})
		ctx := t.Context()
		list := func(want int) []providers.Instance {
			out, err := c.List(ctx, providers.Filter{Tags: map[string]string{"gpubroker-fleet": "test"}})
			if err != nil || len(out) != want {
				t.Fatalf("reuse %v: list %v, %v; want %d instances", reuse, out, err, want)
			}
			return out
		}
		for _, tok := range []string{"tok-1", "tok-2"} {
			if _, err := c.Launch(ctx, launchReq(tok, pricing.Spot, p3("us-east-1a"))); err != nil {
				t.Fatal(err)
			}
		}
		a := list(2)
		first := a[0].ID
		if _, err := c.Launch(ctx, launchReq("tok-3", pricing.Spot, p3("us-east-1a"))); err != nil {
			t.Fatal(err)
		}
		b := list(3)
		if b[0].ID != first || b[2].Tags["gpubroker-token"] != "tok-3" {
			t.Fatalf("reuse %v: second list %v", reuse, b)
		}
		c2 := list(3)
		if same := &c2[0] == &b[0]; same != reuse {
			t.Fatalf("reuse %v: a list answered in the last one's memory: %v", reuse, same)
		}
	}
}

// List remembers each instance's answer to the last one-tag filter: other
// filters, and the first again, must still list what matches.
func TestListFiltersByTagWhateverTheLastFilter(t *testing.T) {
	c := NewCompute(ComputeConfig{Offers: []pricing.Offer{p3("us-east-1a")}, Now: newClock().Now, SpotScale: 5})
	ctx := t.Context()
	for _, tok := range []string{"tok-1", "tok-2"} {
		if _, err := c.Launch(ctx, launchReq(tok, pricing.Spot, p3("us-east-1a"))); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct {
		tags map[string]string
		want int
	}{
		{map[string]string{"gpubroker-fleet": "test"}, 2},
		{map[string]string{"gpubroker-token": "tok-2"}, 1},
		{map[string]string{"gpubroker-fleet": "other"}, 0},
		{map[string]string{"gpubroker-fleet": "test"}, 2},
		{map[string]string{"gpubroker-fleet": "test", "gpubroker-token": "tok-1"}, 1},
		{nil, 2},
	} {
		out, err := c.List(ctx, providers.Filter{Tags: f.tags})
		if err != nil || len(out) != f.want {
			t.Fatalf("list %v: %d instances, %v; want %d", f.tags, len(out), err, f.want)
		}
	}
}
