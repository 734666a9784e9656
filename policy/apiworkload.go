package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// WorkloadFromJSON parses one workload registered through the broker API:
// name, team and kind beside spec, a JSON object with the fields a policy
// file's workload has (gpu, work, deadline, spot, replicas, placement, ...;
// docs/policy.md). The workload gets the same defaults and checks as in a
// file; errors come back as an ErrorList whose positions are in the JSON
// text "source" names.
func WorkloadFromJSON(source, name, team, kind string, spec []byte) (Workload, error) {
	fields := map[string]json.RawMessage{}
	if s := bytes.TrimSpace(spec); len(s) > 0 && string(s) != "null" {
		if err := json.Unmarshal(s, &fields); err != nil {
			return Workload{}, ErrorList{{Pos: Pos{source, 1, 1}, Msg: "spec must be a JSON object of workload fields"}}
		}
	}
	for _, k := range []string{"name", "team", "kind"} {
		if _, ok := fields[k]; ok {
			return Workload{}, ErrorList{{Pos: Pos{source, 1, 1},
				Msg: fmt.Sprintf("spec.%s: give %s beside spec, not inside it", k, k)}}
		}
	}
	set := func(k, v string) {
		if v != "" {
			fields[k], _ = json.Marshal(v)
		}
	}
	set("name", name)
	set("team", team)
	set("kind", kind)
	doc, err := json.Marshal(map[string]any{"workloads": []any{fields}})
	if err != nil {
		return Workload{}, fmt.Errorf("encoding workload %s: %w", name, err)
	}
	p, err := Parse(source, doc)
	if err != nil {
		return Workload{}, err
	}
	return p.Workloads[0], nil
}

// WithWorkloads returns a copy of p that also plans extra (workloads from
// the API). A workload whose name the policy file already uses is left
// out, and its name is returned in skipped: the file, which the operator
// controls, wins.
func (p *Policy) WithWorkloads(extra []Workload) (out *Policy, skipped []string) {
	cp := *p
	cp.Workloads = append([]Workload(nil), p.Workloads...)
	have := make(map[string]bool, len(p.Workloads)+len(extra))
	for _, w := range p.Workloads {
		have[w.Name] = true
	}
	for _, w := range extra {
		if have[w.Name] {
			skipped = append(skipped, w.Name)
			continue
		}
		have[w.Name] = true
		cp.Workloads = append(cp.Workloads, w)
	}
	return &cp, skipped
}
