package policy

import (
	"fmt"
	"strings"
)

// Summary describes a policy in one paragraph: its workloads by kind, the
// clouds, regions and residency it allows, its quotas and budgets.
func Summary(p *Policy) string {
	var b strings.Builder
	counts := map[Kind]int{}
	for _, w := range p.Workloads {
		counts[w.Kind]++
	}
	var kinds []string
	for _, k := range []Kind{Training, Inference, Batch} {
		if n := counts[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
	}
	fmt.Fprintf(&b, "%s (%s) on %s", count(len(p.Workloads), "workload"), strings.Join(kinds, ", "), cloudList(p.Clouds))
	if !(len(p.Regions) == 1 && p.Regions[0] == "*") {
		fmt.Fprintf(&b, " in regions %s", strings.Join(p.Regions, ", "))
	}
	if len(p.Residency) > 0 {
		fmt.Fprintf(&b, ", data kept in %s", strings.Join(p.Residency, ", "))
	}
	fmt.Fprintf(&b, "; %s, %s; planning horizon %s.", count(len(p.Quotas), "quota"), count(len(p.Budgets), "budget"), FormatDuration(p.Horizon))
	return b.String()
}

func count(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
