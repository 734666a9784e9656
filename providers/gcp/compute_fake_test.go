package gcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCompute is a stateful stand-in for the Compute Engine REST API calls
// the adapter makes: instances insert/get/delete/aggregatedList and
// zoneOperations wait, in the API's JSON. Like Compute Engine it answers a
// repeated requestId with the first operation and refuses a second
// instance of one name (409 alreadyExists). Knobs: poolFail ends an
// insert's operation DONE with the error of a testdata/compute fixture;
// faults script answers per call kind ("insert", "wait", "delete", "get",
// "list"); a fault with drop does the work and cuts the connection.
type fakeCompute struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	seq       int
	instances map[string]*fakeVM // "zone/name"
	ops       map[string]map[string]any
	requests  map[string]string // requestId → operation name
	poolFail  map[string]string // "zone/machineType" → fixture
	pending   map[string]string // operation → fixture it ends with
	faults    map[string][]cfault
	calls     map[string]int
	bodies    map[string][]map[string]any // posted instance bodies by kind
	queries   map[string][]string
}

type fakeVM struct {
	zone, name, status string
	body               map[string]any
	created            time.Time
	id                 int
}

// cfault is one scripted answer: a status with a body (a fixture file name
// or literal JSON), a delay, or drop (do the work, lose the answer).
type cfault struct {
	status int
	body   string
	delay  time.Duration
	drop   bool
	times  int // < 0: for ever
}

func newFakeCompute(t testing.TB) *fakeCompute {
	f := &fakeCompute{t: t, instances: map[string]*fakeVM{}, ops: map[string]map[string]any{}, requests: map[string]string{},
		poolFail: map[string]string{}, pending: map[string]string{}, faults: map[string][]cfault{}, calls: map[string]int{}, bodies: map[string][]map[string]any{}, queries: map[string][]string{}}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCompute) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

// body is the i-th request body of a kind of call.
func (f *fakeCompute) body(kind string, i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[kind][i]
}

// query is the i-th raw query of a kind of call.
func (f *fakeCompute) query(kind string, i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[kind][i]
}

func (f *fakeCompute) fail(kind string, fs ...cfault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind] = append(f.faults[kind], fs...)
}

func (f *fakeCompute) vms() []*fakeVM {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeVM
	for _, v := range f.instances {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// add puts an instance in the fake as if created earlier.
func (f *fakeCompute) add(zone, name, machine, model, status string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ls := map[string]any{}
	for k, v := range labels {
		ls[k] = v
	}
	f.seq++
	f.instances[zone+"/"+name] = &fakeVM{zone: zone, name: name, status: status, id: f.seq,
		created: time.Date(2026, 12, 2, 2, 0, 0, 0, time.FixedZone("PST", -8*3600)),
		body: map[string]any{"name": name, "machineType": "zones/" + zone + "/machineTypes/" + machine, "labels": ls,
			"scheduling": map[string]any{"provisioningModel": model}, "networkInterfaces": []any{map[string]any{"network": "global/networks/default"}}}}
}

func fixture(t testing.TB, name string) string {
	if strings.HasPrefix(name, "{") {
		return name
	}
	b, err := os.ReadFile(filepath.Join("testdata", "compute", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	reInstances = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances(?:/([^/]+))?$`)
	reWait      = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/zones/([^/]+)/operations/([^/]+)/wait$`)
	reAggList   = regexp.MustCompile(`^/compute/v1/projects/([^/]+)/aggregated/instances$`)
	reUUID      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reClause    = regexp.MustCompile(`^\(labels\.([a-z][a-z0-9_-]*) = "([a-z0-9_-]*)"\)$`)
)

func (f *fakeCompute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var kind, zone, name, opName string
	var project string
	switch {
	case reWait.MatchString(r.URL.Path) && r.Method == http.MethodPost:
		m := reWait.FindStringSubmatch(r.URL.Path)
		kind, project, zone, opName = "wait", m[1], m[2], m[3]
	case reAggList.MatchString(r.URL.Path) && r.Method == http.MethodGet:
		kind, project = "list", reAggList.FindStringSubmatch(r.URL.Path)[1]
	case reInstances.MatchString(r.URL.Path):
		m := reInstances.FindStringSubmatch(r.URL.Path)
		project, zone, name = m[1], m[2], m[3]
		switch {
		case r.Method == http.MethodPost && name == "":
			kind = "insert"
		case r.Method == http.MethodGet && name != "":
			kind = "get"
		case r.Method == http.MethodDelete && name != "":
			kind = "delete"
		}
	}
	if kind == "" || project != "gpubroker-test" {
		apiError(w, 404, "notFound", "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	f.mu.Lock()
	f.calls[kind]++
	f.queries[kind] = append(f.queries[kind], r.URL.RawQuery)
	var ft *cfault
	if q := f.faults[kind]; len(q) > 0 {
		x := q[0]
		ft = &x
		if x.times >= 0 {
			if x.times > 1 {
				q[0].times--
			} else {
				f.faults[kind] = q[1:]
			}
		}
	}
	f.mu.Unlock()
	if ft != nil && ft.delay > 0 {
		select {
		case <-time.After(ft.delay):
		case <-r.Context().Done():
			return
		}
	}
	if ft != nil && ft.status > 0 {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(ft.status)
		fmt.Fprint(w, fixture(f.t, ft.body))
		return
	}
	var body map[string]any
	if kind == "insert" {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			apiError(w, 400, "parseError", "Invalid JSON payload received. "+err.Error())
			return
		}
	}
	f.mu.Lock()
	status, out := f.handle(kind, zone, name, opName, r, body)
	f.mu.Unlock()
	if ft != nil && ft.drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(out)
}

func apiError(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(errorBody(code, reason, msg))
}

func errorBody(code int, reason, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []any{map[string]any{"message": msg, "domain": "global", "reason": reason}}}}
}

const selfBase = "https://www.googleapis.com/compute/v1/projects/gpubroker-test/"

func (f *fakeCompute) newOp(kind, zone, target string, failWith string) map[string]any {
	f.seq++
	op := map[string]any{
		"kind": "compute#operation", "id": strconv.Itoa(4507263926134935000 + f.seq),
		"name":          fmt.Sprintf("operation-1733140800%03d-62847b1c2d3e4-5f6a7b8c-%08x", f.seq, f.seq),
		"zone":          selfBase + "zones/" + zone,
		"operationType": kind, "targetLink": selfBase + "zones/" + zone + "/instances/" + target,
		"status": "RUNNING", "user": "gpubroker@gpubroker-test.iam.gserviceaccount.com", "progress": 0,
		"insertTime": "2026-12-02T02:00:00.000-08:00", "startTime": "2026-12-02T02:00:00.500-08:00",
	}
	op["selfLink"] = op["zone"].(string) + "/operations/" + op["name"].(string)
	if failWith != "" {
		f.pending[op["name"].(string)] = failWith
	}
	f.ops[op["name"].(string)] = op
	return op
}

func (f *fakeCompute) handle(kind, zone, name, opName string, r *http.Request, body map[string]any) (int, any) {
	q := r.URL.Query()
	switch kind {
	case "insert":
		f.bodies["insert"] = append(f.bodies["insert"], body)
		rid := q.Get("requestId")
		if !reUUID.MatchString(rid) {
			return 400, errorBody(400, "invalid", "Invalid value for field 'requestId': '"+rid+"'. The request id must be a valid UUID.")
		}
		if opName, ok := f.requests[rid]; ok {
			return 200, f.ops[opName]
		}
		iname, _ := body["name"].(string)
		if _, ok := f.instances[zone+"/"+iname]; ok {
			return 409, errorBody(409, "alreadyExists", "The resource 'projects/gpubroker-test/zones/"+zone+"/instances/"+iname+"' already exists")
		}
		machine := lastPart(fmt.Sprint(body["machineType"]))
		fail := f.poolFail[zone+"/"+machine]
		op := f.newOp("insert", zone, iname, fail)
		f.requests[rid] = op["name"].(string)
		if fail == "" {
			f.seq++
			f.instances[zone+"/"+iname] = &fakeVM{zone: zone, name: iname, status: "PROVISIONING", body: body, id: f.seq,
				created: time.Date(2026, 12, 2, 2, 0, f.seq, 0, time.FixedZone("PST", -8*3600))}
		}
		return 200, op
	case "wait":
		op, ok := f.ops[opName]
		if !ok {
			return 404, errorBody(404, "notFound", "The resource 'projects/gpubroker-test/zones/"+zone+"/operations/"+opName+"' was not found")
		}
		if op["status"] != "DONE" {
			op["status"], op["progress"], op["endTime"] = "DONE", 100, "2026-12-02T02:00:05.000-08:00"
			if fx, ok := f.pending[opName]; ok {
				var e map[string]any
				if err := json.Unmarshal([]byte(fixture(f.t, fx)), &e); err != nil {
					f.t.Fatal(err)
				}
				for k, v := range e {
					op[k] = v
				}
			}
			for _, vm := range f.instances {
				if vm.status == "PROVISIONING" && strings.HasSuffix(fmt.Sprint(op["targetLink"]), "/"+vm.name) {
					vm.status = "RUNNING"
				}
			}
		}
		return 200, op
	case "get":
		vm, ok := f.instances[zone+"/"+name]
		if !ok {
			return 404, errorBody(404, "notFound", "The resource 'projects/gpubroker-test/zones/"+zone+"/instances/"+name+"' was not found")
		}
		return 200, vm.json()
	case "delete":
		if _, ok := f.instances[zone+"/"+name]; !ok {
			return 404, errorBody(404, "notFound", "The resource 'projects/gpubroker-test/zones/"+zone+"/instances/"+name+"' was not found")
		}
		rid := q.Get("requestId")
		if opName, ok := f.requests[rid]; ok && rid != "" {
			return 200, f.ops[opName]
		}
		delete(f.instances, zone+"/"+name)
		op := f.newOp("delete", zone, name, "")
		f.requests[rid] = op["name"].(string)
		return 200, op
	case "list":
		return f.list(q)
	}
	return 500, errorBody(500, "backendError", "unreachable")
}

func (vm *fakeVM) json() map[string]any {
	out := map[string]any{}
	for k, v := range vm.body {
		out[k] = v
	}
	out["kind"] = "compute#instance"
	out["id"] = strconv.Itoa(8765432109876540000 + vm.id)
	out["zone"] = selfBase + "zones/" + vm.zone
	out["status"] = vm.status
	out["creationTimestamp"] = vm.created.Format("2006-01-02T15:04:05.000-07:00")
	out["selfLink"] = selfBase + "zones/" + vm.zone + "/instances/" + vm.name
	out["machineType"] = selfBase + "zones/" + vm.zone + "/machineTypes/" + lastPart(fmt.Sprint(vm.body["machineType"]))
	if nics, ok := vm.body["networkInterfaces"].([]any); ok && len(nics) > 0 {
		nic := map[string]any{}
		for k, v := range nics[0].(map[string]any) {
			nic[k] = v
		}
		nic["networkIP"] = fmt.Sprintf("10.128.%d.%d", vm.id/250, vm.id%250+2)
		nic["name"] = "nic0"
		out["networkInterfaces"] = []any{nic}
	}
	return out
}

func (f *fakeCompute) list(q map[string][]string) (int, any) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	want := map[string]string{}
	if filter := get("filter"); filter != "" {
		for _, c := range strings.Split(filter, " AND ") {
			m := reClause.FindStringSubmatch(c)
			if m == nil {
				return 400, errorBody(400, "invalid", "Invalid value for field 'filter': '"+filter+"'. Invalid list filter expression.")
			}
			want[m[1]] = m[2]
		}
	}
	var match []*fakeVM
	for _, vm := range f.instances {
		labels, _ := vm.body["labels"].(map[string]any)
		ok := true
		for k, v := range want {
			if labels[k] != v {
				ok = false
			}
		}
		if ok {
			match = append(match, vm)
		}
	}
	sort.Slice(match, func(i, j int) bool { return match[i].name < match[j].name })
	max, _ := strconv.Atoi(get("maxResults"))
	if max <= 0 || max > 500 {
		max = 500
	}
	start := 0
	if tok := get("pageToken"); tok != "" {
		var err error
		if start, err = strconv.Atoi(strings.TrimPrefix(tok, "page-")); err != nil || start > len(match) {
			return 400, errorBody(400, "invalid", "Invalid value for field 'pageToken': '"+tok+"'.")
		}
	}
	end := min(start+max, len(match))
	items := map[string]any{
		"zones/asia-northeast2-a": map[string]any{"warning": map[string]any{"code": "NO_RESULTS_ON_PAGE",
			"message": "There are no results for scope 'zones/asia-northeast2-a' on this page.",
			"data":    []any{map[string]any{"key": "scope", "value": "zones/asia-northeast2-a"}}}},
	}
	for _, vm := range match[start:end] {
		key := "zones/" + vm.zone
		scope, _ := items[key].(map[string]any)
		if scope == nil {
			scope = map[string]any{"instances": []any{}}
			items[key] = scope
		}
		scope["instances"] = append(scope["instances"].([]any), vm.json())
	}
	out := map[string]any{"kind": "compute#instanceAggregatedList", "id": "projects/gpubroker-test/aggregated/instances",
		"items": items, "selfLink": selfBase + "aggregated/instances"}
	if end < len(match) {
		out["nextPageToken"] = fmt.Sprintf("page-%d", end)
	}
	return 200, out
}
