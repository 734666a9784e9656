// Package provider is the Terraform / OpenTofu provider for gpubroker: the
// gpubroker_offers and gpubroker_placement data sources and the
// gpubroker_workload resource. With an endpoint it asks a running broker
// (`gpubroker serve`); without one it works offline on the price snapshot
// compiled into the binary. Either way the answers come from the project's
// own packages (pricing, policy, optimizer) or the broker that runs them:
// the provider holds no placement or policy rules of its own.
package provider

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/catalog"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Environment variables read when the provider block leaves a setting out.
const (
	EnvEndpoint = "GPUBROKER_ENDPOINT"
	EnvToken    = "GPUBROKER_TOKEN"
)

// Options are what the binary (or a test) passes in; zero values take
// defaults.
type Options struct {
	// Version is the provider's version, shown in the User-Agent.
	Version string
	// HTTPClient calls the broker; default a client with a 60 s timeout.
	HTTPClient *http.Client
	// Now is the clock (offer staleness, plan time); default time.Now.
	Now func() time.Time
	// Getenv reads the environment; default os.Getenv.
	Getenv func(string) string
}

// New returns the provider factory for providerserver.
func New(opts Options) func() provider.Provider {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	return func() provider.Provider { return &gpubrokerProvider{opts: opts} }
}

type gpubrokerProvider struct {
	opts Options
}

var _ provider.Provider = (*gpubrokerProvider)(nil)

type providerModel struct {
	Endpoint types.String `tfsdk:"endpoint"`
	Token    types.String `tfsdk:"token"`
}

func (p *gpubrokerProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "gpubroker"
	resp.Version = p.opts.Version
}

func (p *gpubrokerProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The gpubroker provider finds the cheapest GPU offers and placements across AWS, GCP and Azure " +
			"and registers workloads with a gpubroker broker. With `endpoint` (or `" + EnvEndpoint + "`) it asks a running " +
			"broker (`gpubroker serve`), whose prices are refreshed from the clouds; without one it works offline on the " +
			"price snapshot built into the provider, and the `gpubroker_workload` resource is unavailable.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "URL of the broker's API, e.g. `http://127.0.0.1:8080`. Default: the `" + EnvEndpoint +
					"` environment variable; when neither is set the provider works offline.",
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				MarkdownDescription: "An admin token of the broker (`gpb_...`, printed by the broker's first start or made with " +
					"`POST /api/v1/tokens`). Default: the `" + EnvToken + "` environment variable.",
			},
		},
	}
}

// providerData is what Configure hands to the data sources and resources.
type providerData struct {
	// source answers offers and plans: the broker, or the snapshot.
	source source
	// broker is nil offline.
	broker *apiv1.Client
	now    func() time.Time
}

func (p *gpubrokerProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Endpoint.IsUnknown() || cfg.Token.IsUnknown() {
		// Known only after apply (e.g. from another resource): configure
		// again later, when Terraform has the values.
		return
	}
	endpoint, token := cfg.Endpoint.ValueString(), cfg.Token.ValueString()
	if cfg.Endpoint.IsNull() {
		endpoint = p.opts.Getenv(EnvEndpoint)
	}
	if cfg.Token.IsNull() {
		token = p.opts.Getenv(EnvToken)
	}
	data := &providerData{now: p.opts.Now}
	if endpoint == "" {
		data.source = &snapshotSource{now: p.opts.Now}
	} else {
		if token == "" {
			resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing broker token",
				"endpoint is set but no token: set token in the provider block or "+EnvToken+" to an admin token of the broker.")
			return
		}
		c, err := newBrokerClient(endpoint, token, p.opts.HTTPClient, p.opts.Version)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid broker endpoint", err.Error())
			return
		}
		data.source, data.broker = brokerSource{c}, c
	}
	resp.DataSourceData = data
	resp.ResourceData = data
}

func (p *gpubrokerProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newWorkloadResource}
}

func (p *gpubrokerProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newOffersDataSource, newPlacementDataSource, newBudgetsDataSource}
}

// source answers the data sources: the broker online, the embedded
// snapshot offline.
type source interface {
	// Offers returns the catalog's offers matching q.
	Offers(ctx context.Context, q pricing.Query) (offersAnswer, error)
	// Plan plans a policy document (already checked by policy.Parse).
	Plan(ctx context.Context, name string, doc []byte) (*optimizer.Plan, error)
}

var (
	_ source = brokerSource{}
	_ source = (*snapshotSource)(nil)
)

// snapshotSource answers from the price snapshot compiled into the binary,
// planning with the optimizer in process.
type snapshotSource struct {
	once sync.Once
	cat  *pricing.Catalog
	err  error
	now  func() time.Time
}

func (s *snapshotSource) catalog() (*pricing.Catalog, error) {
	s.once.Do(func() {
		// The one catalog loader; with no store it is the embedded
		// snapshot with the built-in spot defaults.
		s.cat, s.err = catalog.Load(context.Background(), nil)
	})
	return s.cat, s.err
}

func (s *snapshotSource) Offers(_ context.Context, q pricing.Query) (offersAnswer, error) {
	cat, err := s.catalog()
	if err != nil {
		return offersAnswer{}, err
	}
	issues := cat.CheckSanity().ByKey
	if issues == nil {
		issues = map[string][]pricing.Issue{}
	}
	return offersAnswer{GeneratedAt: cat.GeneratedAt, Source: cat.Source, Offers: cat.Query(q), Issues: issues}, nil
}

func (s *snapshotSource) Plan(_ context.Context, name string, doc []byte) (*optimizer.Plan, error) {
	cat, err := s.catalog()
	if err != nil {
		return nil, err
	}
	pol, err := policy.Parse(name, doc)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	return optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: now().UTC().Truncate(time.Second)})
}

// configured fetches the provider's data in a data source's or resource's
// Configure; nil before the provider is configured (validation runs then).
func configured(data any) (*providerData, error) {
	if data == nil {
		return nil, nil
	}
	d, ok := data.(*providerData)
	if !ok {
		return nil, fmt.Errorf("unexpected provider data %T; this is a bug in the provider", data)
	}
	return d, nil
}
