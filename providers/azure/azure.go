// Package azure gathers GPU offers from Azure through the official
// azure-sdk-for-go: GPU VM sizes and their region and zone restrictions
// from Compute resource SKUs, on-demand and Spot prices from the public
// Retail Prices API (through an azcore pipeline, so it shares the SDK's
// retry, logging and transport), and Spot eviction-rate buckets from Azure
// Resource Graph (SpotResources).
//
// Every SDK client is narrowed to the calls made; throttling (429 with
// Retry-After) and transient errors (408, 5xx, dropped connections) are
// retried by azcore's retry policy with exponential backoff and jitter.
//
// Compute (compute.go) launches, lists and deletes VMs (with their NICs
// and OS disks) for the fleet through armcompute and armnetwork; see
// docs/fleet-clouds.md.
package azure

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resourcegraph/armresourcegraph"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// SourceName is the value of Offer.Source for offers gathered here.
const SourceName = "azure live"

// ResourceManagerCloud is the public Azure cloud with ARM requests sent to
// endpoint (a proxy or private endpoint) while tokens keep ARM's public
// audience; "" means the public cloud unchanged.
func ResourceManagerCloud(endpoint string) cloud.Configuration {
	if endpoint == "" {
		return cloud.Configuration{}
	}
	c := cloud.AzurePublic
	services := map[cloud.ServiceName]cloud.ServiceConfiguration{}
	for k, v := range c.Services {
		services[k] = v
	}
	rm := services[cloud.ResourceManager]
	rm.Endpoint = endpoint
	services[cloud.ResourceManager] = rm
	c.Services = services
	return c
}

// DefaultRetailPricesURL is the public Retail Prices API.
const DefaultRetailPricesURL = "https://prices.azure.com/api/retail/prices"

// Config configures a Source.
type Config struct {
	// Regions to gather when a query names none (ARM names, "eastus");
	// empty means every region with GPU sizes.
	Regions []string
	// HTTPClient carries every request (ARM and Retail Prices); nil means
	// azcore's default transport.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now stamps offers' ObservedAt.
	Now func() time.Time
	// MaxConcurrency bounds the regions fetched at once (default 4).
	MaxConcurrency int

	// SubscriptionID whose view of resource SKUs (restrictions) is read;
	// empty means $AZURE_SUBSCRIPTION_ID.
	SubscriptionID string
	// Credential for ARM; nil means azidentity.DefaultAzureCredential
	// (environment, workload identity, managed identity, Azure CLI, azd).
	Credential azcore.TokenCredential
	// Cloud selects ARM's endpoint and token audience; zero means Azure
	// public cloud. Tests point it at a local server.
	Cloud cloud.Configuration
	// RetailPricesURL overrides DefaultRetailPricesURL.
	RetailPricesURL string
	// InsecureAllowCredentialWithHTTP lets tokens travel over plain HTTP;
	// for tests against local servers only.
	InsecureAllowCredentialWithHTTP bool
	// Retry tunes azcore's retry policy; zero values take defaults of 4
	// retries, 800ms first delay, 60s cap.
	Retry policy.RetryOptions
}

// skuLister is the part of armcompute.ResourceSKUsClient used here.
type skuLister interface {
	NewListPager(*armcompute.ResourceSKUsClientListOptions) *runtime.Pager[armcompute.ResourceSKUsClientListResponse]
}

// graphQuerier is the part of armresourcegraph.Client used here.
type graphQuerier interface {
	Resources(context.Context, armresourcegraph.QueryRequest, *armresourcegraph.ClientResourcesOptions) (armresourcegraph.ClientResourcesResponse, error)
}

// doer sends one request through a pipeline; runtime.Pipeline is one.
type doer interface {
	Do(*policy.Request) (*http.Response, error)
}

var (
	_ skuLister    = (*armcompute.ResourceSKUsClient)(nil)
	_ graphQuerier = (*armresourcegraph.Client)(nil)
	_ doer         = runtime.Pipeline{}
)

// Source gathers Azure GPU offers. It is safe for concurrent use.
type Source struct {
	cfg    Config
	log    *slog.Logger
	skus   skuLister
	graph  graphQuerier
	retail doer
}

// New builds a Source. It asks the credential for an ARM token once, so that
// a machine without Azure credentials fails here with an error wrapping
// providers.ErrNoCredentials rather than on every refresh.
func New(ctx context.Context, cfg Config) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 4
	}
	if cfg.RetailPricesURL == "" {
		cfg.RetailPricesURL = DefaultRetailPricesURL
	}
	if cfg.Cloud.Services == nil {
		cfg.Cloud = cloud.AzurePublic
	}
	if cfg.Retry.MaxRetries == 0 {
		cfg.Retry.MaxRetries = 4
	}
	if cfg.SubscriptionID == "" {
		cfg.SubscriptionID = os.Getenv("AZURE_SUBSCRIPTION_ID")
	}
	if cfg.SubscriptionID == "" {
		return nil, fmt.Errorf("azure: no subscription (set AZURE_SUBSCRIPTION_ID): %w", providers.ErrNoCredentials)
	}
	if cfg.Credential == nil {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("azure: default credential: %w: %w", providers.ErrNoCredentials, err)
		}
		cfg.Credential = cred
	}
	audience := cfg.Cloud.Services[cloud.ResourceManager].Audience
	if _, err := cfg.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{audience + "/.default"}}); err != nil {
		return nil, fmt.Errorf("azure: getting an ARM token: %w: %w", providers.ErrNoCredentials, err)
	}

	copts := policy.ClientOptions{
		Cloud:                           cfg.Cloud,
		Retry:                           cfg.Retry,
		InsecureAllowCredentialWithHTTP: cfg.InsecureAllowCredentialWithHTTP,
	}
	if cfg.HTTPClient != nil {
		copts.Transport = cfg.HTTPClient
	}
	aopts := &arm.ClientOptions{ClientOptions: copts, DisableRPRegistration: true}
	skus, err := armcompute.NewResourceSKUsClient(cfg.SubscriptionID, cfg.Credential, aopts)
	if err != nil {
		return nil, fmt.Errorf("azure: resource SKUs client: %w", err)
	}
	graph, err := armresourcegraph.NewClient(cfg.Credential, aopts)
	if err != nil {
		return nil, fmt.Errorf("azure: resource graph client: %w", err)
	}
	// The Retail Prices API is public: a pipeline without the bearer-token
	// policy, but with the same retry and transport.
	retail := runtime.NewPipeline("gpubroker-retailprices", "v1", runtime.PipelineOptions{}, &copts)
	return &Source{cfg: cfg, log: cfg.Logger.With("cloud", "azure"), skus: skus, graph: graph, retail: retail}, nil
}

// Cloud is pricing.Azure.
func (s *Source) Cloud() pricing.Cloud { return pricing.Azure }
