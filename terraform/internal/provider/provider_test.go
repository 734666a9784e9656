package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/gpubroker/gpubroker/pricing"
)

func schemaOf(t *testing.T) *tfprotov6.GetProviderSchemaResponse {
	t.Helper()
	srv, err := providerserver.NewProtocol6WithError(New(Options{})())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("schema diagnostic: %s: %s", d.Summary, d.Detail)
	}
	return resp
}

func attrNames(as []*tfprotov6.SchemaAttribute, prefix string) []string {
	var out []string
	for _, a := range as {
		out = append(out, prefix+a.Name)
		if a.NestedType != nil {
			out = append(out, attrNames(a.NestedType.Attributes, prefix+a.Name+".")...)
		}
	}
	slices.Sort(out)
	return out
}

// TestSchema checks the provider's schema as Terraform receives it: the
// token is sensitive, every attribute has a description (the docs are made
// from them), and the workload attributes of the data source and the
// resource are the same policy fields.
func TestSchema(t *testing.T) {
	s := schemaOf(t)
	if got := attrNames(s.Provider.Block.Attributes, ""); !slices.Equal(got, []string{"endpoint", "token"}) {
		t.Fatalf("provider attributes %v", got)
	}
	for _, a := range s.Provider.Block.Attributes {
		if a.Name == "token" && !a.Sensitive {
			t.Error("token is not sensitive")
		}
	}
	var walk func(owner string, as []*tfprotov6.SchemaAttribute)
	walk = func(owner string, as []*tfprotov6.SchemaAttribute) {
		for _, a := range as {
			if strings.TrimSpace(a.Description) == "" {
				t.Errorf("%s.%s has no description", owner, a.Name)
			}
			if a.NestedType != nil {
				walk(owner+"."+a.Name, a.NestedType.Attributes)
			}
		}
	}
	for name, sc := range s.DataSourceSchemas {
		walk(name, sc.Block.Attributes)
	}
	for name, sc := range s.ResourceSchemas {
		walk(name, sc.Block.Attributes)
	}
	if len(s.DataSourceSchemas) != 3 || len(s.ResourceSchemas) != 1 {
		t.Fatalf("data sources %d, resources %d", len(s.DataSourceSchemas), len(s.ResourceSchemas))
	}
	inputs := func(as []*tfprotov6.SchemaAttribute) []string {
		var in []*tfprotov6.SchemaAttribute
		for _, a := range as {
			if a.Required || a.Optional {
				in = append(in, a)
			}
		}
		return attrNames(in, "")
	}
	ds := inputs(s.DataSourceSchemas["gpubroker_placement"].Block.Attributes)
	ds = slices.DeleteFunc(ds, func(n string) bool { return n == "horizon" })
	rs := inputs(s.ResourceSchemas["gpubroker_workload"].Block.Attributes)
	if !slices.Equal(ds, rs) {
		t.Fatalf("workload attributes differ:\n placement %v\n workload  %v", ds, rs)
	}
	for _, want := range []string{"gpu.models", "work.gpu_hours", "replicas.target_utilization", "spread.min_zones", "placement.residency", "checkpoint_interval",
		"gpu.interconnect", "spot_policy", "scaling.intra_node", "scaling.inter_node", "schedule",
		"autoscale.prometheus.url", "autoscale.prometheus.query", "autoscale.prometheus.target_per_replica",
		"autoscale.scale_up_window", "autoscale.scale_down_window", "availability.goal", "availability.window",
		"load.replicas_by_hour", "load.requests_per_second", "load.requests_per_replica"} {
		if !slices.Contains(rs, want) {
			t.Errorf("no attribute %s (policy field)", want)
		}
	}
	// The Prometheus URL may hold credentials (or a token in its query):
	// sensitive in both, and nothing else of the workload is.
	for name, as := range map[string][]*tfprotov6.SchemaAttribute{
		"gpubroker_placement": s.DataSourceSchemas["gpubroker_placement"].Block.Attributes,
		"gpubroker_workload":  s.ResourceSchemas["gpubroker_workload"].Block.Attributes,
	} {
		if got := sensitiveNames(as, ""); !slices.Equal(got, []string{"autoscale.prometheus.url"}) {
			t.Errorf("%s: sensitive attributes %v, want [autoscale.prometheus.url]", name, got)
		}
	}
	// The load profile's lists hold numbers.
	for _, a := range s.ResourceSchemas["gpubroker_workload"].Block.Attributes {
		if a.Name != "load" {
			continue
		}
		for _, l := range a.NestedType.Attributes {
			if l.Name == "replicas_by_hour" && !l.Type.Equal(tftypes.List{ElementType: tftypes.Number}) ||
				l.Name == "requests_per_second" && !l.Type.Equal(tftypes.List{ElementType: tftypes.Number}) {
				t.Errorf("load.%s is %s, want a list of numbers", l.Name, l.Type)
			}
		}
	}
}

func sensitiveNames(as []*tfprotov6.SchemaAttribute, prefix string) []string {
	var out []string
	for _, a := range as {
		if a.Sensitive {
			out = append(out, prefix+a.Name)
		}
		if a.NestedType != nil {
			out = append(out, sensitiveNames(a.NestedType.Attributes, prefix+a.Name+".")...)
		}
	}
	slices.Sort(out)
	return out
}

// TestRankOffers checks the order `gpubroker prices` uses: cheapest per
// GPU-hour at the ranking capacity first, offers not sold that way last.
func TestRankOffers(t *testing.T) {
	offers := []pricing.Offer{
		{InstanceType: "a", GPU: pricing.H100, GPUCount: 8, OnDemandPrice: 80, SpotPrice: 30},
		{InstanceType: "b", GPU: pricing.H100, GPUCount: 1, OnDemandPrice: 9, SpotPrice: 3},
		{InstanceType: "spot-only", GPU: pricing.H100, GPUCount: 1, SpotPrice: 0.5},
		{InstanceType: "c", GPU: pricing.T4, GPUCount: 1, OnDemandPrice: 0.5},
	}
	names := func(rs []rankedOffer) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.InstanceType)
		}
		return out
	}
	rows, ct := rankOffers(offers, "", "gpu-hour")
	if ct != pricing.OnDemand || !slices.Equal(names(rows), []string{"c", "b", "a", "spot-only"}) {
		t.Errorf("on-demand order %v (%s)", names(rows), ct)
	}
	rows, _ = rankOffers(offers, pricing.Spot, "gpu-hour")
	if !slices.Equal(names(rows), []string{"spot-only", "b", "a", "c"}) {
		t.Errorf("spot order %v", names(rows))
	}
	rows, _ = rankOffers(offers, "", "tflop")
	// T4: $0.5 / 65 TFLOPS; H100: $9 / 989 and $80 / (8 × 989).
	if !slices.Equal(names(rows), []string{"c", "b", "a", "spot-only"}) {
		t.Errorf("tflop order %v", names(rows))
	}
	m, diags := rows[len(rows)-1].model(time.Now(), time.Hour, map[string][]pricing.Issue{rows[len(rows)-1].Key(): {pricing.NoOnDemand}})
	if diags.HasError() || !m.OnDemandPerHour.IsNull() || m.SpotPerHour.ValueFloat64() != 0.5 || m.SpotSignal.IsNull() ||
		len(m.Issues) != 1 || m.Issues[0].ValueString() != string(pricing.NoOnDemand) {
		t.Errorf("spot-only offer row %+v %v", m, diags)
	}
}

// TestBrokerSource checks the online source: filters go out as the
// broker's query parameters, its offers come back as pricing offers, and
// errors carry the broker's message, never the token; 404 is "gone".
func TestBrokerSource(t *testing.T) {
	const token = "gpb_secretsecretsecretsecretsecretsecretsecret1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"unknown token"}}`))
			return
		}
		if !strings.HasPrefix(r.Header.Get("User-Agent"), "terraform-provider-gpubroker/") {
			t.Errorf("User-Agent %q", r.Header.Get("User-Agent"))
		}
		switch r.URL.Path {
		case "/api/v1/workloads/gone":
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"workload \"gone\" not found"}}`))
		case "/api/v1/offers":
			q := r.URL.Query()
			if q.Get("gpu") != "H100,A100-80GB" || q.Get("capacity") != "spot" || q.Get("max_price") != "12.5" || q.Get("region") != "us-*" {
				t.Errorf("offers query %s", r.URL.RawQuery)
			}
			_, _ = w.Write([]byte(`{"generated_at":"2026-11-01T00:00:00Z","source":"live","count":1,"offers":[{"cloud":"aws","region":"us-east-1",
				"zone":"use1-az1","instance_type":"p5.48xlarge","gpu":"H100","gpu_count":8,"gpu_memory_gib":80,"vcpus":192,"memory_gib":2048,
				"on_demand_price":98.32,"spot_price":40,"spot_signal":{"interruptions_per_hour":0.01,"default":true},
				"observed_at":"2026-11-01T00:00:00Z","source":"aws-pricing"}]}`))
		default:
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}
	}))
	defer srv.Close()
	c, err := newBrokerClient(srv.URL+"/", token, srv.Client(), "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.GetWorkload(ctx, "gone")
	if !isNotFound(err) || !strings.Contains(err.Error(), `workload "gone" not found`) {
		t.Errorf("404: %v", err)
	}
	_, err = c.GetWorkload(ctx, "other")
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bad gateway") || isNotFound(err) {
		t.Errorf("502: %v", err)
	}
	ans, err := brokerSource{c}.Offers(ctx, pricing.Query{GPUs: []pricing.GPUModel{pricing.H100, pricing.A100_80}, Capacity: pricing.Spot,
		MaxPricePerHour: 12.5, Regions: []string{"us-*"}})
	if err != nil || len(ans.Offers) != 1 || ans.Source != "live" {
		t.Fatalf("offers: %+v %v", ans, err)
	}
	if g, ok := ans.Offers[0].PricePerGPUHour(pricing.Spot); !ok || g != 5 || ans.Offers[0].Spot.InterruptionsPerHour != 0.01 {
		t.Errorf("offer read back as %+v", ans.Offers[0])
	}
	bad, _ := newBrokerClient(srv.URL, "gpb_wrong", srv.Client(), "test")
	_, err = bad.GetWorkload(ctx, "x")
	if err == nil || !strings.Contains(err.Error(), "unauthorized") || strings.Contains(err.Error(), "gpb_wrong") {
		t.Errorf("401: %v", err)
	}
	for _, ep := range []string{"ftp://x", "127.0.0.1:8080", "http://", ""} {
		if _, err := newBrokerClient(ep, token, nil, "t"); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
}
