//go:build !agentonly

package main

import (
	"context"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/aws"
	"github.com/gpubroker/gpubroker/providers/azure"
	"github.com/gpubroker/gpubroker/providers/gcp"
	"github.com/gpubroker/gpubroker/refresh"
)

// cloudSources is the one place each cloud's price source is wired in; both
// `catalog refresh` and `serve` use it.
//
// Each adapter is returned through a concrete variable so that a nil
// *Source never becomes a non-nil interface. Credentials come from each
// SDK's standard chain; without them New fails with
// providers.ErrNoCredentials and the cloud is skipped.
func cloudSources() refresh.Registry {
	return refresh.Registry{
		pricing.AWS: func(ctx context.Context, c refresh.SourceConfig) (refresh.OfferSource, error) {
			s, err := aws.New(ctx, aws.Config{Regions: c.Regions, Logger: c.Logger, MaxConcurrency: c.Concurrency,
				SpotAdvisorURL: c.Endpoints.AWSSpotAdvisor})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		pricing.GCP: func(ctx context.Context, c refresh.SourceConfig) (refresh.OfferSource, error) {
			s, err := gcp.New(ctx, gcp.Config{Regions: c.Regions, Logger: c.Logger, MaxConcurrency: c.Concurrency,
				ComputeEndpoint: c.Endpoints.GCPCompute, BillingEndpoint: c.Endpoints.GCPBilling})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		pricing.Azure: func(ctx context.Context, c refresh.SourceConfig) (refresh.OfferSource, error) {
			s, err := azure.New(ctx, azure.Config{Regions: c.Regions, Logger: c.Logger, MaxConcurrency: c.Concurrency,
				Cloud: azure.ResourceManagerCloud(c.Endpoints.AzureResourceManager), RetailPricesURL: c.Endpoints.AzureRetailPrices})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
	}
}
