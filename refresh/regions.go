package refresh

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/gpubroker/gpubroker/pricing"
)

// defaultRegions are the regions refreshed when a policy or flag gives only
// globs (or nothing): each cloud's regions that sell data-centre GPUs to
// the public, as listed on its GPU pages at the end of 2026. A literal
// region name outside this list is still refreshed when asked for by name.
var defaultRegions = map[pricing.Cloud][]string{
	pricing.AWS: {"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
		"eu-west-1", "eu-west-2", "eu-central-1", "eu-north-1",
		"ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2"},
	pricing.GCP: {"us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west4",
		"europe-west1", "europe-west2", "europe-west3", "europe-west4",
		"asia-east1", "asia-northeast1", "asia-northeast3", "asia-south1", "asia-southeast1", "australia-southeast1"},
	pricing.Azure: {"eastus", "eastus2", "southcentralus", "westus2", "westus3", "centralus", "northcentralus",
		"canadacentral", "northeurope", "westeurope", "uksouth", "swedencentral", "francecentral",
		"japaneast", "koreacentral", "australiaeast", "southeastasia", "centralindia"},
}

// DefaultRegions returns the regions refreshed for cloud when no exact
// region names are given (a copy).
func DefaultRegions(cloud pricing.Cloud) []string { return slices.Clone(defaultRegions[cloud]) }

var (
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+$`)
	gcpRegion   = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
	azureRegion = regexp.MustCompile(`^[a-z]+[a-z0-9]*$`)
)

// CloudOfRegion tells from its shape which cloud a region name belongs to:
// AWS "us-east-1", GCP "us-central1", Azure "eastus". It returns "" for
// anything else.
func CloudOfRegion(name string) pricing.Cloud {
	switch {
	case awsRegion.MatchString(name):
		return pricing.AWS
	case gcpRegion.MatchString(name):
		return pricing.GCP
	case azureRegion.MatchString(name):
		return pricing.Azure
	}
	return ""
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// ResolveRegions turns region patterns (from --region or a policy's
// regions) into the exact regions to refresh for one cloud. Globs select
// from DefaultRegions; exact names are taken as given when their shape
// belongs to cloud (so "--region us-east-1,eastus" splits between AWS and
// Azure). No patterns means all default regions.
func ResolveRegions(cloud pricing.Cloud, patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return DefaultRegions(cloud), nil
	}
	var out []string
	add := func(r string) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !isGlob(p) {
			if CloudOfRegion(p) == "" {
				return nil, fmt.Errorf("region %q is not an AWS (us-east-1), GCP (us-central1) or Azure (eastus) region name", p)
			}
			if CloudOfRegion(p) == cloud {
				add(p)
			}
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("region pattern %q: %v", p, err)
		}
		for _, r := range defaultRegions[cloud] {
			if ok, _ := path.Match(p, r); ok {
				add(r)
			}
		}
	}
	return out, nil
}
