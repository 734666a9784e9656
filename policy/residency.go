package policy

import (
	"path"
	"slices"
	"sort"

	"github.com/gpubroker/gpubroker/pricing"
)

// geographies maps a residency name to the regions of each cloud inside it,
// as path.Match patterns. Lists are explicit where a cloud's naming does not
// follow borders (AWS "eu-west-2" is London, outside the EU; "eu-central-2" is
// Zurich). A region in no list belongs to no geography, so a residency limit
// excludes it: unknown places fail closed.
var geographies = map[string]map[pricing.Cloud][]string{
	"us": {
		pricing.AWS:   {"us-east-*", "us-west-*", "us-gov-*"},
		pricing.GCP:   {"us-*"},
		pricing.Azure: {"eastus", "eastus2", "eastus3", "westus", "westus2", "westus3", "centralus", "northcentralus", "southcentralus", "westcentralus"},
	},
	"ca": {
		pricing.AWS:   {"ca-*"},
		pricing.GCP:   {"northamerica-northeast*"},
		pricing.Azure: {"canadacentral", "canadaeast"},
	},
	// EU member states only.
	"eu": {
		pricing.AWS: {"eu-west-1", "eu-west-3", "eu-central-1", "eu-north-1", "eu-south-1", "eu-south-2"},
		pricing.GCP: {"europe-west1", "europe-west3", "europe-west4", "europe-west8", "europe-west9", "europe-west10",
			"europe-west12", "europe-north1", "europe-north2", "europe-central2", "europe-southwest1"},
		pricing.Azure: {"westeurope", "northeurope", "francecentral", "francesouth", "germanywestcentral", "germanynorth",
			"swedencentral", "swedensouth", "italynorth", "polandcentral", "spaincentral", "austriaeast"},
	},
	"uk": {
		pricing.AWS:   {"eu-west-2"},
		pricing.GCP:   {"europe-west2"},
		pricing.Azure: {"uksouth", "ukwest"},
	},
	// Europe as a continent: the EU plus the UK, Switzerland and Norway.
	"europe": {
		pricing.AWS: {"eu-*"},
		pricing.GCP: {"europe-*"},
		pricing.Azure: {"westeurope", "northeurope", "francecentral", "francesouth", "germanywestcentral", "germanynorth",
			"swedencentral", "swedensouth", "italynorth", "polandcentral", "spaincentral", "austriaeast",
			"uksouth", "ukwest", "switzerlandnorth", "switzerlandwest", "norwayeast", "norwaywest"},
	},
	"jp": {
		pricing.AWS:   {"ap-northeast-1", "ap-northeast-3"},
		pricing.GCP:   {"asia-northeast1", "asia-northeast2"},
		pricing.Azure: {"japaneast", "japanwest"},
	},
	// Middle East.
	"me": {
		pricing.AWS:   {"me-*", "il-central-1"},
		pricing.GCP:   {"me-*"},
		pricing.Azure: {"uaenorth", "uaecentral", "qatarcentral", "israelcentral"},
	},
	"africa": {
		pricing.AWS:   {"af-*"},
		pricing.GCP:   {"africa-*"},
		pricing.Azure: {"southafricanorth", "southafricawest"},
	},
	// Asia-Pacific: East, South and South-East Asia and Oceania.
	"apac": {
		pricing.AWS: {"ap-*"},
		pricing.GCP: {"asia-*", "australia-*"},
		pricing.Azure: {"japaneast", "japanwest", "koreacentral", "koreasouth", "eastasia", "southeastasia",
			"centralindia", "southindia", "westindia", "jioindiawest", "jioindiacentral",
			"australiaeast", "australiasoutheast", "australiacentral", "australiacentral2", "newzealandnorth",
			"indonesiacentral", "malaysiawest"},
	},
}

// Geographies lists the residency names a policy may use, sorted.
func Geographies() []string {
	out := make([]string, 0, len(geographies))
	for g := range geographies {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// InGeography reports whether a cloud region lies in a named geography. An
// unknown geography contains nothing.
func InGeography(geo string, cloud pricing.Cloud, region string) bool {
	for _, pat := range geographies[geo][cloud] {
		if ok, _ := path.Match(pat, region); ok {
			return true
		}
	}
	return false
}

// GeographiesOf lists the geographies a cloud region lies in, sorted (a
// region is in several: "eu-west-1" is in "eu" and "europe").
func GeographiesOf(cloud pricing.Cloud, region string) []string {
	var out []string
	for _, g := range Geographies() {
		if InGeography(g, cloud, region) {
			out = append(out, g)
		}
	}
	return out
}

// ResidencyAllowed reports whether a region satisfies a residency limit: it
// lies in at least one of the geographies, or the limit is empty.
func ResidencyAllowed(residency []string, cloud pricing.Cloud, region string) bool {
	if len(residency) == 0 {
		return true
	}
	for _, g := range residency {
		if InGeography(g, cloud, region) {
			return true
		}
	}
	return false
}

// CloudAllowed reports whether a workload may run on a cloud: the cloud must
// be in the policy's list (empty = all) and in the workload's own list
// (empty = no further limit). w may be nil for the policy-wide answer.
func CloudAllowed(p *Policy, w *Workload, cloud pricing.Cloud) bool {
	if len(p.Clouds) > 0 && !slices.Contains(p.Clouds, cloud) {
		return false
	}
	if w != nil && len(w.Limits.Clouds) > 0 && !slices.Contains(w.Limits.Clouds, cloud) {
		return false
	}
	return true
}

// RegionAllowed reports whether a workload may run in a cloud region and
// zone. It combines every limit: policy-wide clouds, region globs and
// residency, then the workload's own clouds, region globs, zone globs and
// residency; each list must admit the place, and an empty list admits
// everything. When the workload limits zones, a regional offer (zone "",
// e.g. Azure) is not admitted, since nothing says which zone it would land in.
// w may be nil for the policy-wide answer. The optimizer calls this for every
// candidate offer, so it does no allocation.
func RegionAllowed(p *Policy, w *Workload, cloud pricing.Cloud, region, zone string) bool {
	if !CloudAllowed(p, w, cloud) {
		return false
	}
	if !matchAny(p.Regions, region) || !ResidencyAllowed(p.Residency, cloud, region) {
		return false
	}
	if w == nil {
		return true
	}
	if !matchAny(w.Limits.Regions, region) || !ResidencyAllowed(w.Limits.Residency, cloud, region) {
		return false
	}
	if len(w.Limits.Zones) > 0 && (zone == "" || !matchAny(w.Limits.Zones, zone)) {
		return false
	}
	return true
}

// AllowedClouds lists the clouds a workload may use, in pricing.Clouds order.
func AllowedClouds(p *Policy, w *Workload) []pricing.Cloud {
	var out []pricing.Cloud
	for _, c := range pricing.Clouds() {
		if CloudAllowed(p, w, c) {
			out = append(out, c)
		}
	}
	return out
}

// matchAny reports whether s matches one of the globs; no globs match all.
func matchAny(globs []string, s string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}
