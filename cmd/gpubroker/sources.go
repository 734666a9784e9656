package main

import (
	"context"
	"fmt"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/aws"
	"github.com/gpubroker/gpubroker/refresh"
)

// cloudSources is the one place each cloud's price source is wired in; both
// `catalog refresh` and `serve` use it.
//
// Wiring a cloud (after merging its branch): return the adapter through a
// concrete variable so a nil *Source never becomes a non-nil interface:
//
//	pricing.AWS: func(ctx context.Context, c refresh.SourceConfig) (refresh.OfferSource, error) {
//		s, err := aws.New(ctx, aws.Config{Regions: c.Regions, Logger: c.Logger, MaxConcurrency: c.Concurrency})
//		if err != nil {
//			return nil, err
//		}
//		return s, nil
//	},
func cloudSources() refresh.Registry {
	return refresh.Registry{
		pricing.AWS: func(ctx context.Context, c refresh.SourceConfig) (refresh.OfferSource, error) {
			s, err := aws.New(ctx, aws.Config{Regions: c.Regions, Logger: c.Logger, MaxConcurrency: c.Concurrency})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		pricing.GCP:   notBuiltIn(pricing.GCP),   // TODO(lead): providers/gcp.New once branch gcpazure is merged
		pricing.Azure: notBuiltIn(pricing.Azure), // TODO(lead): providers/azure.New once branch gcpazure is merged
	}
}

// notBuiltIn stands for a cloud whose adapter this build lacks.
func notBuiltIn(c pricing.Cloud) refresh.Factory {
	return func(context.Context, refresh.SourceConfig) (refresh.OfferSource, error) {
		return nil, fmt.Errorf("this gpubroker build has no %s price source", c)
	}
}
