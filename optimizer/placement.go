package optimizer

import (
	"slices"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// placementAllowed applies the policy-wide and per-workload cloud, region,
// zone and residency limits. Zone globs only match offers that have a zone:
// a regional offer cannot promise to land in an allowed zone.
func placementAllowed(p *policy.Policy, w *policy.Workload, c pricing.Cloud, region, zone string) bool {
	if len(p.Clouds) > 0 && !slices.Contains(p.Clouds, c) {
		return false
	}
	if len(w.Limits.Clouds) > 0 && !slices.Contains(w.Limits.Clouds, c) {
		return false
	}
	if len(p.Regions) > 0 && !pricing.MatchAnyGlob(p.Regions, region) {
		return false
	}
	if len(w.Limits.Regions) > 0 && !pricing.MatchAnyGlob(w.Limits.Regions, region) {
		return false
	}
	if len(w.Limits.Zones) > 0 && (zone == "" || !pricing.MatchAnyGlob(w.Limits.Zones, zone)) {
		return false
	}
	geo := geography(c, region)
	if len(p.Residency) > 0 && !slices.Contains(p.Residency, geo) {
		return false
	}
	if len(w.Limits.Residency) > 0 && !slices.Contains(w.Limits.Residency, geo) {
		return false
	}
	return true
}

// geography maps a region to a data-residency area: "us", "eu", "apac", or
// for the rest of the world the region's own prefix ("ca", "sa", "me").
func geography(c pricing.Cloud, region string) string {
	r := strings.ToLower(region)
	switch c {
	case pricing.AWS:
		switch {
		case strings.HasPrefix(r, "us-"):
			return "us"
		case strings.HasPrefix(r, "eu-"):
			return "eu"
		case strings.HasPrefix(r, "ap-"):
			return "apac"
		}
	case pricing.GCP:
		switch {
		case strings.HasPrefix(r, "us-"):
			return "us"
		case strings.HasPrefix(r, "europe-"):
			return "eu"
		case strings.HasPrefix(r, "asia-"), strings.HasPrefix(r, "australia-"):
			return "apac"
		case strings.HasPrefix(r, "northamerica-"):
			return "ca"
		case strings.HasPrefix(r, "southamerica-"):
			return "sa"
		}
	case pricing.Azure:
		for _, eu := range []string{"europe", "uk", "france", "germany", "sweden", "switzerland", "norway", "poland", "italy", "spain"} {
			if strings.Contains(r, eu) {
				return "eu"
			}
		}
		for _, ap := range []string{"asia", "japan", "korea", "australia", "india"} {
			if strings.Contains(r, ap) {
				return "apac"
			}
		}
		if strings.HasPrefix(r, "canada") {
			return "ca"
		}
		if strings.HasSuffix(r, "us") || strings.HasSuffix(r, "us2") || strings.HasSuffix(r, "us3") {
			return "us"
		}
	}
	if i := strings.IndexAny(r, "-"); i > 0 {
		return r[:i]
	}
	return r
}
