//go:build !agentonly

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/aws"
	"github.com/gpubroker/gpubroker/providers/azure"
	"github.com/gpubroker/gpubroker/providers/gcp"
)

// realCompute builds the compute adapter of one real cloud from its
// fleet.clouds section (docs/fleet-clouds.md maps each key). Credentials
// come from each SDK's standard chain; a missing one is a startup error.
func realCompute(ctx context.Context, name string, c config.FleetCloud, log *slog.Logger) (pricing.Cloud, providers.Compute, error) {
	perRegion := func(v string) map[string]string {
		if v == "" {
			return nil
		}
		m := map[string]string{}
		for _, r := range c.Regions {
			m[r] = v
		}
		return m
	}
	switch name {
	case "aws":
		regions := map[string]aws.RegionLaunch{}
		for _, r := range c.Regions {
			rl := aws.RegionLaunch{ImageID: c.Image, SecurityGroupIDs: c.SecurityGroups}
			if c.Subnet != "" {
				rl.SubnetIDs = []string{c.Subnet}
			}
			regions[r] = rl
		}
		comp, err := aws.NewCompute(ctx, aws.ComputeConfig{Regions: regions, InstanceProfile: c.Identity, KeyName: c.SSHKey,
			EC2Endpoint: c.Endpoint, Logger: log})
		if err != nil {
			return "", nil, fmt.Errorf("fleet.clouds.aws: %w", err)
		}
		return pricing.AWS, comp, nil
	case "gcp":
		comp, err := gcp.NewCompute(ctx, gcp.ComputeConfig{Project: c.Project, Regions: c.Regions, Image: c.Image,
			Network: c.Network, Subnetworks: perRegion(c.Subnet), ServiceAccount: c.Identity, SSHKeys: c.SSHKey,
			Endpoint: c.Endpoint, Logger: log})
		if err != nil {
			return "", nil, fmt.Errorf("fleet.clouds.gcp: %w", err)
		}
		return pricing.GCP, comp, nil
	case "azure":
		comp, err := azure.NewCompute(ctx, azure.ComputeConfig{SubscriptionID: c.Subscription, ResourceGroup: c.ResourceGroup,
			Subnets: perRegion(c.Subnet), Image: c.Image, SSHPublicKey: c.SSHKey, Identity: c.Identity, Endpoint: c.Endpoint, Logger: log})
		if err != nil {
			return "", nil, fmt.Errorf("fleet.clouds.azure: %w", err)
		}
		return pricing.Azure, comp, nil
	}
	return "", nil, fmt.Errorf("fleet.clouds.%s: unknown cloud; want aws, gcp, azure (or fake for tests)", name)
}
