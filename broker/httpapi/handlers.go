package httpapi

import (
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

var (
	nameRE       = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`)
	instanceIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}$`)
	labelRE      = regexp.MustCompile(`^[A-Za-z0-9._-]{0,64}$`)
)

func checkName(field, v string) error {
	if !nameRE.MatchString(v) {
		return badf("%s %q is not valid; use 1-128 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit", field, v)
	}
	return nil
}

func checkLabel(field, v string) error {
	if !labelRE.MatchString(v) {
		return badf("%s %q is not valid; use at most 64 letters, digits, '.', '_' or '-'", field, v)
	}
	return nil
}

func finite(field string, v float64, lo, hi float64) error {
	if math.IsNaN(v) || v < lo || v > hi {
		return badf("%s is %v; it must be between %v and %v", field, v, lo, hi)
	}
	return nil
}

// --- offers ---

func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// parseOffersQuery turns query parameters into a pricing.Query.
func parseOffersQuery(v url.Values) (pricing.Query, int, error) {
	known := map[string]bool{"gpu": true, "cloud": true, "region": true, "capacity": true, "min_gpus": true,
		"max_gpus": true, "min_gpu_memory_gib": true, "max_price": true, "limit": true}
	for k := range v {
		if !known[k] {
			return pricing.Query{}, 0, badf("unknown query parameter %q; known: gpu, cloud, region, capacity, min_gpus, max_gpus, min_gpu_memory_gib, max_price, limit", k)
		}
	}
	var q pricing.Query
	for _, g := range splitList(v["gpu"]) {
		m, ok := pricing.ParseGPUModel(g)
		if !ok {
			msg := "gpu " + strconv.Quote(g) + " is not a known GPU model"
			if s := pricing.SuggestGPU(g); s != "" {
				msg += "; did you mean " + s + "?"
			}
			return q, 0, badf("%s", msg)
		}
		q.GPUs = append(q.GPUs, m)
	}
	for _, c := range splitList(v["cloud"]) {
		cl, err := pricing.ParseCloud(c)
		if err != nil {
			return q, 0, badf("cloud: %v", err)
		}
		q.Clouds = append(q.Clouds, cl)
	}
	for _, r := range splitList(v["region"]) {
		if _, err := pathMatchCheck(r); err != nil {
			return q, 0, badf("region %q is not a valid glob: %v", r, err)
		}
		q.Regions = append(q.Regions, r)
	}
	switch c := v.Get("capacity"); c {
	case "":
	case string(pricing.OnDemand), string(pricing.Spot):
		q.Capacity = pricing.CapacityType(c)
	default:
		return q, 0, badf("capacity %q is not valid; use on-demand or spot", c)
	}
	intParam := func(name string, lo, hi int) (int, error) {
		s := v.Get(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, badf("%s %q must be a whole number between %d and %d", name, s, lo, hi)
		}
		return n, nil
	}
	floatParam := func(name string, hi float64) (float64, error) {
		s := v.Get(name)
		if s == "" {
			return 0, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > hi {
			return 0, badf("%s %q must be a number between 0 and %v", name, s, hi)
		}
		return f, nil
	}
	var err error
	if q.MinGPUCount, err = intParam("min_gpus", 0, 64); err != nil {
		return q, 0, err
	}
	if q.MaxGPUCount, err = intParam("max_gpus", 0, 64); err != nil {
		return q, 0, err
	}
	if q.MaxGPUCount > 0 && q.MinGPUCount > q.MaxGPUCount {
		return q, 0, badf("min_gpus %d is more than max_gpus %d", q.MinGPUCount, q.MaxGPUCount)
	}
	if q.MinGPUMemoryGiB, err = floatParam("min_gpu_memory_gib", 1024); err != nil {
		return q, 0, err
	}
	if q.MaxPricePerHour, err = floatParam("max_price", 1e6); err != nil {
		return q, 0, err
	}
	limit, err := intParam("limit", 0, 10000)
	if err != nil {
		return q, 0, err
	}
	return q, limit, nil
}

func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	q, limit, err := parseOffersQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cat := s.catalog()
	offers := cat.Query(q)
	if limit > 0 && len(offers) > limit {
		offers = offers[:limit]
	}
	out := apiv1.Offers{GeneratedAt: cat.GeneratedAt.UTC(), Source: cat.Source, Count: len(offers), Offers: make([]apiv1.Offer, 0, len(offers))}
	for _, o := range offers {
		out.Offers = append(out.Offers, apiOffer(o))
	}
	writeJSON(w, http.StatusOK, out)
}

// --- plan and budgets ---

func (s *Server) currentPlan(w http.ResponseWriter, r *http.Request) {
	if s.planner == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "planning is not available in this build")
		return
	}
	p, err := s.planner.Current(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) postPlan(w http.ResponseWriter, r *http.Request) {
	if s.planner == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "planning is not available in this build")
		return
	}
	data, err := readBody(w, r, s.maxBody)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		s.fail(w, r, badf("request body is empty; POST a policy file (YAML)"))
		return
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "request"
	}
	p, err := s.planner.Plan(r.Context(), name, data)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request) {
	if s.planner == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "budgets are not available in this build")
		return
	}
	b, err := s.planner.Budgets(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// --- workloads ---

func validateWorkload(b apiv1.WorkloadInput) error {
	if err := checkName("name", b.Name); err != nil {
		return err
	}
	if b.Team != "" {
		if err := checkName("team", b.Team); err != nil {
			return err
		}
	}
	switch b.Kind {
	case apiv1.KindTraining, apiv1.KindInference, apiv1.KindBatch:
	case "":
		return badf("kind is missing; use training, inference or batch")
	default:
		return badf("kind %q is not valid; use training, inference or batch", b.Kind)
	}
	return rawJSONObject("spec", b.Spec)
}

func workloadRecord(b apiv1.WorkloadInput) store.WorkloadRecord {
	return store.WorkloadRecord{Name: b.Name, Team: b.Team, Kind: b.Kind, Spec: b.Spec}
}

// checkWorkload runs the configured workload check (the planner's view of
// the spec); without one every valid body is accepted.
func (s *Server) checkWorkload(rec store.WorkloadRecord) error {
	if s.checkWL == nil {
		return nil
	}
	return s.checkWL(rec)
}

func (s *Server) listWorkloads(w http.ResponseWriter, r *http.Request) {
	ws, err := s.store.ListWorkloads(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mapList(ws, apiWorkload))
}

func (s *Server) createWorkload(w http.ResponseWriter, r *http.Request) {
	var b apiv1.WorkloadInput
	if err := decodeJSON(w, r, s.maxBody, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateWorkload(b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkWorkload(workloadRecord(b)); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := s.store.CreateWorkload(r.Context(), workloadRecord(b), s.now().UTC())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/workloads/"+rec.Name)
	writeJSON(w, http.StatusCreated, apiWorkload(rec))
}

func (s *Server) getWorkload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := s.store.GetWorkload(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiWorkload(rec))
}

func (s *Server) putWorkload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var b apiv1.WorkloadInput
	if err := decodeJSON(w, r, s.maxBody, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Name == "" {
		b.Name = name
	}
	if b.Name != name {
		s.fail(w, r, badf("name %q in the body differs from %q in the path; renaming is not supported", b.Name, name))
		return
	}
	if err := validateWorkload(b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkWorkload(workloadRecord(b)); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := s.store.UpdateWorkload(r.Context(), workloadRecord(b), s.now().UTC())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiWorkload(rec))
}

func (s *Server) deleteWorkload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.DeleteWorkload(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// --- instances, events, benchmarks ---

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "workload" && k != "state" {
			s.fail(w, r, badf("unknown query parameter %q; known: workload, state", k))
			return
		}
	}
	wl, state := q.Get("workload"), q.Get("state")
	if wl != "" {
		if err := checkName("workload", wl); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if state != "" {
		if _, err := instance.ParseState(state); err != nil {
			s.fail(w, r, badf("%v", err))
			return
		}
	}
	is, err := s.store.ListInstances(r.Context(), wl, state)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mapList(is, apiInstance))
}

func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !instanceIDRE.MatchString(id) {
		s.fail(w, r, badf("instance id %q is not valid", id))
		return
	}
	rec, err := s.store.GetInstance(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiInstance(rec))
}

func parseEventFilter(v url.Values) (store.EventFilter, error) {
	var f store.EventFilter
	for k := range v {
		switch k {
		case "kind", "instance", "workload", "since", "after_id", "limit":
		default:
			return f, badf("unknown query parameter %q; known: kind, instance, workload, since, after_id, limit", k)
		}
	}
	f.Kind, f.Instance, f.Workload = v.Get("kind"), v.Get("instance"), v.Get("workload")
	if f.Kind != "" {
		if _, err := instance.ParseEventKind(f.Kind); err != nil {
			return f, badf("%v", err)
		}
	}
	if f.Instance != "" && !instanceIDRE.MatchString(f.Instance) {
		return f, badf("instance %q is not a valid instance id", f.Instance)
	}
	if f.Workload != "" {
		if err := checkName("workload", f.Workload); err != nil {
			return f, err
		}
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return f, badf("since %q is not an RFC 3339 time like 2026-01-02T15:04:05Z", s)
		}
		f.Since = t
	}
	if s := v.Get("after_id"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return f, badf("after_id %q must be a non-negative whole number", s)
		}
		f.AfterID = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return f, badf("limit %q must be a whole number between 1 and 1000", s)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	f, err := parseEventFilter(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := s.store.ListEvents(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mapList(evs, apiEvent))
}

func (s *Server) listBenchmarks(w http.ResponseWriter, r *http.Request) {
	it := r.URL.Query().Get("instance_type")
	if err := checkLabel("instance_type", it); err != nil {
		s.fail(w, r, err)
		return
	}
	bs, err := s.store.ListBenchmarks(r.Context(), it)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mapList(bs, apiBenchmark))
}
