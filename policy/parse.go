package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/pricing"
)

// MaxFileSize bounds a policy file; real ones are a few KiB.
const MaxFileSize = 4 << 20

// Load reads and parses a policy file. Errors in the file come back as an
// ErrorList; a file that cannot be read comes back as the *fs.PathError.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy %s: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses a policy file's contents; name is used in error positions and
// as Policy.File. It applies defaults to the fields the file leaves out and
// validates the result. On failure it returns an ErrorList holding every
// problem found, sorted by position, and no policy.
func Parse(name string, data []byte) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, ErrorList{{Pos: Pos{name, 1, 1}, Msg: fmt.Sprintf("policy file is larger than %d MiB", MaxFileSize>>20)}}
	}
	root, err := parseYAML(name, data)
	if err != nil {
		return nil, err
	}
	return decodePolicy(name, root)
}

// decodePolicy decodes and validates a parsed policy document; positions in
// its errors are the nodes' lines and columns in the text name names.
func decodePolicy(name string, root *yaml.Node) (*Policy, error) {
	d := &decoder{file: name, loc: newLocator()}
	p := &Policy{File: name, parsed: true}
	d.policy(root, p)
	p.applyDefaults(d.loc.isSet)
	r := &reporter{p: p, loc: d.loc}
	r.check()
	// A field that failed to decode is left at zero, and checking its value
	// would only repeat the decoding error in other words.
	errs := d.errs
	for _, e := range r.errs {
		if !d.isBad(e.s, e.i, e.field) {
			errs = append(errs, e.Error)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML parses exactly one YAML document into a node tree.
func parseYAML(name string, data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The YAML library has panicked on hostile input in the past; a
		// policy file must never crash the broker.
		if v := recover(); v != nil {
			root, err = nil, ErrorList{{Pos: Pos{name, 1, 1}, Msg: fmt.Sprintf("invalid YAML: %v", v)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ErrorList{{Pos: Pos{name, 1, 1}, Msg: "empty policy file; it needs at least workloads: (see docs/policy.md)"}}
		}
		return nil, yamlError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, ErrorList{{Pos: Pos{name, extra.Line, extra.Column}, Msg: "a policy file holds one YAML document; remove the second '---'"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(name, data, err)
	}
	if len(doc.Content) == 0 {
		return nil, ErrorList{{Pos: Pos{name, 1, 1}, Msg: "empty policy file; it needs at least workloads: (see docs/policy.md)"}}
	}
	return doc.Content[0], nil
}

// yamlError turns the YAML library's "yaml: line N: msg" into a positioned
// Error. The library reports the line where the enclosing block starts (or
// none on line 1) and no column, so the problem line is found by parsing ever
// longer prefixes of the file: the first prefix that fails holds the
// mistake. Unterminated quotes and brackets only fail at the end of the
// input; for those the library's line, where the open construct starts, is
// the better answer.
func yamlError(name string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	col := 1
	if !strings.Contains(msg, "end of stream") {
		fails := func(k int) bool {
			var n yaml.Node
			err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
			return err != nil && !strings.Contains(err.Error(), "end of stream")
		}
		lo, hi := 1, len(lines)
		if fails(hi) {
			for lo < hi {
				mid := (lo + hi) / 2
				if fails(mid) {
					hi = mid
				} else {
					lo = mid + 1
				}
			}
			line = hi
		}
	}
	if line >= 1 && line <= len(lines) {
		l := lines[line-1]
		col = len(l) - len(bytes.TrimLeft(l, " ")) + 1
	}
	return ErrorList{{Pos: Pos{name, line, col}, Msg: "invalid YAML: " + msg}}
}

// locator remembers where each field was written, so that validation errors
// point at the field rather than at its workload.
type locator struct {
	top  map[string]Pos
	objs [4][]map[string]Pos // indexed by scope, then by list index
}

func newLocator() *locator { return &locator{top: map[string]Pos{}} }

func (l *locator) fields(s scope, i int) map[string]Pos {
	if s == scopeTop {
		return l.top
	}
	for len(l.objs[s]) <= i {
		l.objs[s] = append(l.objs[s], map[string]Pos{})
	}
	return l.objs[s][i]
}

func (l *locator) isSet(s scope, i int, field string) bool {
	_, ok := l.fields(s, i)[field]
	return ok
}

// pos finds a field's position, falling back to its closest written parent
// ("replicas.max" → "replicas" → the workload).
func (l *locator) pos(s scope, i int, field string) Pos {
	m := l.fields(s, i)
	for {
		if p, ok := m[field]; ok {
			return p
		}
		if field == "" {
			return Pos{}
		}
		cut := strings.LastIndexAny(field, ".[")
		if cut < 0 {
			field = ""
		} else {
			field = field[:cut]
		}
	}
}

// decoder walks the YAML node tree into a Policy, checking structure and
// types; values are checked afterwards by the reporter.
type decoder struct {
	file string
	loc  *locator
	errs ErrorList
	// scope and index of the object being decoded, for the locator.
	s scope
	i int
	// cur is the field path being decoded; bad collects those whose value
	// had the wrong type, so that validation does not report them again.
	cur string
	bad map[badKey]bool
}

type badKey struct {
	s     scope
	i     int
	field string
}

// typeErr reports a value of the wrong type or form and marks its field bad.
func (d *decoder) typeErr(n *yaml.Node, format string, args ...any) {
	d.errf(n, format, args...)
	if d.bad == nil {
		d.bad = map[badKey]bool{}
	}
	d.bad[badKey{d.s, d.i, d.cur}] = true
}

// isBad reports whether field, or a field containing it, failed to decode.
func (d *decoder) isBad(s scope, i int, field string) bool {
	for {
		if d.bad[badKey{s, i, field}] {
			return true
		}
		if field == "" {
			return false
		}
		cut := strings.LastIndexAny(field, ".[")
		if cut < 0 {
			field = ""
		} else {
			field = field[:cut]
		}
	}
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{d.file, n.Line, n.Column} }

func (d *decoder) errf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, &Error{Pos: d.pos(n), Msg: fmt.Sprintf(format, args...), Path: fieldPath(d.s, d.i, d.cur)})
}

// mark records where field was written in the current object.
func (d *decoder) mark(field string, n *yaml.Node) { d.loc.fields(d.s, d.i)[field] = d.pos(n) }

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for k := 0; n != nil && n.Kind == yaml.AliasNode && k < 16; k++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names a node's type for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		case "!!null":
			return "nothing"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		}
		return "a " + strings.TrimPrefix(n.Tag, "!!")
	}
	return "something else"
}

// field is one known key of a mapping and how to decode its value.
type field struct {
	key string
	fn  func(v *yaml.Node)
}

// mapping decodes a mapping: known keys go to their decoder, unknown and
// repeated keys are errors. prefix is the field path of the mapping inside
// the current object ("" for the object itself). A null value counts as
// absent.
func (d *decoder) mapping(n *yaml.Node, what, prefix string, fields []field) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, "%s: want a mapping (key: value lines), got %s", what, describe(n))
		return
	}
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.key
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errf(k, "%s: keys must be plain names, got %s", what, describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			d.errf(k, "merge keys (<<) are not supported; write the fields out")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errf(k, "%s: key %q repeated (first at line %d)", what, k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		idx := -1
		for j, f := range fields {
			if f.key == k.Value {
				idx = j
				break
			}
		}
		if idx < 0 {
			d.errf(k, "%s: unknown key %q%s", what, k.Value, keySuggestion(k.Value, known))
			continue
		}
		if isNull(v) {
			continue
		}
		d.mark(join(prefix, k.Value), v)
		old := d.cur
		d.cur = join(prefix, k.Value)
		fields[idx].fn(v)
		d.cur = old
	}
}

func keySuggestion(key string, known []string) string {
	if m := suggest(key, known); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	return "; known keys: " + strings.Join(known, ", ")
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func (d *decoder) str(n *yaml.Node, what string, dst *string) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
			hint = fmt.Sprintf(" (quote it if you mean the text: %q)", n.Value)
		}
		d.typeErr(n, "%s: want a string, got %s%s", what, describe(n), hint)
		return
	}
	*dst = n.Value
}

// enum decodes a string that must be one of a few words; the words
// themselves are checked by validation, which can suggest the nearest.
func (d *decoder) enum(n *yaml.Node, what, words string, dst *string) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		d.typeErr(n, "%s: want %s, got %s", what, words, describe(n))
		return
	}
	*dst = n.Value
}

func (d *decoder) integer(n *yaml.Node, what string, dst *int) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.typeErr(n, "%s: want a whole number, got %s", what, describe(n))
		return
	}
	var v int64
	if err := n.Decode(&v); err != nil || v > math.MaxInt32 || v < math.MinInt32 {
		d.typeErr(n, "%s: number %s is out of range", what, n.Value)
		return
	}
	*dst = int(v)
}

func (d *decoder) number(n *yaml.Node, what string, dst *float64) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.typeErr(n, "%s: want a number, got %s", what, describe(n))
		return
	}
	var v float64
	if err := n.Decode(&v); err != nil || !finite(v) {
		d.typeErr(n, "%s: want a finite number, got %s", what, n.Value)
		return
	}
	*dst = v
}

func (d *decoder) duration(n *yaml.Node, what string, dst *time.Duration) {
	d.durationAllowing(n, what, dst, false)
}

// durationOrZero is duration for fields where 0 is meaningful
// (restart_overhead: 0 = restarts are free, checkpoint_interval: 0 =
// never), written any way a zero duration can be: 0, 0s, 0m, 0h (a
// generated fleet's restart_overhead: 0m was refused while 0s was taken).
func (d *decoder) durationOrZero(n *yaml.Node, what string, dst *time.Duration) {
	d.durationAllowing(n, what, dst, true)
}

func (d *decoder) durationAllowing(n *yaml.Node, what string, dst *time.Duration, zero bool) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
		d.typeErr(n, "%s: want a duration such as 72h, 90m or 3d, got %s", what, describe(n))
		return
	}
	if zero && n.Value == "0" {
		*dst = 0
		return
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		d.typeErr(n, "%s: %v", what, err)
		return
	}
	if v == 0 && !zero {
		d.typeErr(n, "%s: want a positive duration, or leave it out", what)
		return
	}
	*dst = v
}

// list decodes a sequence, calling fn with each element and its index path.
func (d *decoder) list(n *yaml.Node, what, field string, fn func(j int, v *yaml.Node)) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, "%s: want a list, e.g. [a, b], got %s", what, describe(n))
		return
	}
	for j, v := range n.Content {
		v = resolve(v)
		d.mark(fmt.Sprintf("%s[%d]", field, j), v)
		fn(j, v)
	}
}

func (d *decoder) strings(n *yaml.Node, what, field string, dst *[]string) {
	out := []string{}
	d.list(n, what, field, func(_ int, v *yaml.Node) {
		var s string
		d.str(v, what+" entry", &s)
		out = append(out, s)
	})
	*dst = out
}

func (d *decoder) clouds(n *yaml.Node, what, field string, dst *[]pricing.Cloud) {
	out := []pricing.Cloud{}
	d.list(n, what, field, func(_ int, v *yaml.Node) {
		var s string
		d.str(v, what+" entry", &s)
		out = append(out, cloud(s))
	})
	*dst = out
}

// cloud canonicalises a known cloud name and keeps an unknown one as written
// for validation to report with a suggestion.
func cloud(s string) pricing.Cloud {
	if c, err := pricing.ParseCloud(s); err == nil {
		return c
	}
	return pricing.Cloud(s)
}

// gpu canonicalises a GPU name or alias, keeping an unknown one as written.
func gpu(s string) pricing.GPUModel {
	if m, ok := pricing.ParseGPUModel(s); ok {
		return m
	}
	return pricing.GPUModel(s)
}

func (d *decoder) policy(n *yaml.Node, p *Policy) {
	d.s, d.i = scopeTop, 0
	d.mark("", n)
	var wl, qs, bs *yaml.Node
	d.mapping(n, "policy", "", []field{
		{"version", func(v *yaml.Node) {
			var ver int
			if d.integer(v, "version", &ver); ver != 0 && ver != Version {
				d.typeErr(v, "unsupported policy version %d; this gpubroker reads version %d", ver, Version)
			}
		}},
		{"clouds", func(v *yaml.Node) { d.clouds(v, "clouds", "clouds", &p.Clouds) }},
		{"regions", func(v *yaml.Node) { d.strings(v, "regions", "regions", &p.Regions) }},
		{"residency", func(v *yaml.Node) { d.strings(v, "residency", "residency", &p.Residency) }},
		{"horizon", func(v *yaml.Node) { d.duration(v, "horizon", &p.Horizon) }},
		{"spot_defaults", func(v *yaml.Node) { d.spotDefaults(v, p) }},
		{"scaling", func(v *yaml.Node) { d.scaling(v, "scaling", &p.Scaling) }},
		{"spot_pool_gpus", func(v *yaml.Node) { d.integer(v, "spot_pool_gpus", &p.SpotPoolGPUs) }},
		{"spot_capacity", func(v *yaml.Node) { d.spotCapacity(v, &p.SpotCapacity) }},
		{"workloads", func(v *yaml.Node) { wl = v }},
		{"quotas", func(v *yaml.Node) { qs = v }},
		{"budgets", func(v *yaml.Node) { bs = v }},
	})
	// Lists are decoded after the top-level keys so that each element gets
	// its own scope in the locator.
	if wl != nil {
		d.objects(wl, "workloads", scopeWorkload, func(v *yaml.Node) {
			p.Workloads = append(p.Workloads, Workload{Pos: d.pos(v)})
			d.workload(v, &p.Workloads[len(p.Workloads)-1])
		})
	}
	if qs != nil {
		d.objects(qs, "quotas", scopeQuota, func(v *yaml.Node) {
			p.Quotas = append(p.Quotas, Quota{Pos: d.pos(v)})
			d.quota(v, &p.Quotas[len(p.Quotas)-1])
		})
	}
	if bs != nil {
		d.objects(bs, "budgets", scopeBudget, func(v *yaml.Node) {
			p.Budgets = append(p.Budgets, Budget{Pos: d.pos(v)})
			d.budget(v, &p.Budgets[len(p.Budgets)-1])
		})
	}
}

// objects decodes a top-level list of workloads, quotas or budgets, one
// locator scope per element.
func (d *decoder) objects(n *yaml.Node, what string, s scope, fn func(v *yaml.Node)) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, "%s: want a list of mappings (lines starting with '- '), got %s", what, describe(n))
		return
	}
	for j, v := range n.Content {
		v = resolve(v)
		d.s, d.i, d.cur = s, j, ""
		d.mark("", v)
		fn(v)
	}
	d.s, d.i, d.cur = scopeTop, 0, ""
}

func (d *decoder) spotDefaults(n *yaml.Node, p *Policy) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.typeErr(n, "spot_defaults: want a mapping of cloud to interruptions per hour, e.g. {aws: 0.02}, got %s", describe(n))
		return
	}
	p.SpotDefaults = map[pricing.Cloud]float64{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			d.errf(k, "spot_defaults: keys are cloud names, got %s", describe(k))
			continue
		}
		c := cloud(k.Value)
		if _, dup := p.SpotDefaults[c]; dup {
			d.errf(k, "spot_defaults: cloud %q repeated", k.Value)
			continue
		}
		var f float64
		d.number(v, "spot_defaults."+k.Value, &f)
		p.SpotDefaults[c] = f
		d.mark("spot_defaults."+string(c), k)
	}
}

func (d *decoder) workload(n *yaml.Node, w *Workload) {
	d.mapping(n, "workload", "", []field{
		{"name", func(v *yaml.Node) { d.str(v, "name", &w.Name) }},
		{"team", func(v *yaml.Node) { d.str(v, "team", &w.Team) }},
		{"kind", func(v *yaml.Node) {
			var s string
			d.enum(v, "kind", "training, inference or batch", &s)
			w.Kind = Kind(s)
		}},
		{"gpu", func(v *yaml.Node) {
			d.mapping(v, "gpu", "gpu", []field{
				{"models", func(v *yaml.Node) { d.models(v, w) }},
				{"count", func(v *yaml.Node) { d.integer(v, "gpu.count", &w.GPU.Count) }},
				{"min_memory_gib", func(v *yaml.Node) { d.number(v, "gpu.min_memory_gib", &w.GPU.MinMemoryGiB) }},
				{"interconnect", func(v *yaml.Node) {
					d.enum(v, "gpu.interconnect", "any or required", &w.GPU.Interconnect)
				}},
			})
		}},
		{"work", func(v *yaml.Node) {
			d.mapping(v, "work", "work", []field{
				{"gpu_hours", func(v *yaml.Node) { d.number(v, "work.gpu_hours", &w.WorkGPUHours) }},
				{"reference_gpu", func(v *yaml.Node) {
					var s string
					d.str(v, "work.reference_gpu", &s)
					w.ReferenceGPU = gpu(s)
				}},
			})
		}},
		{"deadline", func(v *yaml.Node) { d.duration(v, "deadline", &w.Deadline) }},
		{"scaling", func(v *yaml.Node) { d.scaling(v, "scaling", &w.Scaling) }},
		{"checkpoint_interval", func(v *yaml.Node) { d.durationOrZero(v, "checkpoint_interval", &w.CheckpointInterval) }},
		{"restart_overhead", func(v *yaml.Node) { d.durationOrZero(v, "restart_overhead", &w.RestartOverhead) }},
		{"spot", func(v *yaml.Node) {
			var s string
			d.enum(v, "spot", "never, prefer or only", &s)
			w.Spot = SpotPolicy(s)
		}},
		{"spot_policy", func(v *yaml.Node) { d.str(v, "spot_policy", &w.SpotDecider) }},
		{"replicas", func(v *yaml.Node) {
			d.mapping(v, "replicas", "replicas", []field{
				{"min", func(v *yaml.Node) { d.integer(v, "replicas.min", &w.Replicas.Min) }},
				{"max", func(v *yaml.Node) { d.integer(v, "replicas.max", &w.Replicas.Max) }},
				{"target_utilization", func(v *yaml.Node) {
					d.number(v, "replicas.target_utilization", &w.Replicas.TargetUtilization)
				}},
			})
		}},
		{"autoscale", func(v *yaml.Node) {
			d.mapping(v, "autoscale", "autoscale", []field{
				{"prometheus", func(v *yaml.Node) {
					m := &PrometheusMetric{}
					w.Autoscale.Prometheus = m
					d.mapping(v, "autoscale.prometheus", "autoscale.prometheus", []field{
						{"url", func(v *yaml.Node) { d.str(v, "autoscale.prometheus.url", &m.URL) }},
						{"query", func(v *yaml.Node) { d.str(v, "autoscale.prometheus.query", &m.Query) }},
						{"target_per_replica", func(v *yaml.Node) {
							d.number(v, "autoscale.prometheus.target_per_replica", &m.TargetPerReplica)
						}},
					})
				}},
				{"scale_up_window", func(v *yaml.Node) {
					d.durationOrZero(v, "autoscale.scale_up_window", &w.Autoscale.ScaleUpWindow)
				}},
				{"scale_down_window", func(v *yaml.Node) {
					d.durationOrZero(v, "autoscale.scale_down_window", &w.Autoscale.ScaleDownWindow)
				}},
			})
		}},
		{"availability", func(v *yaml.Node) {
			d.mapping(v, "availability", "availability", []field{
				{"goal", func(v *yaml.Node) { d.number(v, "availability.goal", &w.Availability.Goal) }},
				{"window", func(v *yaml.Node) { d.duration(v, "availability.window", &w.Availability.Window) }},
			})
		}},
		{"schedule", func(v *yaml.Node) { d.schedule(v, w) }},
		{"load", func(v *yaml.Node) {
			l := &LoadProfile{}
			w.Load = l
			d.mapping(v, "load", "load", []field{
				{"replicas_by_hour", func(v *yaml.Node) {
					l.ReplicasByHour = []int{}
					d.list(v, "load.replicas_by_hour", "load.replicas_by_hour", func(j int, v *yaml.Node) {
						var n int
						d.integer(v, fmt.Sprintf("load.replicas_by_hour[%d]", j), &n)
						l.ReplicasByHour = append(l.ReplicasByHour, n)
					})
				}},
				{"requests_per_second", func(v *yaml.Node) {
					l.RequestsPerSecond = []float64{}
					d.list(v, "load.requests_per_second", "load.requests_per_second", func(j int, v *yaml.Node) {
						var f float64
						d.number(v, fmt.Sprintf("load.requests_per_second[%d]", j), &f)
						l.RequestsPerSecond = append(l.RequestsPerSecond, f)
					})
				}},
				{"requests_per_replica", func(v *yaml.Node) {
					d.number(v, "load.requests_per_replica", &l.RequestsPerReplica)
				}},
			})
		}},
		{"spread", func(v *yaml.Node) {
			d.mapping(v, "spread", "spread", []field{
				{"min_zones", func(v *yaml.Node) { d.integer(v, "spread.min_zones", &w.Spread.MinZones) }},
				{"min_clouds", func(v *yaml.Node) { d.integer(v, "spread.min_clouds", &w.Spread.MinClouds) }},
			})
		}},
		{"placement", func(v *yaml.Node) {
			d.mapping(v, "placement", "placement", []field{
				{"clouds", func(v *yaml.Node) { d.clouds(v, "placement.clouds", "placement.clouds", &w.Limits.Clouds) }},
				{"regions", func(v *yaml.Node) { d.strings(v, "placement.regions", "placement.regions", &w.Limits.Regions) }},
				{"zones", func(v *yaml.Node) { d.strings(v, "placement.zones", "placement.zones", &w.Limits.Zones) }},
				{"residency", func(v *yaml.Node) {
					d.strings(v, "placement.residency", "placement.residency", &w.Limits.Residency)
				}},
			})
		}},
	})
}

// models decodes gpu.models: "any", one model name, or a list of names.
func (d *decoder) models(n *yaml.Node, w *Workload) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if strings.EqualFold(n.Value, "any") {
			return
		}
		w.GPU.Models = []pricing.GPUModel{gpu(n.Value)}
		d.mark("gpu.models[0]", n)
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.typeErr(n, "gpu.models: want any, a GPU name or a list of GPU names, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		d.typeErr(n, "gpu.models: empty list allows no GPU; write any, or list models such as [A100-80GB, H100]")
		return
	}
	d.list(n, "gpu.models", "gpu.models", func(_ int, v *yaml.Node) {
		var s string
		d.str(v, "gpu.models entry", &s)
		if strings.EqualFold(s, "any") {
			d.errf(v, "gpu.models: any cannot be listed with models; write models: any on its own")
			return
		}
		w.GPU.Models = append(w.GPU.Models, gpu(s))
	})
}

func (d *decoder) quota(n *yaml.Node, q *Quota) {
	d.mapping(n, "quota", "", []field{
		{"cloud", func(v *yaml.Node) {
			var s string
			d.str(v, "cloud", &s)
			q.Cloud = cloud(s)
		}},
		{"region", func(v *yaml.Node) { d.str(v, "region", &q.Region) }},
		{"family", func(v *yaml.Node) {
			d.str(v, "family", &q.Family)
			for _, f := range Families() {
				if strings.EqualFold(f, q.Family) {
					q.Family = f
				}
			}
		}},
		{"max_gpus", func(v *yaml.Node) { d.integer(v, "max_gpus", &q.MaxGPUs) }},
	})
}

func (d *decoder) budget(n *yaml.Node, b *Budget) {
	d.mapping(n, "budget", "", []field{
		{"name", func(v *yaml.Node) { d.str(v, "name", &b.Name) }},
		{"team", func(v *yaml.Node) { d.str(v, "team", &b.Team) }},
		{"workload", func(v *yaml.Node) { d.str(v, "workload", &b.Workload) }},
		{"monthly_usd", func(v *yaml.Node) { d.number(v, "monthly_usd", &b.MonthlyUSD) }},
		{"action", func(v *yaml.Node) { d.enum(v, "action", "alert, stop-scaling or spot-only", &b.Action) }},
	})
}

// scaling decodes {intra_node, inter_node}.
func (d *decoder) scaling(n *yaml.Node, name string, sc *Scaling) {
	d.mapping(n, name, name, []field{
		{"intra_node", func(v *yaml.Node) { d.number(v, name+".intra_node", &sc.IntraNode) }},
		{"inter_node", func(v *yaml.Node) { d.number(v, name+".inter_node", &sc.InterNode) }},
	})
}

// schedule decodes a cron expression, pointing a syntax error at the
// column of the part that is wrong.
func (d *decoder) schedule(n *yaml.Node, w *Workload) {
	d.str(n, "schedule", &w.Schedule)
	if w.Schedule == "" {
		return
	}
	if _, err := ParseCron(w.Schedule); err != nil {
		var ce *CronError
		pos := d.pos(n)
		if errors.As(err, &ce) && !strings.Contains(n.Value, "\n") {
			switch n.Style {
			case 0:
				pos.Col += ce.Offset
			case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
				pos.Col += ce.Offset + 1
			}
		}
		d.errs = append(d.errs, &Error{Pos: pos, Msg: "schedule: " + err.Error(), Path: fieldPath(d.s, d.i, d.cur)})
		if d.bad == nil {
			d.bad = map[badKey]bool{}
		}
		d.bad[badKey{d.s, d.i, d.cur}] = true
	}
}

// spotCapacity decodes {default_gpus_per_pool: N, pools: {"cloud/zone/gpu": N}}.
func (d *decoder) spotCapacity(n *yaml.Node, sc *SpotCapacity) {
	d.mapping(n, "spot_capacity", "spot_capacity", []field{
		{"default_gpus_per_pool", func(v *yaml.Node) {
			d.integer(v, "spot_capacity.default_gpus_per_pool", &sc.DefaultGPUsPerPool)
		}},
		{"pools", func(v *yaml.Node) {
			v = resolve(v)
			if v.Kind != yaml.MappingNode {
				d.typeErr(v, "spot_capacity.pools: want a mapping of pool to spot GPUs, e.g. {aws/us-east-1a/H100: 64}, got %s", describe(v))
				return
			}
			seen := map[string]int{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
				if k.Kind != yaml.ScalarNode {
					d.errf(k, "spot_capacity.pools: keys are pools written cloud/zone/gpu, got %s", describe(k))
					continue
				}
				if line, dup := seen[k.Value]; dup {
					d.errf(k, "spot_capacity.pools: pool %q repeated (first at line %d)", k.Value, line)
					continue
				}
				seen[k.Value] = k.Line
				j := len(sc.Pools)
				field := fmt.Sprintf("spot_capacity.pools[%d]", j)
				d.mark(field, k)
				pool := SpotPool{Key: k.Value, Pos: d.pos(k)}
				parts := strings.Split(k.Value, "/")
				if len(parts) == 3 {
					pool.Cloud, pool.Zone = cloud(parts[0]), parts[1]
					if parts[2] != "*" {
						pool.GPU = gpu(parts[2])
					}
				}
				old := d.cur
				d.cur = field
				d.integer(val, "spot_capacity.pools."+k.Value, &pool.GPUs)
				d.cur = old
				sc.Pools = append(sc.Pools, pool)
			}
		}},
	})
}
