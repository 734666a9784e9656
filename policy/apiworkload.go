package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// WorkloadFromJSON parses one workload registered through the broker API:
// name, team and kind beside spec, a JSON object with the fields a policy
// file's workload has (gpu, work, deadline, spot, replicas, placement,
// schedule, load, ...; docs/policy.md). The workload gets the same defaults
// and checks as in a file; errors come back as an ErrorList whose positions
// are lines and columns in spec, under the name source.
func WorkloadFromJSON(source, name, team, kind string, spec []byte) (Workload, error) {
	s := bytes.TrimSpace(spec)
	if len(s) == 0 || string(s) == "null" {
		spec = []byte("{}")
	}
	if len(spec) > MaxFileSize {
		return Workload{}, ErrorList{{Pos: Pos{source, 1, 1}, Msg: fmt.Sprintf("spec is larger than %d MiB", MaxFileSize>>20)}}
	}
	// JSON is checked as JSON first: YAML would accept more (comments,
	// unquoted words), and the API promises JSON.
	if err := json.Unmarshal(spec, new(any)); err != nil {
		return Workload{}, ErrorList{jsonError(source, spec, err)}
	}
	// Valid JSON holds tabs only as whitespace between tokens (inside
	// strings they must be escaped), and the YAML parser refuses tabs as
	// indentation; a space in their place keeps every column.
	root, err := parseYAML(source, bytes.ReplaceAll(spec, []byte("\t"), []byte(" ")))
	if err != nil {
		return Workload{}, err
	}
	if root.Kind != yaml.MappingNode {
		return Workload{}, ErrorList{{Pos: Pos{source, root.Line, root.Column},
			Msg: fmt.Sprintf("spec must be a JSON object of workload fields, got %s", describe(root))}}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Value == "name" || k.Value == "team" || k.Value == "kind" {
			return Workload{}, ErrorList{{Pos: Pos{source, k.Line, k.Column},
				Msg: fmt.Sprintf("spec.%s: give %s beside spec, not inside it", k.Value, k.Value)}}
		}
	}
	// name, team and kind are decoded with the spec's fields, at the spec's
	// opening brace: a problem with one of them is about the request as a
	// whole.
	str := func(v string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: root.Line, Column: root.Column}
	}
	for _, kv := range [][2]string{{"name", name}, {"team", team}, {"kind", kind}} {
		if kv[1] != "" {
			root.Content = append([]*yaml.Node{str(kv[0]), str(kv[1])}, root.Content...)
		}
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column, Content: []*yaml.Node{
		str("workloads"),
		{Kind: yaml.SequenceNode, Tag: "!!seq", Line: root.Line, Column: root.Column, Content: []*yaml.Node{root}},
	}}
	p, err := decodePolicy(source, doc)
	if err != nil {
		return Workload{}, err
	}
	return p.Workloads[0], nil
}

// jsonError places a JSON syntax or type error at its line and column.
func jsonError(source string, spec []byte, err error) *Error {
	off := int64(0)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
		// The decoder reports the offset after the byte it choked on.
		if off > 0 {
			off--
		}
	}
	off = min(off, int64(len(spec)))
	line, col := 1, 1
	// Lines end at \n, \r\n or a lone \r, as the YAML parser counts them
	// for every other error.
	for i, c := range spec[:off] {
		switch {
		case c == '\n', c == '\r' && (i+1 >= len(spec) || spec[i+1] != '\n'):
			line, col = line+1, 1
		case c != '\r':
			col++
		}
	}
	return &Error{Pos: Pos{source, line, col}, Msg: "spec is not valid JSON: " + err.Error()}
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
