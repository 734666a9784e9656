package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

const testImage = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11"

func newTestGCPCompute(t testing.TB, f *fakeCompute, mod func(*ComputeConfig)) *Compute {
	t.Helper()
	cfg := ComputeConfig{
		Project: "gpubroker-test", Image: testImage, Endpoint: f.srv.URL, WithoutAuthentication: true,
		ServiceAccount: "gpubroker-vm@gpubroker-test.iam.gserviceaccount.com",
		Subnetworks:    map[string]string{"us-central1": "projects/gpubroker-test/regions/us-central1/subnetworks/gpu"},
		Retry:          Retry{Attempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond},
		Now:            func() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) },
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewCompute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func gcpReq(token string, capacity pricing.CapacityType, cands ...pricing.Offer) providers.LaunchRequest {
	return providers.LaunchRequest{
		ClientToken: token, Name: "Train/0", Candidates: cands, Capacity: capacity,
		Tags:     map[string]string{"gpubroker/managed": "true", "gpubroker/slot": "Train/0"},
		UserData: "#!/bin/sh\ngpubroker agent --token t0k3n\n",
	}
}

func gcpOffer(zone, typ string) pricing.Offer {
	return pricing.Offer{Cloud: pricing.GCP, Region: zone[:strings.LastIndex(zone, "-")], Zone: zone, InstanceType: typ}
}

// dig follows a path of map keys and slice indexes in decoded JSON.
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

func TestGCPLaunchSpotN1WithT4(t *testing.T) {
	f := newFakeCompute(t)
	c := newTestGCPCompute(t, f, nil)
	inst, err := c.Launch(context.Background(), gcpReq("slot-a-gen-1", pricing.Spot, gcpOffer("us-central1-a", "n1-standard-8+nvidia-tesla-t4x1")))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^train-0-[0-9a-f]{10}$`).MatchString(inst.ID) || inst.Zone != "us-central1-a" || inst.Region != "us-central1" ||
		inst.Capacity != pricing.Spot || inst.State != providers.StatePending || inst.Tags["gpubroker/slot"] != "Train/0" {
		t.Fatalf("instance = %+v", inst)
	}
	if f.count("wait") != 1 {
		t.Errorf("waited %d times on the operation, want 1", f.count("wait"))
	}
	b := f.body("insert", 0)
	for _, tc := range []struct {
		path []any
		want any
	}{
		{[]any{"machineType"}, "projects/gpubroker-test/zones/us-central1-a/machineTypes/n1-standard-8"},
		{[]any{"guestAccelerators", 0, "acceleratorType"}, "projects/gpubroker-test/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4"},
		{[]any{"guestAccelerators", 0, "acceleratorCount"}, float64(1)},
		{[]any{"scheduling", "provisioningModel"}, "SPOT"},
		{[]any{"scheduling", "instanceTerminationAction"}, "DELETE"},
		{[]any{"scheduling", "onHostMaintenance"}, "TERMINATE"},
		{[]any{"scheduling", "automaticRestart"}, false},
		{[]any{"labels", "gpubroker_slot"}, "train_0"},
		{[]any{"labels", "gpubroker_managed"}, "true"},
		{[]any{"disks", 0, "autoDelete"}, true},
		{[]any{"disks", 0, "initializeParams", "sourceImage"}, testImage},
		{[]any{"disks", 0, "initializeParams", "labels", "gpubroker_slot"}, "train_0"},
		{[]any{"networkInterfaces", 0, "subnetwork"}, "projects/gpubroker-test/regions/us-central1/subnetworks/gpu"},
		{[]any{"serviceAccounts", 0, "email"}, "gpubroker-vm@gpubroker-test.iam.gserviceaccount.com"},
	} {
		if got := dig(b, tc.path...); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.path, got, tc.want)
		}
	}
	meta := map[string]string{}
	for i := 0; dig(b, "metadata", "items", i) != nil; i++ {
		meta[fmt.Sprint(dig(b, "metadata", "items", i, "key"))] = fmt.Sprint(dig(b, "metadata", "items", i, "value"))
	}
	if meta["startup-script"] != "#!/bin/sh\ngpubroker agent --token t0k3n\n" || meta["user-data"] != meta["startup-script"] {
		t.Errorf("metadata = %v", meta)
	}
	q, _ := url.ParseQuery(f.query("insert", 0))
	if q.Get("requestId") != RequestID("slot-a-gen-1") {
		t.Errorf("requestId = %q", q.Get("requestId"))
	}
	// List gives back the tags verbatim, not the sanitised labels.
	got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/slot": "Train/0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != inst.ID || got[0].Tags["gpubroker/slot"] != "Train/0" || got[0].InstanceType != "n1-standard-8+nvidia-tesla-t4x1" ||
		got[0].State != providers.StateRunning || got[0].Capacity != pricing.Spot || got[0].PrivateIP == "" || got[0].LaunchedAt.IsZero() {
		t.Fatalf("listed %+v", got)
	}
}

// "Train/0" and "train_0" are one label value; List tells them apart by
// the verbatim tags.
func TestGCPListMatchesVerbatimTags(t *testing.T) {
	f := newFakeCompute(t)
	c := newTestGCPCompute(t, f, nil)
	a := gcpReq("a", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8"))
	b := gcpReq("b", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8"))
	b.Tags = map[string]string{"gpubroker/managed": "true", "gpubroker/slot": "train_0"}
	for _, r := range []providers.LaunchRequest{a, b} {
		if _, err := c.Launch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/slot": "Train/0"}})
	if err != nil || len(got) != 1 || got[0].Tags["gpubroker/slot"] != "Train/0" {
		t.Fatalf("list: %+v %v", got, err)
	}
}

func TestGCPLaunchOnDemandBuiltInGPU(t *testing.T) {
	f := newFakeCompute(t)
	c := newTestGCPCompute(t, f, func(c *ComputeConfig) { c.ExternalIP = true; c.SSHKeys = "ops:ssh-ed25519 AAAAC3Nz ops" })
	if _, err := c.Launch(context.Background(), gcpReq("od", pricing.OnDemand, gcpOffer("europe-west4-a", "a2-highgpu-1g"))); err != nil {
		t.Fatal(err)
	}
	b := f.body("insert", 0)
	if dig(b, "guestAccelerators") != nil {
		t.Error("a2 has its GPU built in; no guestAccelerators")
	}
	if dig(b, "scheduling", "provisioningModel") != "STANDARD" || dig(b, "scheduling", "instanceTerminationAction") != nil || dig(b, "scheduling", "onHostMaintenance") != "TERMINATE" {
		t.Errorf("scheduling = %v", dig(b, "scheduling"))
	}
	if dig(b, "networkInterfaces", 0, "accessConfigs", 0, "type") != "ONE_TO_ONE_NAT" || dig(b, "networkInterfaces", 0, "subnetwork") != nil {
		t.Errorf("nic = %v", dig(b, "networkInterfaces"))
	}
}

func TestGCPLaunchOperationErrors(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    error
		code    string
	}{
		{"op-zone-resource-pool-exhausted.json", providers.ErrInsufficientCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED"},
		{"op-zone-resource-pool-exhausted-with-details.json", providers.ErrInsufficientCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"},
		{"op-quota-exceeded.json", providers.ErrQuotaExceeded, "QUOTA_EXCEEDED"},
		{"op-image-not-found.json", providers.ErrBadConfig, "RESOURCE_NOT_FOUND"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeCompute(t)
			f.poolFail["us-central1-b/n1-standard-8"] = tc.fixture
			c := newTestGCPCompute(t, f, nil)
			_, err := c.Launch(context.Background(), gcpReq("tok", pricing.Spot, gcpOffer("us-central1-b", "n1-standard-8+nvidia-tesla-t4x1")))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var le *providers.LaunchError
			want := providers.PoolKey{Cloud: pricing.GCP, Zone: "us-central1-b", InstanceType: "n1-standard-8+nvidia-tesla-t4x1", Capacity: pricing.Spot}
			if !errors.As(err, &le) || le.Pool != want || le.Code != tc.code {
				t.Fatalf("launch error = %+v, want pool %+v code %s", le, want, tc.code)
			}
			if len(f.vms()) != 0 {
				t.Error("an instance exists after a failed operation")
			}
		})
	}
}

func TestGCPLaunchCallErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []cfault
		want   error
		calls  int
	}{
		// One status, three meanings: mapped by reason.
		{"403 permission", []cfault{{status: 403, body: "error-403-permission.json"}}, providers.ErrUnauthorized, 1},
		{"403 quota", []cfault{{status: 403, body: "error-403-quota.json"}}, providers.ErrQuotaExceeded, 1},
		{"403 rate limit, retried to the end", []cfault{{status: 403, body: "error-403-rate-limit.json", times: -1}}, providers.ErrThrottled, 3},
		{"429 then served", []cfault{{status: 429, body: "error-429.json", times: 2}}, nil, 3},
		{"400 invalid", []cfault{{status: 400, body: "error-400-invalid.json"}}, providers.ErrBadConfig, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCompute(t)
			f.fail("insert", tc.faults...)
			c := newTestGCPCompute(t, f, nil)
			_, err := c.Launch(context.Background(), gcpReq("tok", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8")))
			if n := f.count("insert"); n != tc.calls {
				t.Errorf("insert called %d times, want %d", n, tc.calls)
			}
			if tc.want == nil {
				if err != nil || len(f.vms()) != 1 {
					t.Fatalf("err = %v, %d instances", err, len(f.vms()))
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var le *providers.LaunchError
			if !errors.As(err, &le) || le.Pool.Zone != "us-central1-a" {
				t.Errorf("no LaunchError with the pool: %v", err)
			}
		})
	}
}

func TestGCPLaunchLostResponse(t *testing.T) {
	f := newFakeCompute(t)
	f.fail("insert", cfault{drop: true})
	c := newTestGCPCompute(t, f, nil)
	req := gcpReq("slot-b-gen-3", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8"))
	inst, err := c.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if f.count("insert") != 2 || len(f.vms()) != 1 || f.vms()[0].name != inst.ID {
		t.Fatalf("%d inserts, %d instances; want 2 and 1", f.count("insert"), len(f.vms()))
	}
	// Long after, the requestId forgotten: the same token finds the same
	// instance by its name (409 alreadyExists) and adopts it.
	f.mu.Lock()
	f.requests = map[string]string{}
	f.mu.Unlock()
	again, err := c.Launch(context.Background(), req)
	if err != nil || again.ID != inst.ID || len(f.vms()) != 1 || f.count("get") != 1 {
		t.Fatalf("relaunch: %v, %s vs %s, %d instances", err, again.ID, inst.ID, len(f.vms()))
	}
}

func TestGCPLaunchRejectsBadRequests(t *testing.T) {
	f := newFakeCompute(t)
	c := newTestGCPCompute(t, f, nil)
	big := gcpReq("tok", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8"))
	big.UserData = strings.Repeat("x", 256<<10+1)
	noZone := gcpReq("tok", pricing.Spot, pricing.Offer{Cloud: pricing.GCP, Region: "us-central1", InstanceType: "g2-standard-8"})
	badType := gcpReq("tok", pricing.Spot, gcpOffer("us-central1-a", "n1-standard-8+nvidia-tesla-t4"))
	for name, req := range map[string]providers.LaunchRequest{"user data": big, "no zone": noZone, "bad type": badType, "no token": gcpReq("", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8"))} {
		if _, err := c.Launch(context.Background(), req); !errors.Is(err, providers.ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if f.count("insert") != 0 {
		t.Error("bad requests reached the API")
	}
}

func TestGCPLaunchTimeout(t *testing.T) {
	f := newFakeCompute(t)
	f.fail("wait", cfault{delay: 5 * time.Second, times: -1})
	c := newTestGCPCompute(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c.Launch(ctx, gcpReq("tok", pricing.Spot, gcpOffer("us-central1-a", "g2-standard-8")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", err)
	}
}

func TestGCPListPaginatesAndFilters(t *testing.T) {
	f := newFakeCompute(t)
	mine := map[string]string{"gpubroker_managed": "true"}
	for i := range 1100 {
		f.add("us-central1-a", fmt.Sprintf("w-%04d", i), "g2-standard-8", "SPOT", "RUNNING", mine)
		if i%4 == 0 {
			f.add("us-central1-b", fmt.Sprintf("other-%04d", i), "g2-standard-8", "STANDARD", "RUNNING", map[string]string{"team": "x"})
		}
	}
	f.add("europe-west4-a", "stopped-0", "a2-highgpu-1g", "STANDARD", "TERMINATED", mine)
	c := newTestGCPCompute(t, f, nil)
	got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/managed": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1101 {
		t.Fatalf("listed %d, want 1101", len(got))
	}
	if f.count("list") != 3 {
		t.Errorf("%d pages, want 3", f.count("list"))
	}
	q, _ := url.ParseQuery(f.query("list", 0))
	if q.Get("filter") != `(labels.gpubroker_managed = "true")` {
		t.Errorf("filter = %q", q.Get("filter"))
	}
	for _, in := range got {
		if in.ID == "stopped-0" && (in.State != providers.StateStopped || in.Capacity != pricing.OnDemand || in.Region != "europe-west4") {
			t.Errorf("stopped = %+v", in)
		}
	}
	// Regions narrow the result.
	eu, err := c.List(context.Background(), providers.Filter{Regions: []string{"europe-west4"}, Tags: map[string]string{"gpubroker/managed": "true"}})
	if err != nil || len(eu) != 1 {
		t.Fatalf("europe-west4: %d, %v", len(eu), err)
	}
	f.fail("list", cfault{status: 403, body: "error-403-permission.json"})
	if got, err := c.List(context.Background(), providers.Filter{}); got != nil || !errors.Is(err, providers.ErrUnauthorized) {
		t.Fatalf("list on 403: %d, %v", len(got), err)
	}
}

func TestGCPTerminate(t *testing.T) {
	f := newFakeCompute(t)
	f.add("us-central1-a", "w-1", "g2-standard-8", "SPOT", "RUNNING", nil)
	c := newTestGCPCompute(t, f, nil)
	ref := providers.InstanceRef{Cloud: pricing.GCP, Region: "us-central1", Zone: "us-central1-a", ID: "w-1"}
	if err := c.Terminate(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if len(f.vms()) != 0 || f.count("wait") != 1 {
		t.Fatalf("%d instances, %d waits", len(f.vms()), f.count("wait"))
	}
	if err := c.Terminate(context.Background(), ref); err != nil {
		t.Errorf("deleting a gone instance: %v", err)
	}
	f.fail("delete", cfault{status: 403, body: "error-403-permission.json"})
	if err := c.Terminate(context.Background(), ref); !errors.Is(err, providers.ErrUnauthorized) {
		t.Errorf("err = %v", err)
	}
}

func TestGCPComputeConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ComputeConfig
		want string
	}{
		{"ok", ComputeConfig{Image: testImage}, ""},
		{"no image", ComputeConfig{}, "image: \"\" is not an image path"},
		{"bad action", ComputeConfig{Image: testImage, TerminationAction: "HIBERNATE"}, "termination_action"},
		{"small disk", ComputeConfig{Image: testImage, DiskSizeGB: 5}, "disk_size_gb"},
		{"bad sa", ComputeConfig{Image: testImage, ServiceAccount: "robot"}, "service_account"},
		{"bad subnet", ComputeConfig{Image: testImage, Subnetworks: map[string]string{"us-central1": "gpu"}}, "subnetworks.us-central1"},
		{"bad endpoint", ComputeConfig{Image: testImage, Endpoint: "compute"}, "endpoint:"},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, providers.ErrBadConfig) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestGCPNamesAndLabels(t *testing.T) {
	if a, b := RequestID("x"), RequestID("x"); a != b || !reUUID.MatchString(a) || a == RequestID("y") {
		t.Errorf("RequestID: %s %s", a, b)
	}
	re := regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	for _, n := range []string{"Train/0", "", "9lives", strings.Repeat("long-name-", 10), "--x--", "ÜBER GPU"} {
		got := InstanceName(n, "tok")
		if !re.MatchString(got) {
			t.Errorf("InstanceName(%q) = %q, not a valid name", n, got)
		}
	}
	if Label("gpubroker/Slot.ID", true) != "gpubroker_slot_id" || Label("9x", true) != "k9x" || len(Label(strings.Repeat("a", 80), false)) != 63 {
		t.Error("Label")
	}
	for _, tc := range []struct {
		o       pricing.Offer
		machine string
		accel   string
		count   int32
	}{
		{pricing.Offer{InstanceType: "n1-standard-16+nvidia-tesla-v100x2"}, "n1-standard-16", "nvidia-tesla-v100", 2},
		{pricing.Offer{InstanceType: "n1-standard-8", GPU: "P100", GPUCount: 1}, "n1-standard-8", "nvidia-tesla-p100", 1},
		{pricing.Offer{InstanceType: "a3-highgpu-8g", GPU: "H100", GPUCount: 8}, "a3-highgpu-8g", "", 0},
	} {
		m, a, n, err := n1Accelerator(tc.o)
		if err != nil || m != tc.machine || a != tc.accel || n != tc.count {
			t.Errorf("%s: %s %s %d %v", tc.o.InstanceType, m, a, n, err)
		}
	}
	if _, _, _, err := n1Accelerator(pricing.Offer{InstanceType: "n1-standard-8+t4"}); err == nil {
		t.Error("malformed N1 type accepted")
	}
}

// Names, labels and instance types come from users' policies and the
// price catalog: whatever they hold, the results must be valid for the API
// and nothing may panic.
func FuzzGCPNames(f *testing.F) {
	for _, s := range []string{"Train/0", "", "n1-standard-8+nvidia-tesla-t4x1", "n1-standard-8+x", "+x0", "ÜBER", "a2-highgpu-1g"} {
		f.Add(s, "tok")
	}
	name := regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	label := regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
	key := regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	f.Fuzz(func(t *testing.T, s, token string) {
		if n := InstanceName(s, token); !name.MatchString(n) {
			t.Fatalf("InstanceName(%q) = %q", s, n)
		}
		if l := Label(s, false); !label.MatchString(l) {
			t.Fatalf("Label(%q) = %q", s, l)
		}
		if k := Label(s, true); !key.MatchString(k) {
			t.Fatalf("Label key (%q) = %q", s, k)
		}
		if m, a, n, err := n1Accelerator(pricing.Offer{InstanceType: s}); err == nil && a != "" && (n <= 0 || m == "") {
			t.Fatalf("n1Accelerator(%q) = %q %q %d", s, m, a, n)
		}
		if !reUUID.MatchString(RequestID(token)) {
			t.Fatal("RequestID not a UUID")
		}
	})
}
