package azure

import (
	"encoding/base64"
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

// fakeARM is a stateful stand-in for the Azure Resource Manager calls the
// compute adapter makes, in ARM JSON with long-running operations answered
// through Azure-AsyncOperation status URLs (and Location headers on
// deletes). PUTs are idempotent by resource name, as in ARM. Knobs:
// syncFail answers a VM PUT for a size with an error fixture at once;
// asyncFail lets the PUT be accepted and fails its operation (leaving a
// Failed VM, its NIC and its OS disk, as Azure does); faults script
// answers per call kind; drop does the work and loses the answer.
type fakeARM struct {
	t    testing.TB
	srv  *httptest.Server
	base string

	mu        sync.Mutex
	seq       int
	vms       map[string]map[string]any
	nics      map[string]map[string]any
	disks     map[string]bool
	ops       map[string]*armOp
	syncFail  map[string]armFault // VM size → answer
	asyncFail map[string]string   // VM size → fixture of the failed operation's error
	faults    map[string][]armFault
	calls     map[string]int
	pageSize  int
	puts      []map[string]any
}

type armOp struct {
	polls  int
	errFix string
	done   func() // applied when the operation succeeds
	fail   func()
}

type armFault struct {
	status int
	body   string // fixture under testdata/compute or literal JSON
	header map[string]string
	delay  time.Duration
	drop   bool
	times  int
}

func newFakeARM(t testing.TB) *fakeARM {
	f := &fakeARM{t: t, vms: map[string]map[string]any{}, nics: map[string]map[string]any{}, disks: map[string]bool{},
		ops: map[string]*armOp{}, syncFail: map[string]armFault{}, asyncFail: map[string]string{}, faults: map[string][]armFault{},
		calls: map[string]int{}, pageSize: 50}
	f.srv = httptest.NewServer(f)
	f.base = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeARM) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

// put is the i-th VM PUT body.
func (f *fakeARM) put(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts[i]
}

func (f *fakeARM) nic(name string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nics[name]
}

func (f *fakeARM) fail(kind string, fs ...armFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind] = append(f.faults[kind], fs...)
}

func (f *fakeARM) state() (vms, nics, disks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.vms), len(f.nics), len(f.disks)
}

func armFixture(t testing.TB, name string) string {
	if strings.HasPrefix(name, "{") {
		return name
	}
	b, err := os.ReadFile(filepath.Join("testdata", "compute", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const testSub = "00000000-0000-0000-0000-00000000c0de"

var (
	reARMRes  = regexp.MustCompile(`^/subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/(Microsoft\.Compute/virtualMachines|Microsoft\.Network/networkInterfaces|Microsoft\.Compute/disks)(?:/([^/]+))?$`)
	reARMOp   = regexp.MustCompile(`^/subscriptions/([^/]+)/providers/Microsoft\.(Compute|Network)/locations/([^/]+)/operations/([^/]+)$`)
	kindNames = map[string]string{"Microsoft.Compute/virtualMachines": "vm", "Microsoft.Network/networkInterfaces": "nic", "Microsoft.Compute/disks": "disk"}
)

func (f *fakeARM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		f.writeError(w, 401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
		return
	}
	if r.URL.Query().Get("api-version") == "" {
		f.writeError(w, 400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests.")
		return
	}
	var kind, rg, name, opID string
	if m := reARMOp.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet {
		kind, opID = "op", m[4]
	} else if m := reARMRes.FindStringSubmatch(r.URL.Path); m != nil && m[1] == testSub {
		rg, name = m[2], m[4]
		res := kindNames[m[3]]
		switch {
		case r.Method == http.MethodGet && name == "" && res == "vm":
			kind = "vm-list"
		case name == "":
		case r.Method == http.MethodPut && res != "disk":
			kind = res + "-put"
		case r.Method == http.MethodDelete:
			kind = res + "-delete"
		case r.Method == http.MethodGet:
			kind = res + "-get"
		}
	}
	if kind == "" || (rg != "" && rg != "gpu-rg") {
		f.writeError(w, 404, "ResourceGroupNotFound", "Resource group '"+rg+"' could not be found.")
		return
	}
	f.mu.Lock()
	f.calls[kind]++
	var ft *armFault
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
		for k, v := range ft.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(ft.status)
		fmt.Fprint(w, armFixture(f.t, ft.body))
		return
	}
	var body map[string]any
	if r.Method == http.MethodPut {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			f.writeError(w, 400, "InvalidRequestFormat", "Cannot parse the request.")
			return
		}
	}
	f.mu.Lock()
	status, hdr, out := f.handle(kind, name, opID, r, body)
	f.mu.Unlock()
	if ft != nil && ft.drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	}
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	if out == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(out)
}

func (f *fakeARM) writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func notFound(kind, name string) map[string]any {
	return map[string]any{"error": map[string]any{"code": "ResourceNotFound",
		"message": fmt.Sprintf("The Resource '%s/%s' under resource group 'gpu-rg' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", kind, name)}}
}

func (f *fakeARM) newOp(rp, loc string, op *armOp) map[string]string {
	f.seq++
	id := fmt.Sprintf("6f3c9a2e-%04x-4d1b-9e8f-%012x", f.seq, f.seq)
	f.ops[id] = op
	u := fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.%s/locations/%s/operations/%s?api-version=2024-11-01", f.base, testSub, rp, loc, id)
	return map[string]string{"Azure-AsyncOperation": u}
}

func resID(kind, name string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/gpu-rg/providers/" + kind + "/" + name
}

func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func (f *fakeARM) handle(kind, name, opID string, r *http.Request, body map[string]any) (int, map[string]string, any) {
	switch kind {
	case "op":
		op, ok := f.ops[opID]
		if !ok {
			return 404, nil, notFound("operations", opID)
		}
		op.polls++
		out := map[string]any{"startTime": "2026-12-02T10:00:00.1234567+00:00", "name": opID}
		switch {
		case op.polls < 2:
			out["status"] = "InProgress"
		case op.errFix != "":
			out["status"], out["endTime"] = "Failed", "2026-12-02T10:00:31.7654321+00:00"
			var e map[string]any
			if err := json.Unmarshal([]byte(armFixture(f.t, op.errFix)), &e); err != nil {
				f.t.Fatal(err)
			}
			out["error"] = e["error"]
			if op.polls == 2 && op.fail != nil {
				op.fail()
			}
		default:
			out["status"], out["endTime"] = "Succeeded", "2026-12-02T10:00:31.7654321+00:00"
			if op.polls == 2 && op.done != nil {
				op.done()
			}
		}
		return 200, nil, out
	case "nic-put":
		loc, _ := body["location"].(string)
		subnet, _ := dig(body, "properties", "ipConfigurations", 0, "properties", "subnet", "id").(string)
		if subnet == "" {
			return 400, nil, map[string]any{"error": map[string]any{"code": "InvalidRequestFormat", "message": "Subnet is required."}}
		}
		status := 200
		nic, ok := f.nics[name]
		if !ok {
			status = 201
			f.seq++
			nic = map[string]any{"name": name, "id": resID("Microsoft.Network/networkInterfaces", name), "type": "Microsoft.Network/networkInterfaces",
				"location": loc, "tags": body["tags"], "etag": `W/"` + strconv.Itoa(f.seq) + `"`,
				"properties": map[string]any{"provisioningState": "Succeeded", "enableAcceleratedNetworking": dig(body, "properties", "enableAcceleratedNetworking"),
					"ipConfigurations": []any{map[string]any{"name": "ipconfig1", "id": resID("Microsoft.Network/networkInterfaces", name) + "/ipConfigurations/ipconfig1",
						"properties": map[string]any{"provisioningState": "Succeeded", "privateIPAddress": fmt.Sprintf("10.1.0.%d", 4+f.seq%250),
							"privateIPAllocationMethod": "Dynamic", "subnet": map[string]any{"id": subnet}, "primary": true}}}}}
			f.nics[name] = nic
		}
		return status, f.newOp("Network", loc, &armOp{}), nic
	case "nic-get":
		if nic, ok := f.nics[name]; ok {
			return 200, nil, nic
		}
		return 404, nil, notFound("Microsoft.Network/networkInterfaces", name)
	case "vm-put":
		return f.putVM(name, body)
	case "vm-get":
		if vm, ok := f.vms[name]; ok {
			return 200, nil, vm
		}
		return 404, nil, notFound("Microsoft.Compute/virtualMachines", name)
	case "vm-delete":
		vm, ok := f.vms[name]
		if !ok {
			return 204, nil, nil
		}
		vm["properties"].(map[string]any)["provisioningState"] = "Deleting"
		hdr := f.newOp("Compute", vm["location"].(string), &armOp{done: func() {
			delete(f.vms, name)
			// deleteOption Delete takes the NIC and the OS disk along.
			if dig(vm, "properties", "networkProfile", "networkInterfaces", 0, "properties", "deleteOption") == "Delete" {
				delete(f.nics, name+"-nic")
			}
			if dig(vm, "properties", "storageProfile", "osDisk", "deleteOption") == "Delete" {
				delete(f.disks, name+"-osdisk")
			}
		}})
		hdr["Location"] = hdr["Azure-AsyncOperation"] + "&monitor=true"
		return 202, hdr, nil
	case "nic-delete":
		if _, ok := f.nics[name]; !ok {
			return 204, nil, nil
		}
		vmName := strings.TrimSuffix(name, "-nic")
		if _, attached := f.vms[vmName]; attached {
			return 400, nil, map[string]any{"error": map[string]any{"code": "NicInUse",
				"message": "Network Interface " + resID("Microsoft.Network/networkInterfaces", name) + " is used by existing resource " + resID("Microsoft.Compute/virtualMachines", vmName) + ". In order to delete the network interface, it must be dissociated from the resource."}}
		}
		hdr := f.newOp("Network", "eastus", &armOp{done: func() { delete(f.nics, name) }})
		hdr["Location"] = hdr["Azure-AsyncOperation"]
		return 202, hdr, nil
	case "disk-delete":
		if !f.disks[name] {
			return 204, nil, nil
		}
		hdr := f.newOp("Compute", "eastus", &armOp{done: func() { delete(f.disks, name) }})
		hdr["Location"] = hdr["Azure-AsyncOperation"]
		return 202, hdr, nil
	case "vm-list":
		var names []string
		for n := range f.vms {
			names = append(names, n)
		}
		sort.Strings(names)
		start, _ := strconv.Atoi(r.URL.Query().Get("$skiptoken"))
		end := min(start+f.pageSize, len(names))
		var vals []any
		for _, n := range names[start:end] {
			vals = append(vals, f.vms[n])
		}
		out := map[string]any{"value": vals}
		if end < len(names) {
			out["nextLink"] = fmt.Sprintf("%s/subscriptions/%s/resourceGroups/gpu-rg/providers/Microsoft.Compute/virtualMachines?api-version=2024-11-01&$skiptoken=%d", f.base, testSub, end)
		}
		return 200, nil, out
	}
	return 500, nil, map[string]any{"error": map[string]any{"code": "InternalServerError", "message": "unreachable"}}
}

func (f *fakeARM) putVM(name string, body map[string]any) (int, map[string]string, any) {
	f.puts = append(f.puts, body)
	loc, _ := body["location"].(string)
	size, _ := dig(body, "properties", "hardwareProfile", "vmSize").(string)
	if vm, ok := f.vms[name]; ok {
		// ARM PUT is idempotent: the same VM again.
		return 200, f.newOp("Compute", loc, &armOp{}), vm
	}
	if sf, ok := f.syncFail[size]; ok {
		var e any
		if err := json.Unmarshal([]byte(armFixture(f.t, sf.body)), &e); err != nil {
			f.t.Fatal(err)
		}
		return sf.status, sf.header, e
	}
	nicID, _ := dig(body, "properties", "networkProfile", "networkInterfaces", 0, "id").(string)
	if _, ok := f.nics[lastSegment(nicID)]; !ok {
		return 400, nil, map[string]any{"error": map[string]any{"code": "InvalidResourceReference",
			"message": "Resource " + nicID + " referenced by resource " + resID("Microsoft.Compute/virtualMachines", name) + " was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."}}
	}
	if cd, _ := dig(body, "properties", "osProfile", "customData").(string); cd != "" {
		if _, err := base64.StdEncoding.DecodeString(cd); err != nil {
			return 400, nil, map[string]any{"error": map[string]any{"code": "InvalidParameter", "message": "Custom data in OSProfile must be in Base64 encoding and with a maximum length of 87380 characters.", "target": "customData"}}
		}
	}
	f.seq++
	vm := map[string]any{}
	for k, v := range body {
		vm[k] = v
	}
	vm["name"], vm["id"], vm["type"] = name, resID("Microsoft.Compute/virtualMachines", name), "Microsoft.Compute/virtualMachines"
	props := map[string]any{}
	for k, v := range body["properties"].(map[string]any) {
		props[k] = v
	}
	props["provisioningState"] = "Creating"
	props["vmId"] = fmt.Sprintf("0c9a5d1e-%04x-4f2b-8a7c-%012x", f.seq, f.seq)
	props["timeCreated"] = time.Date(2026, 12, 2, 10, 0, f.seq%60, 0, time.UTC).Format(time.RFC3339Nano)
	if os, ok := props["osProfile"].(map[string]any); ok {
		// ARM never returns customData.
		cp := map[string]any{}
		for k, v := range os {
			if k != "customData" {
				cp[k] = v
			}
		}
		props["osProfile"] = cp
	}
	vm["properties"] = props
	f.vms[name] = vm
	// Azure creates the OS disk during provisioning, even when allocation
	// then fails.
	f.disks[name+"-osdisk"] = true
	op := &armOp{errFix: f.asyncFail[size]}
	op.done = func() { props["provisioningState"] = "Succeeded" }
	op.fail = func() { props["provisioningState"] = "Failed" }
	return 201, f.newOp("Compute", loc, op), vm
}

func lastSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }
