package policy

import (
	"fmt"
	"math"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
	"github.com/gpubroker/gpubroker/pricing"
)

// Validate checks a policy whose defaults are applied (see SetDefaults) and
// returns an ErrorList of every problem, or nil. Parse runs the same checks
// and points each error at the offending field; for a policy built in code
// errors carry the position of the workload, quota or budget (if any) and
// name it.
func (p *Policy) Validate() error {
	r := &reporter{p: p}
	r.check()
	list := make(ErrorList, len(r.errs))
	for i, e := range r.errs {
		list[i] = e.Error
	}
	return list.Err()
}

// reporter collects validation errors. loc, set when validating a parsed
// file, places each error at its field.
type reporter struct {
	p    *Policy
	loc  *locator
	errs []fieldError
}

// fieldError is an Error with the field it is about, so that Parse can drop
// errors about fields that already failed to decode.
type fieldError struct {
	*Error
	s     scope
	i     int
	field string
}

func (r *reporter) errf(s scope, i int, field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.loc != nil {
		r.errs = append(r.errs, fieldError{&Error{Pos: r.loc.pos(s, i, field), Msg: msg, Path: fieldPath(s, i, field)}, s, i, field})
		return
	}
	pos := Pos{File: r.p.File}
	switch s {
	case scopeWorkload:
		pos = r.p.Workloads[i].Pos
		msg = fmt.Sprintf("workload %q: %s", r.p.Workloads[i].Name, msg)
	case scopeQuota:
		pos = r.p.Quotas[i].Pos
		msg = fmt.Sprintf("quota %d: %s", i+1, msg)
	case scopeBudget:
		pos = r.p.Budgets[i].Pos
		msg = fmt.Sprintf("budget %q: %s", r.p.Budgets[i].Name, msg)
	}
	if pos.File == "" {
		pos.File = r.p.File
	}
	r.errs = append(r.errs, fieldError{&Error{Pos: pos, Msg: msg, Path: fieldPath(s, i, field)}, s, i, field})
}

func (r *reporter) check() {
	p := r.p
	r.checkClouds(scopeTop, 0, "clouds", p.Clouds)
	if len(p.Clouds) == 0 {
		r.errf(scopeTop, 0, "clouds", "clouds: empty list allows no cloud; omit it to allow aws, gcp and azure")
	}
	r.checkGlobs(scopeTop, 0, "regions", p.Regions)
	r.checkResidency(scopeTop, 0, "residency", p.Residency)
	if p.Horizon <= 0 {
		r.errf(scopeTop, 0, "horizon", "horizon must be positive, e.g. 720h")
	}
	r.checkScaling(scopeTop, 0, "scaling", p.Scaling)
	if p.SpotPoolGPUs < 1 {
		r.errf(scopeTop, 0, "spot_pool_gpus", "spot_pool_gpus %d: want the spot GPUs one pool can give a workload, at least 1 (default %d)", p.SpotPoolGPUs, DefaultSpotPoolGPUs)
	}
	r.checkSpotCapacity()
	for _, c := range sortedClouds(p.SpotDefaults) {
		v := p.SpotDefaults[c]
		if !knownCloud(c) {
			r.errf(scopeTop, 0, "spot_defaults."+string(c), "spot_defaults: unknown cloud %q; want aws, gcp or azure", c)
		}
		if !finite(v) || v < 0 {
			r.errf(scopeTop, 0, "spot_defaults."+string(c), "spot_defaults.%s is %v; want expected interruptions per hour, 0 or more (e.g. 0.02)", c, v)
		}
	}
	if len(p.Workloads) == 0 {
		r.errf(scopeTop, 0, "workloads", "no workloads; a policy needs at least one under workloads:")
	}
	names := map[string]int{}
	teams := map[string]bool{}
	for i := range p.Workloads {
		w := &p.Workloads[i]
		if j, dup := names[w.Name]; dup && w.Name != "" {
			r.errf(scopeWorkload, i, "name", "duplicate workload name %q (first defined at %s)", w.Name, r.posOf(scopeWorkload, j, "name"))
		} else {
			names[w.Name] = i
		}
		if w.Team != "" {
			teams[w.Team] = true
		}
		r.checkWorkload(i)
	}
	for i := range p.Quotas {
		r.checkQuota(i)
	}
	budgetNames := map[string]int{}
	for i := range p.Budgets {
		b := &p.Budgets[i]
		if j, dup := budgetNames[b.Name]; dup {
			r.errf(scopeBudget, i, "name", "duplicate budget name %q (first defined at %s)", b.Name, r.posOf(scopeBudget, j, "name"))
		} else {
			budgetNames[b.Name] = i
		}
		r.checkBudget(i, names, teams)
	}
}

// posOf is the position of a field, for "first defined at" notes.
func (r *reporter) posOf(s scope, i int, field string) string {
	if r.loc != nil {
		return r.loc.pos(s, i, field).String()
	}
	switch s {
	case scopeWorkload:
		if p := r.p.Workloads[i].Pos.String(); p != "" {
			return p
		}
		return fmt.Sprintf("workload %d", i+1)
	case scopeBudget:
		if p := r.p.Budgets[i].Pos.String(); p != "" {
			return p
		}
		return fmt.Sprintf("budget %d", i+1)
	}
	return "?"
}

// nameOK accepts names that are safe as instance labels and metric labels on
// every cloud: lower-case letters, digits, '-', '_' and '.', starting with a
// letter or digit, at most 63 characters.
func nameOK(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

func (r *reporter) checkWorkload(i int) {
	p, w := r.p, &r.p.Workloads[i]
	e := func(field, format string, args ...any) { r.errf(scopeWorkload, i, field, format, args...) }
	switch {
	case w.Name == "":
		e("name", "workload has no name; add name: (lower-case letters, digits, '-')")
	case !nameOK(w.Name):
		e("name", "workload name %q: use lower-case letters, digits, '-', '_' and '.', starting with a letter or digit, at most 63 characters", w.Name)
	}
	switch w.Kind {
	case Training, Batch, Inference:
	case "":
		e("kind", "workload has no kind; add kind: training, inference or batch")
	default:
		e("kind", "unknown kind %q; want training, inference or batch%s", w.Kind, didYouMean(string(w.Kind), []string{"training", "inference", "batch"}))
	}
	switch w.Spot {
	case SpotNever, SpotPrefer, SpotOnly:
	default:
		e("spot", "unknown spot policy %q; want never, prefer or only%s", w.Spot, didYouMean(string(w.Spot), []string{"never", "prefer", "only"}))
	}
	if w.SpotDecider != "" {
		names := spotpolicy.TrainingPolicies()
		if w.Kind == Inference {
			names = spotpolicy.InferencePolicies()
		}
		if !slices.Contains(names, w.SpotDecider) {
			e("spot_policy", "unknown %s spot_policy %q; want one of %s%s", w.Kind, w.SpotDecider, strings.Join(names, ", "), didYouMean(w.SpotDecider, names))
		}
	}

	// GPU need.
	if w.Kind == Inference {
		if w.GPU.Count < 1 || w.GPU.Count > MaxGPUsPerInstance {
			e("gpu.count", "gpu.count %d: want 1 to %d GPUs per replica (one instance)", w.GPU.Count, MaxGPUsPerInstance)
		}
	} else if w.GPU.Count < 1 || w.GPU.Count > MaxJobGPUs {
		e("gpu.count", "gpu.count %d: want 1 to %d GPUs for the whole job (it may span several identical instances)", w.GPU.Count, MaxJobGPUs)
	}
	switch w.GPU.Interconnect {
	case InterconnectAny, InterconnectRequired:
	default:
		e("gpu.interconnect", "gpu.interconnect %q: want any or required%s", w.GPU.Interconnect, didYouMean(w.GPU.Interconnect, []string{InterconnectAny, InterconnectRequired}))
	}
	// Inherited figures were checked at the top level.
	if w.Scaling != r.p.Scaling {
		sc := w.Scaling
		if sc.IntraNode == r.p.Scaling.IntraNode {
			sc.IntraNode = DefaultIntraNodeScaling
		}
		if sc.InterNode == r.p.Scaling.InterNode {
			sc.InterNode = DefaultInterNodeScaling
		}
		r.checkScaling(scopeWorkload, i, "scaling", sc)
	}
	seen := map[pricing.GPUModel]bool{}
	for j, m := range w.GPU.Models {
		if _, ok := pricing.Spec(m); !ok {
			e(fmt.Sprintf("gpu.models[%d]", j), "unknown GPU %q%s", m, gpuSuggestion(string(m)))
		}
		if seen[m] {
			e(fmt.Sprintf("gpu.models[%d]", j), "GPU %q listed twice", m)
		}
		seen[m] = true
	}
	if !finite(w.GPU.MinMemoryGiB) || w.GPU.MinMemoryGiB < 0 {
		e("gpu.min_memory_gib", "gpu.min_memory_gib %v: want GiB per GPU, 0 or more", w.GPU.MinMemoryGiB)
	} else if w.GPU.MinMemoryGiB > 0 {
		r.checkMemoryFits(i)
	}

	// Work, deadline, checkpoints.
	switch w.Kind {
	case Training, Batch:
		switch {
		case w.WorkGPUHours == 0:
			e("work.gpu_hours", "%s workload needs work: {gpu_hours: N} (GPU-hours on the reference GPU)", w.Kind)
		case !finite(w.WorkGPUHours) || w.WorkGPUHours < 0:
			e("work.gpu_hours", "work.gpu_hours %v: want a positive number of GPU-hours", w.WorkGPUHours)
		}
		if _, ok := pricing.Spec(w.ReferenceGPU); !ok {
			e("work.reference_gpu", "unknown reference GPU %q%s", w.ReferenceGPU, gpuSuggestion(string(w.ReferenceGPU)))
		}
		if w.Replicas != (Replicas{}) {
			e("replicas", "replicas apply to inference services only; a %s workload has work: instead", w.Kind)
		}
		if w.Spread != (Spread{}) {
			e("spread", "spread applies to inference services only")
		}
		if w.Autoscale != (Autoscale{}) {
			e("autoscale", "autoscale applies to inference services only")
		}
		if w.Availability != (Availability{}) {
			e("availability", "availability applies to inference services only; a %s job has a deadline instead", w.Kind)
		}
		if w.Load != nil {
			e("load", "load applies to inference services only; a %s job runs once, or on a schedule:", w.Kind)
		}
		if w.Schedule != "" {
			r.checkSchedule(i)
		}
	case Inference:
		if w.WorkGPUHours != 0 || w.ReferenceGPU != "" {
			e("work", "work applies to training and batch workloads; an inference service has replicas: instead")
		}
		if w.Deadline != 0 {
			e("deadline", "deadline applies to training and batch workloads; an inference service runs until stopped")
		}
		if w.CheckpointInterval != 0 {
			e("checkpoint_interval", "checkpoint_interval applies to training and batch workloads")
		}
		if w.Schedule != "" {
			e("schedule", "schedule applies to training and batch jobs; an inference service runs until stopped (describe its load by hour with load:)")
		}
		r.checkReplicas(i)
		if w.Load != nil {
			r.checkLoad(i)
		}
	}
	if w.Deadline < 0 {
		e("deadline", "deadline %s is negative; want a positive duration, or omit it for none", w.Deadline)
	}
	if w.CheckpointInterval < 0 {
		e("checkpoint_interval", "checkpoint_interval %s is negative", w.CheckpointInterval)
	}
	if w.RestartOverhead < 0 {
		e("restart_overhead", "restart_overhead %s is negative", w.RestartOverhead)
	}
	if w.Deadline > 0 {
		if w.CheckpointInterval > w.Deadline {
			e("checkpoint_interval", "checkpoint_interval %s is longer than the deadline %s; checkpoint more often than the job may run",
				FormatDuration(w.CheckpointInterval), FormatDuration(w.Deadline))
		}
		if w.RestartOverhead >= w.Deadline {
			e("restart_overhead", "restart_overhead %s is not shorter than the deadline %s",
				FormatDuration(w.RestartOverhead), FormatDuration(w.Deadline))
		}
	}

	// Placement.
	r.checkClouds(scopeWorkload, i, "placement.clouds", w.Limits.Clouds)
	for j, c := range w.Limits.Clouds {
		if knownCloud(c) && !CloudAllowed(p, nil, c) {
			e(fmt.Sprintf("placement.clouds[%d]", j), "cloud %q is not allowed by the policy's clouds %s", c, cloudList(p.Clouds))
		}
	}
	r.checkGlobs(scopeWorkload, i, "placement.regions", w.Limits.Regions)
	r.checkGlobs(scopeWorkload, i, "placement.zones", w.Limits.Zones)
	r.checkResidency(scopeWorkload, i, "placement.residency", w.Limits.Residency)
	if knownGeos(p.Residency) && knownGeos(w.Limits.Residency) && len(p.Residency) > 0 && len(w.Limits.Residency) > 0 && !residencyOverlap(p.Residency, w.Limits.Residency) {
		e("placement.residency", "placement.residency %v shares no region with the policy's residency %v", w.Limits.Residency, p.Residency)
	}
}

// checkMemoryFits rejects a memory need no allowed GPU model meets.
func (r *reporter) checkMemoryFits(i int) {
	w := &r.p.Workloads[i]
	models := w.GPU.Models
	if len(models) == 0 {
		models = pricing.GPUModels()
	}
	var biggest pricing.GPUSpec
	for _, m := range models {
		if s, ok := pricing.Spec(m); ok && s.MemoryGiB > biggest.MemoryGiB {
			biggest = s
		}
	}
	if biggest.Model == "" || w.GPU.MinMemoryGiB <= biggest.MemoryGiB {
		return
	}
	if len(w.GPU.Models) == 0 {
		r.errf(scopeWorkload, i, "gpu.min_memory_gib", "gpu.min_memory_gib %v: no GPU has that much memory; the largest is %s with %v GiB",
			w.GPU.MinMemoryGiB, biggest.Model, biggest.MemoryGiB)
		return
	}
	r.errf(scopeWorkload, i, "gpu.min_memory_gib", "gpu.min_memory_gib %v: none of the allowed models has that much memory (largest: %s with %v GiB)",
		w.GPU.MinMemoryGiB, biggest.Model, biggest.MemoryGiB)
}

func (r *reporter) checkReplicas(i int) {
	p, w := r.p, &r.p.Workloads[i]
	e := func(field, format string, args ...any) { r.errf(scopeWorkload, i, field, format, args...) }
	rp := w.Replicas
	switch {
	case rp.Min == 0 && rp.Max == 0:
		e("replicas", "inference service needs replicas: {min: N, max: M}, with min at least 1")
		return
	case rp.Min < 1:
		e("replicas.min", "replicas.min %d: want at least 1", rp.Min)
	case rp.Max < rp.Min:
		e("replicas.max", "replicas.max %d is less than replicas.min %d", rp.Max, rp.Min)
	}
	if !finite(rp.TargetUtilization) || rp.TargetUtilization <= 0 || rp.TargetUtilization > 1 {
		e("replicas.target_utilization", "replicas.target_utilization %v: want a fraction above 0 and at most 1, e.g. 0.7", rp.TargetUtilization)
	}
	validateAutoscale(w.Autoscale, e)
	if a := w.Availability; !finite(a.Goal) || a.Goal <= 0 || a.Goal >= 1 {
		e("availability.goal", "availability.goal %v: want the share of time at target, above 0 and below 1, e.g. 0.99", a.Goal)
	}
	if a := w.Availability; a.Window < time.Hour || a.Window > MaxAvailabilityWindow {
		e("availability.window", "availability.window %s: want 1h to 90d", FormatDuration(a.Window))
	}
	sp := w.Spread
	if sp.MinZones < 1 {
		e("spread.min_zones", "spread.min_zones %d: want at least 1", sp.MinZones)
	} else if rp.Min >= 1 && sp.MinZones > rp.Min {
		e("spread.min_zones", "spread.min_zones %d needs at least %d replicas, but replicas.min is %d", sp.MinZones, sp.MinZones, rp.Min)
	}
	if sp.MinClouds < 1 {
		e("spread.min_clouds", "spread.min_clouds %d: want at least 1", sp.MinClouds)
	} else {
		if rp.Min >= 1 && sp.MinClouds > rp.Min {
			e("spread.min_clouds", "spread.min_clouds %d needs at least %d replicas, but replicas.min is %d", sp.MinClouds, sp.MinClouds, rp.Min)
		}
		if n := len(AllowedClouds(p, w)); n > 0 && sp.MinClouds > n {
			e("spread.min_clouds", "spread.min_clouds %d, but only %d cloud(s) are allowed: %s", sp.MinClouds, n, cloudList(AllowedClouds(p, w)))
		}
	}
}

func (r *reporter) checkQuota(i int) {
	q := &r.p.Quotas[i]
	e := func(field, format string, args ...any) { r.errf(scopeQuota, i, field, format, args...) }
	if q.Cloud != "" && !knownCloud(q.Cloud) {
		e("cloud", "unknown cloud %q; want aws, gcp or azure%s", q.Cloud, didYouMean(string(q.Cloud), cloudNames()))
	}
	if q.Region != "" {
		r.checkGlobs(scopeQuota, i, "region", []string{q.Region})
	}
	if q.Family != "" && !slices.Contains(Families(), q.Family) {
		e("family", "unknown GPU family %q; want one of %s%s", q.Family, strings.Join(Families(), ", "), didYouMean(q.Family, Families()))
	}
	if q.MaxGPUs == 0 {
		e("max_gpus", "quota needs max_gpus: N, at least 1")
	} else if q.MaxGPUs < 1 {
		e("max_gpus", "max_gpus %d: want at least 1 (remove the cloud, region or family from the policy to forbid it)", q.MaxGPUs)
	}
	for j := range i {
		o := &r.p.Quotas[j]
		if o.Cloud == q.Cloud && o.Region == q.Region && o.Family == q.Family {
			e("", "quota repeats the cloud, region and family of the quota at %s", r.quotaPos(j))
			break
		}
	}
}

func (r *reporter) quotaPos(j int) string {
	if r.loc != nil {
		return r.loc.pos(scopeQuota, j, "").String()
	}
	return fmt.Sprintf("quota %d", j+1)
}

func (r *reporter) checkBudget(i int, workloads map[string]int, teams map[string]bool) {
	b := &r.p.Budgets[i]
	e := func(field, format string, args ...any) { r.errf(scopeBudget, i, field, format, args...) }
	if b.Name == "" {
		e("name", "budget has no name")
	}
	if b.MonthlyUSD == 0 {
		e("monthly_usd", "budget needs monthly_usd: N, a positive amount of US dollars per month")
	} else if !finite(b.MonthlyUSD) || b.MonthlyUSD < 0 {
		e("monthly_usd", "monthly_usd %v: want a positive amount of US dollars per month", b.MonthlyUSD)
	}
	if b.Team != "" && b.Workload != "" {
		e("workload", "a budget covers a team or a workload, not both; split it in two")
	}
	switch b.Action {
	case "", BudgetAlert, BudgetStopScaling, BudgetSpotOnly:
	default:
		e("action", "budget action %q: want alert, stop-scaling or spot-only%s", b.Action,
			didYouMean(b.Action, []string{BudgetAlert, BudgetStopScaling, BudgetSpotOnly}))
	}
	if b.Workload != "" {
		if _, ok := workloads[b.Workload]; !ok {
			e("workload", "budget names unknown workload %q%s", b.Workload, didYouMean(b.Workload, keys(workloads)))
		}
	}
	if b.Team != "" && !teams[b.Team] {
		e("team", "no workload has team %q%s", b.Team, didYouMean(b.Team, keys(teams)))
	}
}

func (r *reporter) checkClouds(s scope, i int, field string, cs []pricing.Cloud) {
	seen := map[pricing.Cloud]bool{}
	for j, c := range cs {
		f := fmt.Sprintf("%s[%d]", field, j)
		if !knownCloud(c) {
			r.errf(s, i, f, "unknown cloud %q; want aws, gcp or azure%s", c, didYouMean(string(c), cloudNames()))
		} else if seen[c] {
			r.errf(s, i, f, "cloud %q listed twice", c)
		}
		seen[c] = true
	}
}

func (r *reporter) checkGlobs(s scope, i int, field string, globs []string) {
	for j, g := range globs {
		f := fmt.Sprintf("%s[%d]", field, j)
		if s == scopeQuota {
			f = field
		}
		if err := checkGlob(g); err != nil {
			r.errf(s, i, f, "%v", err)
		}
	}
}

// checkGlob validates a region or zone pattern in path.Match syntax.
func checkGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty pattern; use \"*\" for any")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad pattern %q: %v; patterns use *, ? and [a-z] as in path.Match", g, err)
	}
	return nil
}

func (r *reporter) checkResidency(s scope, i int, field string, geos []string) {
	for j, g := range geos {
		if _, ok := geographies[g]; !ok {
			r.errf(s, i, fmt.Sprintf("%s[%d]", field, j), "unknown residency %q; want one of %s%s",
				g, strings.Join(Geographies(), ", "), didYouMean(g, Geographies()))
		}
	}
}

func knownGeos(geos []string) bool {
	for _, g := range geos {
		if _, ok := geographies[g]; !ok {
			return false
		}
	}
	return true
}

// residencyOverlap reports whether two residency lists share some region
// pattern on some cloud, so that their intersection is not empty.
func residencyOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
			for _, c := range pricing.Clouds() {
				for _, pa := range geographies[x][c] {
					for _, pb := range geographies[y][c] {
						if globsOverlap(pa, pb) {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// globsOverlap is a conservative test whether two region patterns can match
// one name: equal, or one matches the other read literally.
func globsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	ok1, _ := path.Match(a, b)
	ok2, _ := path.Match(b, a)
	return ok1 || ok2
}

// Families lists the GPU families quotas may name ("A100", "H100", ...), in
// spec-table order.
func Families() []string {
	var out []string
	for _, m := range pricing.GPUModels() {
		s, _ := pricing.Spec(m)
		if !slices.Contains(out, s.Family) {
			out = append(out, s.Family)
		}
	}
	return out
}

func gpuSuggestion(name string) string {
	if s := pricing.SuggestGPU(name); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	names := make([]string, 0, 12)
	for _, m := range pricing.GPUModels() {
		names = append(names, string(m))
	}
	return "; known GPUs: " + strings.Join(names, ", ")
}

func knownCloud(c pricing.Cloud) bool { return slices.Contains(pricing.Clouds(), c) }

func cloudNames() []string { return []string{"aws", "gcp", "azure"} }

func cloudList(cs []pricing.Cloud) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func sortedClouds(m map[pricing.Cloud]float64) []pricing.Cloud {
	out := make([]pricing.Cloud, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// validateAutoscale checks an inference service's autoscale section.
func validateAutoscale(a Autoscale, e func(field, format string, args ...any)) {
	if a.ScaleUpWindow < 0 || a.ScaleUpWindow > time.Hour {
		e("autoscale.scale_up_window", "autoscale.scale_up_window %s: want 0 to 1h", a.ScaleUpWindow)
	}
	if a.ScaleDownWindow < 0 || a.ScaleDownWindow > 24*time.Hour {
		e("autoscale.scale_down_window", "autoscale.scale_down_window %s: want 0 to 24h", a.ScaleDownWindow)
	}
	m := a.Prometheus
	if m == nil {
		return
	}
	if u, err := url.Parse(m.URL); err == nil && u.User != nil {
		// Never echo it: the value holds a password.
		e("autoscale.prometheus.url", "autoscale.prometheus.url: credentials are not allowed in the URL (policy files are shared and logged); put Prometheus behind a proxy that authenticates, or give the broker network access")
	} else if err == nil && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
		// Not echoed either: a query string is where a token would go.
		// (The broker adds /api/v1/query to the URL, so a query string
		// there would not work anyway.)
		e("autoscale.prometheus.url", "autoscale.prometheus.url (not shown: a query string may hold a token): want the server's base URL with no query string or fragment, e.g. http://prometheus:9090 or https://metrics.example.com/prometheus")
	} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if strings.Contains(m.URL, "@") {
			// A URL that does not parse may still hold user:password@.
			e("autoscale.prometheus.url", "autoscale.prometheus.url (not shown: it may hold credentials): want the server's http(s) URL, e.g. http://prometheus:9090, with no credentials")
		} else {
			e("autoscale.prometheus.url", "autoscale.prometheus.url %q: want the server's http(s) URL, e.g. http://prometheus:9090", m.URL)
		}
	}
	switch q := strings.TrimSpace(m.Query); {
	case q == "":
		e("autoscale.prometheus.query", "autoscale.prometheus.query: want a PromQL expression of the total load, e.g. sum(rate(http_requests_total{service=\"chat\"}[2m]))")
	case len(q) > 4096:
		e("autoscale.prometheus.query", "autoscale.prometheus.query: %d characters; at most 4096", len(q))
	}
	if !finite(m.TargetPerReplica) || m.TargetPerReplica <= 0 {
		e("autoscale.prometheus.target_per_replica", "autoscale.prometheus.target_per_replica %v: want the load one replica should carry, above 0", m.TargetPerReplica)
	}
}

// checkScaling: each efficiency is a share of linear speed-up per doubling,
// in (0, 1].
func (r *reporter) checkScaling(s scope, i int, prefix string, sc Scaling) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"intra_node", sc.IntraNode}, {"inter_node", sc.InterNode}} {
		if !finite(f.v) || f.v <= 0 || f.v > 1 {
			r.errf(s, i, prefix+"."+f.name, "%s.%s %v: want the share of linear speed-up kept per doubling, in (0, 1], e.g. 0.9", prefix, f.name, f.v)
		}
	}
}

// checkSchedule parses a job's cron schedule (for policies built in code;
// Parse reports syntax errors at their column) and checks that a run can
// finish before the next one starts when the job has a deadline longer
// than that.
func (r *reporter) checkSchedule(i int) {
	w := &r.p.Workloads[i]
	c, err := ParseCron(w.Schedule)
	if err != nil {
		r.errf(scopeWorkload, i, "schedule", "schedule: %v", err)
		return
	}
	if gap := c.Stats().MinGap; w.Deadline > gap {
		r.errf(scopeWorkload, i, "deadline", "deadline %s is longer than the %s between runs of schedule %q; a run must end before the next starts, so shorten the deadline or run less often",
			FormatDuration(w.Deadline), FormatDuration(gap), w.Schedule)
	}
}

// checkLoad checks an inference service's load profile.
func (r *reporter) checkLoad(i int) {
	w := &r.p.Workloads[i]
	l := w.Load
	e := func(field, format string, args ...any) { r.errf(scopeWorkload, i, field, format, args...) }
	byReplicas, byRate := len(l.ReplicasByHour) > 0, len(l.RequestsPerSecond) > 0
	switch {
	case byReplicas && byRate:
		e("load.requests_per_second", "load: give replicas_by_hour or requests_per_second, not both")
		return
	case !byReplicas && !byRate:
		e("load", "load: want replicas_by_hour: [24 or 168 counts], or requests_per_second: [24 or 168 rates] with requests_per_replica: N")
		return
	}
	field, n := "load.replicas_by_hour", len(l.ReplicasByHour)
	if byRate {
		field, n = "load.requests_per_second", len(l.RequestsPerSecond)
	}
	if n != 24 && n != 168 {
		e(field, "%s has %d entries; want 24 (one per hour of the day, UTC) or 168 (one per hour of the week from Monday 00:00 UTC)", field, n)
	}
	maxR := max(w.Replicas.Max, w.Replicas.Min)
	for j, v := range l.ReplicasByHour {
		switch {
		case v < 0:
			e(fmt.Sprintf("%s[%d]", field, j), "%s[%d] is %d; want a replica count, 0 or more", field, j, v)
		case v > maxR && maxR >= 1:
			e(fmt.Sprintf("%s[%d]", field, j), "%s[%d] is %d replicas, more than replicas.max %d; raise replicas.max or lower the profile", field, j, v, maxR)
		}
	}
	for j, v := range l.RequestsPerSecond {
		if !finite(v) || v < 0 {
			e(fmt.Sprintf("%s[%d]", field, j), "%s[%d] is %v; want requests per second, 0 or more", field, j, v)
		}
	}
	switch {
	case byRate && l.RequestsPerReplica == 0:
		e("load.requests_per_replica", "load.requests_per_second needs requests_per_replica: N, the requests per second one replica serves at full utilisation")
	case !finite(l.RequestsPerReplica) || l.RequestsPerReplica < 0:
		e("load.requests_per_replica", "load.requests_per_replica %v: want requests per second one replica serves, above 0", l.RequestsPerReplica)
	case byReplicas && l.RequestsPerReplica != 0:
		e("load.requests_per_replica", "load.requests_per_replica applies to requests_per_second, not replicas_by_hour")
	}
}

// checkSpotCapacity checks the fleet-wide spot capacity per pool.
func (r *reporter) checkSpotCapacity() {
	sc := &r.p.SpotCapacity
	if sc.DefaultGPUsPerPool < 1 {
		r.errf(scopeTop, 0, "spot_capacity.default_gpus_per_pool", "spot_capacity.default_gpus_per_pool %d: want the spot GPUs one pool gives the whole fleet, at least 1 (default %d); list pools with 0 under pools: to forbid spot there", sc.DefaultGPUsPerPool, DefaultSpotCapacityGPUs)
	}
	for j, pl := range sc.Pools {
		f := fmt.Sprintf("spot_capacity.pools[%d]", j)
		e := func(format string, args ...any) {
			r.errf(scopeTop, 0, f, "spot_capacity pool %q: "+format, append([]any{pl.Key}, args...)...)
		}
		if strings.Count(pl.Key, "/") != 2 || pl.Cloud == "" || pl.Zone == "" {
			e("want cloud/zone/gpu, e.g. aws/us-east-1a/H100 (zone is a glob, or the region for Azure; gpu may be *)")
			continue
		}
		if !knownCloud(pl.Cloud) {
			e("unknown cloud %q; want aws, gcp or azure%s", pl.Cloud, didYouMean(string(pl.Cloud), cloudNames()))
		}
		if err := checkGlob(pl.Zone); err != nil {
			e("%v", err)
		}
		if pl.GPU != "" {
			if _, ok := pricing.Spec(pl.GPU); !ok {
				e("unknown GPU %q%s", pl.GPU, gpuSuggestion(string(pl.GPU)))
			}
		}
		if pl.GPUs < 0 {
			e("spot GPUs %d: want 0 (no spot in the pool) or more", pl.GPUs)
		}
	}
}
