// Package gcp gathers GPU offers from Google Cloud through its official Go
// clients: accelerator and machine types per zone from the Compute Engine
// API (aggregated lists), on-demand and Spot prices from the Cloud Billing
// Catalog SKUs of Compute Engine. GCP bills a GPU VM as its host (vCPUs and
// memory of the machine family) plus the GPUs attached, so an offer's price
// is built the same way.
//
// Every SDK call goes through a small interface holding only the calls made;
// retries of throttling and transient errors use gax call options with
// jittered exponential backoff and a bounded number of attempts.
//
// Compute (compute.go) launches, lists and deletes instances for the fleet
// through instances.insert/aggregatedList/delete and zoneOperations.wait;
// see docs/fleet-clouds.md.
package gcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"cloud.google.com/go/auth/credentials"
	billing "cloud.google.com/go/billing/apiv1"
	"cloud.google.com/go/billing/apiv1/billingpb"
	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// ComputeEngineService is the Cloud Billing Catalog service ID of Compute
// Engine, the parent of its SKUs.
const ComputeEngineService = "6F81-5844-456A"

// SourceName is the value of Offer.Source for offers gathered here.
const SourceName = "gcp live"

// Config configures a Source. Zero values are usable defaults except
// Project, which comes from the credentials when empty.
type Config struct {
	// Regions to gather when a query names none; empty means every region.
	Regions []string
	// HTTPClient is the base client; credentials are layered on top of its
	// transport. nil means http.DefaultTransport.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now stamps offers' ObservedAt.
	Now func() time.Time
	// MaxConcurrency bounds the listings run at once (default 3: accelerator
	// types, machine types and SKUs together).
	MaxConcurrency int

	// Project whose Compute Engine view is listed (machine and accelerator
	// types can differ per project). Empty: the credentials' project.
	Project string
	// BillingAPIKey, when set, authenticates Cloud Billing Catalog calls
	// with an API key instead of the credentials.
	BillingAPIKey string
	// ComputeEndpoint and BillingEndpoint override the API endpoints
	// (tests point them at local servers).
	ComputeEndpoint string
	BillingEndpoint string
	// WithoutAuthentication sends requests without credentials; for tests
	// against local servers only.
	WithoutAuthentication bool
	// ClientOptions are added to every client's options.
	ClientOptions []option.ClientOption
	// Retry tunes retries of throttling and transient errors.
	Retry Retry
}

// Retry tunes the backoff of retried calls. Each page request is retried on
// its own.
type Retry struct {
	// Attempts is the most tries of one request (default 5).
	Attempts int
	// Initial and Max bound the backoff pause before jitter (defaults 500ms
	// and 30s); each pause is drawn uniformly from (0, current bound].
	Initial, Max time.Duration
}

// acceleratorTypes is the part of compute.AcceleratorTypesClient used here.
type acceleratorTypes interface {
	AggregatedList(context.Context, *computepb.AggregatedListAcceleratorTypesRequest, ...gax.CallOption) *compute.AcceleratorTypesScopedListPairIterator
}

// machineTypes is the part of compute.MachineTypesClient used here.
type machineTypes interface {
	AggregatedList(context.Context, *computepb.AggregatedListMachineTypesRequest, ...gax.CallOption) *compute.MachineTypesScopedListPairIterator
}

// catalog is the part of billing.CloudCatalogClient used here.
type catalog interface {
	ListSkus(context.Context, *billingpb.ListSkusRequest, ...gax.CallOption) *billing.SkuIterator
}

var (
	_ acceleratorTypes = (*compute.AcceleratorTypesClient)(nil)
	_ machineTypes     = (*compute.MachineTypesClient)(nil)
	_ catalog          = (*billing.CloudCatalogClient)(nil)
)

// Source gathers GCP GPU offers. It is safe for concurrent use.
type Source struct {
	cfg      Config
	log      *slog.Logger
	accels   acceleratorTypes
	machines machineTypes
	skus     catalog
	callOpts []gax.CallOption
	closers  []func() error
}

// New builds a Source. Credentials come from Application Default
// Credentials; when there are none the error wraps
// providers.ErrNoCredentials.
func New(ctx context.Context, cfg Config) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 3
	}
	if cfg.Retry.Attempts <= 0 {
		cfg.Retry.Attempts = 5
	}
	if cfg.Retry.Initial <= 0 {
		cfg.Retry.Initial = 500 * time.Millisecond
	}
	if cfg.Retry.Max <= 0 {
		cfg.Retry.Max = 30 * time.Second
	}
	base := http.DefaultTransport
	var timeout time.Duration
	if cfg.HTTPClient != nil {
		if cfg.HTTPClient.Transport != nil {
			base = cfg.HTTPClient.Transport
		}
		timeout = cfg.HTTPClient.Timeout
	}

	computeOpts := append([]option.ClientOption(nil), cfg.ClientOptions...)
	billingOpts := append([]option.ClientOption(nil), cfg.ClientOptions...)
	if cfg.ComputeEndpoint != "" {
		computeOpts = append(computeOpts, option.WithEndpoint(cfg.ComputeEndpoint))
	}
	if cfg.BillingEndpoint != "" {
		billingOpts = append(billingOpts, option.WithEndpoint(cfg.BillingEndpoint))
	}
	if cfg.WithoutAuthentication {
		hc := &http.Client{Transport: base, Timeout: timeout}
		computeOpts = append(computeOpts, option.WithoutAuthentication(), option.WithHTTPClient(hc))
		billingOpts = append(billingOpts, option.WithoutAuthentication(), option.WithHTTPClient(hc))
		if cfg.Project == "" {
			return nil, errors.New("gcp: a project is required without authentication")
		}
	} else {
		creds, err := detectCredentials(ctx, &credentials.DetectOptions{
			Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
		})
		if err != nil {
			return nil, fmt.Errorf("gcp: application default credentials: %w: %w", providers.ErrNoCredentials, err)
		}
		if cfg.Project == "" {
			p, err := creds.ProjectID(ctx)
			if err != nil || p == "" {
				return nil, fmt.Errorf("gcp: no project configured and none in the credentials (set it or GOOGLE_CLOUD_PROJECT): %v", err)
			}
			cfg.Project = p
		}
		authed := func(extra ...option.ClientOption) (*http.Client, error) {
			tr, err := htransport.NewTransport(ctx, base, extra...)
			if err != nil {
				return nil, err
			}
			return &http.Client{Transport: tr, Timeout: timeout}, nil
		}
		chc, err := authed(option.WithAuthCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("gcp: compute transport: %w", err)
		}
		billingAuth := option.WithAuthCredentials(creds)
		if cfg.BillingAPIKey != "" {
			billingAuth = option.WithAPIKey(cfg.BillingAPIKey)
		}
		bhc, err := authed(billingAuth)
		if err != nil {
			return nil, fmt.Errorf("gcp: billing transport: %w", err)
		}
		computeOpts = append(computeOpts, option.WithHTTPClient(chc))
		billingOpts = append(billingOpts, option.WithHTTPClient(bhc))
	}

	s := &Source{cfg: cfg, log: cfg.Logger.With("cloud", "gcp")}
	s.callOpts = []gax.CallOption{gax.WithRetry(func() gax.Retryer { return newRetryer(cfg.Retry) })}
	ac, err := compute.NewAcceleratorTypesRESTClient(ctx, computeOpts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: accelerator types client: %w", err)
	}
	mc, err := compute.NewMachineTypesRESTClient(ctx, computeOpts...)
	if err != nil {
		ac.Close()
		return nil, fmt.Errorf("gcp: machine types client: %w", err)
	}
	bc, err := billing.NewCloudCatalogRESTClient(ctx, billingOpts...)
	if err != nil {
		ac.Close()
		mc.Close()
		return nil, fmt.Errorf("gcp: cloud catalog client: %w", err)
	}
	s.accels, s.machines, s.skus = ac, mc, bc
	s.closers = []func() error{ac.Close, mc.Close, bc.Close}
	return s, nil
}

// Close releases the clients.
func (s *Source) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Cloud is pricing.GCP.
func (s *Source) Cloud() pricing.Cloud { return pricing.GCP }
