package optimizer

import (
	"fmt"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// geoNames are how notes name a residency geography.
var geoNames = map[string]string{
	"us": "the US", "ca": "Canada", "eu": "the EU", "uk": "the UK", "europe": "Europe", "jp": "Japan",
	"apac": "Asia-Pacific", "me": "the Middle East", "africa": "Africa",
}

var cloudNames = map[pricing.Cloud]string{pricing.AWS: "AWS", pricing.GCP: "GCP", pricing.Azure: "Azure"}

// CoverageNotes says, for every cloud a workload may use, where the catalog
// has no offers at all in the places the policy allows ("the catalog has no
// Azure offers in Europe"), so that a missing placement reads as a gap in
// the data, not as proof that no capacity exists. Notes are deduplicated and
// in workload order.
func CoverageNotes(cat *pricing.Catalog, p *policy.Policy) []string {
	var notes []string
	seen := map[string]bool{}
	offers := cat.Offers()
	for _, w := range p.Workloads {
		clouds := p.Clouds
		if len(w.Limits.Clouds) > 0 {
			clouds = w.Limits.Clouds
		}
		if len(clouds) == 0 {
			clouds = pricing.Clouds()
		}
		regions := p.Regions
		if len(w.Limits.Regions) > 0 {
			regions = w.Limits.Regions
		}
		residency := p.Residency
		if len(w.Limits.Residency) > 0 {
			residency = w.Limits.Residency
		}
		for _, c := range clouds {
			found := false
			for _, o := range offers {
				if o.Cloud == c && (len(regions) == 0 || pricing.MatchAnyGlob(regions, o.Region)) &&
					(len(residency) == 0 || policy.ResidencyAllowed(residency, c, o.Region)) {
					found = true
					break
				}
			}
			if found {
				continue
			}
			note := fmt.Sprintf("the catalog has no %s offers %s", cloudNames[c], where(regions, residency))
			if !seen[note] {
				seen[note] = true
				notes = append(notes, note)
			}
		}
	}
	return notes
}

func where(regions, residency []string) string {
	var parts []string
	if len(residency) > 0 {
		names := make([]string, len(residency))
		for i, g := range residency {
			names[i] = g
			if n, ok := geoNames[g]; ok {
				names[i] = n
			}
		}
		parts = append(parts, "in "+strings.Join(names, " or "))
	}
	if len(regions) > 0 && !(len(regions) == 1 && regions[0] == "*") {
		parts = append(parts, "in regions matching "+strings.Join(regions, ", "))
	}
	if len(parts) == 0 {
		return "anywhere"
	}
	return strings.Join(parts, ", ")
}
