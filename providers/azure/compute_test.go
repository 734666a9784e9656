package azure

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

const testSubnet = "/subscriptions/" + testSub + "/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/gpu-vnet/subnets/gpu"

func testComputeConfig(f *fakeARM) ComputeConfig {
	hc := f.srv.Client()
	hc.Timeout = 2 * time.Second
	return ComputeConfig{
		SubscriptionID: testSub, ResourceGroup: "gpu-rg",
		Subnets:      map[string]string{"eastus": testSubnet, "westeurope": strings.Replace(testSubnet, "gpu-vnet", "gpu-vnet-we", 1)},
		Image:        "microsoft-dsvm:ubuntu-hpc:2204:latest",
		SSHPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdtQpBFTRbhS6J4G5qcJBHGCooUhtLTl6TPC5sIALq3 ops@example",
		Credential:   &azfake.TokenCredential{},
		Cloud: cloud.Configuration{
			ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: f.srv.URL, Audience: "https://management.azure.com"},
			},
		},
		HTTPClient:                      hc,
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond},
		PollFrequency:                   time.Millisecond,
	}
}

func newTestCompute(t testing.TB, f *fakeARM, mod func(*ComputeConfig)) *Compute {
	t.Helper()
	cfg := testComputeConfig(f)
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewCompute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func azReq(token string, capacity pricing.CapacityType, o pricing.Offer) providers.LaunchRequest {
	return providers.LaunchRequest{
		ClientToken: token, Name: "train-0", Candidates: []pricing.Offer{o}, Capacity: capacity,
		Tags:     map[string]string{"gpubroker/managed": "true", "gpubroker/slot": "train/0"},
		UserData: "#cloud-config\nruncmd: [gpubroker agent]\n",
	}
}

func azOffer(region, zone, size string) pricing.Offer {
	return pricing.Offer{Cloud: pricing.Azure, Region: region, Zone: zone, InstanceType: size}
}

func TestAzureLaunchSpot(t *testing.T) {
	f := newFakeARM(t)
	c := newTestCompute(t, f, nil)
	inst, err := c.Launch(context.Background(), azReq("slot-a-1", pricing.Spot, azOffer("eastus", "2", "Standard_NC24ads_A100_v4")))
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != VMName("train-0", "slot-a-1") || inst.Zone != "2" || inst.Region != "eastus" || inst.Capacity != pricing.Spot ||
		inst.InstanceType != "Standard_NC24ads_A100_v4" || inst.PrivateIP == "" || inst.State != providers.StatePending || inst.Tags["gpubroker/slot"] != "train/0" {
		t.Fatalf("instance = %+v", inst)
	}
	vms, nics, disks := f.state()
	if vms != 1 || nics != 1 || disks != 1 {
		t.Fatalf("%d VMs, %d NICs, %d disks", vms, nics, disks)
	}
	// The VM's operation is polled to its end (InProgress, Succeeded); the
	// NIC's PUT already answers provisioningState Succeeded, as Azure's does.
	if f.count("op") < 2 {
		t.Errorf("polled %d operation statuses; want the VM's polled to the end", f.count("op"))
	}
	body := f.put(0)
	for _, tc := range []struct {
		path []any
		want any
	}{
		{[]any{"properties", "priority"}, "Spot"},
		{[]any{"properties", "evictionPolicy"}, "Delete"},
		{[]any{"properties", "billingProfile", "maxPrice"}, float64(-1)},
		{[]any{"zones", 0}, "2"},
		{[]any{"tags", "gpubroker_slot"}, "train/0"},
		{[]any{"tags", TagsKey}, `{"gpubroker/managed":"true","gpubroker/slot":"train/0"}`},
		{[]any{"properties", "storageProfile", "imageReference", "publisher"}, "microsoft-dsvm"},
		{[]any{"properties", "storageProfile", "imageReference", "sku"}, "2204"},
		{[]any{"properties", "storageProfile", "osDisk", "deleteOption"}, "Delete"},
		{[]any{"properties", "storageProfile", "osDisk", "name"}, inst.ID + "-osdisk"},
		{[]any{"properties", "networkProfile", "networkInterfaces", 0, "properties", "deleteOption"}, "Delete"},
		{[]any{"properties", "osProfile", "linuxConfiguration", "disablePasswordAuthentication"}, true},
	} {
		if got := dig(body, tc.path...); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.path, got, tc.want)
		}
	}
	cd, _ := base64.StdEncoding.DecodeString(fmt.Sprint(dig(body, "properties", "osProfile", "customData")))
	if string(cd) != "#cloud-config\nruncmd: [gpubroker agent]\n" {
		t.Errorf("custom data = %q", cd)
	}
	if dig(f.nic(inst.ID+"-nic"), "properties", "ipConfigurations", 0, "properties", "subnet", "id") != testSubnet {
		t.Error("NIC not in the configured subnet")
	}
	got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/slot": "train/0"}})
	if err != nil || len(got) != 1 || got[0].ID != inst.ID || got[0].State != providers.StateRunning || got[0].Tags["gpubroker/slot"] != "train/0" || got[0].LaunchedAt.IsZero() {
		t.Fatalf("list: %+v, %v", got, err)
	}
}

// "a/b" and "a_b" are one Azure tag name; List tells them apart by the
// verbatim tags.
func TestAzureListMatchesVerbatimTags(t *testing.T) {
	f := newFakeARM(t)
	c := newTestCompute(t, f, nil)
	a := azReq("a", pricing.Spot, azOffer("eastus", "1", "Standard_NC4as_T4_v3"))
	b := azReq("b", pricing.Spot, azOffer("eastus", "1", "Standard_NC4as_T4_v3"))
	b.Tags = map[string]string{"gpubroker_slot": "train/0"}
	for _, r := range []providers.LaunchRequest{a, b} {
		if _, err := c.Launch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.List(context.Background(), providers.Filter{Tags: map[string]string{"gpubroker/slot": "train/0"}})
	if err != nil || len(got) != 1 || got[0].ID != VMName("train-0", "a") {
		t.Fatalf("list: %+v %v", got, err)
	}
}

func TestAzureLaunchRegular(t *testing.T) {
	f := newFakeARM(t)
	c := newTestCompute(t, f, func(c *ComputeConfig) {
		// The public cloud's audience, this server as ARM endpoint.
		c.Cloud = cloud.Configuration{}
		c.Endpoint = f.srv.URL
		c.SSHPublicKey = "" // a throw-away key
		c.Image = "/subscriptions/" + testSub + "/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/cuda/versions/1.0.0"
	})
	if _, err := c.Launch(context.Background(), azReq("od", pricing.OnDemand, azOffer("westeurope", "", "Standard_NC4as_T4_v3"))); err != nil {
		t.Fatal(err)
	}
	body := f.put(0)
	if dig(body, "properties", "priority") != "Regular" || dig(body, "properties", "evictionPolicy") != nil || dig(body, "zones") != nil {
		t.Errorf("regular VM body: %v", body["properties"])
	}
	if !strings.HasPrefix(fmt.Sprint(dig(body, "properties", "osProfile", "linuxConfiguration", "ssh", "publicKeys", 0, "keyData")), "ssh-rsa ") {
		t.Error("no throw-away key")
	}
	if !strings.HasSuffix(fmt.Sprint(dig(body, "properties", "storageProfile", "imageReference", "id")), "/versions/1.0.0") {
		t.Error("image id not used")
	}
}

func TestAzureLaunchAllocationFailureCleansUp(t *testing.T) {
	for fx, code := range map[string]string{"zonal-allocation-failed.json": "ZonalAllocationFailed", "allocation-failed.json": "AllocationFailed"} {
		t.Run(code, func(t *testing.T) {
			f := newFakeARM(t)
			f.asyncFail["Standard_ND96asr_v4"] = fx
			c := newTestCompute(t, f, nil)
			_, err := c.Launch(context.Background(), azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_ND96asr_v4")))
			if !errors.Is(err, providers.ErrInsufficientCapacity) {
				t.Fatalf("err = %v", err)
			}
			var le *providers.LaunchError
			want := providers.PoolKey{Cloud: pricing.Azure, Zone: "1", InstanceType: "Standard_ND96asr_v4", Capacity: pricing.Spot}
			if !errors.As(err, &le) || le.Pool != want || le.Code != code {
				t.Fatalf("launch error %+v", le)
			}
			if vms, nics, disks := f.state(); vms+nics+disks != 0 {
				t.Fatalf("left %d VMs, %d NICs, %d disks after the failed allocation", vms, nics, disks)
			}
		})
	}
}

func TestAzureLaunchSyncErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault armFault
		want  error
		code  string
		calls int
	}{
		{"sku not available", armFault{status: 409, body: "sku-not-available.json"}, providers.ErrInsufficientCapacity, "SkuNotAvailable", 1},
		{"quota on 409", armFault{status: 409, body: "operation-not-allowed-quota.json"}, providers.ErrQuotaExceeded, "OperationNotAllowed", 1},
		{"throttled on 429", armFault{status: 429, body: "operation-not-allowed-throttled.json", header: map[string]string{"Retry-After": "0"}, times: -1}, providers.ErrThrottled, "OperationNotAllowed", 3},
		{"operation in progress on 409", armFault{status: 409, body: `{"error":{"code":"OperationNotAllowed","message":"Operation 'Put' is not allowed on VM 'train-0' since a PUT operation is already in progress on it."}}`}, providers.ErrThrottled, "OperationNotAllowed", 1},
		{"unauthorized", armFault{status: 403, body: "authorization-failed.json"}, providers.ErrUnauthorized, "AuthorizationFailed", 1},
		{"image", armFault{status: 404, body: "image-not-found.json"}, providers.ErrBadConfig, "PlatformImageNotFound", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			f.fail("vm-put", tc.fault)
			c := newTestCompute(t, f, nil)
			_, err := c.Launch(context.Background(), azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_NC24ads_A100_v4")))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var le *providers.LaunchError
			if !errors.As(err, &le) || le.Code != tc.code || le.Pool.InstanceType != "Standard_NC24ads_A100_v4" {
				t.Fatalf("launch error %+v", le)
			}
			if n := f.count("vm-put"); n != tc.calls {
				t.Errorf("%d VM PUTs, want %d", n, tc.calls)
			}
			// After a final failure the NIC made for the VM is deleted
			// again; after throttling it stays for the retry to adopt.
			wantNICs := 0
			if errors.Is(err, providers.ErrThrottled) {
				wantNICs = 1
			}
			if vms, nics, disks := f.state(); vms+disks != 0 || nics != wantNICs {
				t.Fatalf("left %d VMs, %d NICs, %d disks", vms, nics, disks)
			}
		})
	}
}

func TestAzureLaunchThrottledThenServed(t *testing.T) {
	f := newFakeARM(t)
	f.fail("vm-put", armFault{status: 429, body: "operation-not-allowed-throttled.json", header: map[string]string{"Retry-After": "0"}, times: 2})
	c := newTestCompute(t, f, nil)
	if _, err := c.Launch(context.Background(), azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_NC24ads_A100_v4"))); err != nil {
		t.Fatal(err)
	}
	if vms, _, _ := f.state(); vms != 1 || f.count("vm-put") != 3 {
		t.Fatalf("%d VMs after %d PUTs", vms, f.count("vm-put"))
	}
}

func TestAzureLaunchLostResponse(t *testing.T) {
	f := newFakeARM(t)
	f.fail("vm-put", armFault{drop: true})
	c := newTestCompute(t, f, nil)
	req := azReq("slot-b-2", pricing.Spot, azOffer("eastus", "3", "Standard_NC24ads_A100_v4"))
	inst, err := c.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if vms, nics, _ := f.state(); vms != 1 || nics != 1 || f.count("vm-put") != 2 {
		t.Fatalf("%d VMs, %d NICs after %d PUTs", vms, nics, f.count("vm-put"))
	}
	again, err := c.Launch(context.Background(), req)
	if err != nil || again.ID != inst.ID {
		t.Fatalf("relaunch: %v %s", err, again.ID)
	}
	if vms, nics, _ := f.state(); vms != 1 || nics != 1 {
		t.Fatalf("relaunch made %d VMs, %d NICs", vms, nics)
	}
}

func TestAzureLaunchRejectsBadRequests(t *testing.T) {
	f := newFakeARM(t)
	c := newTestCompute(t, f, nil)
	big := azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_NC4as_T4_v3"))
	big.UserData = strings.Repeat("x", 64<<10+1)
	for name, req := range map[string]providers.LaunchRequest{
		"user data":   big,
		"no subnet":   azReq("t", pricing.Spot, azOffer("japaneast", "1", "Standard_NC4as_T4_v3")),
		"other cloud": azReq("t", pricing.Spot, pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", InstanceType: "g5.xlarge"}),
	} {
		if _, err := c.Launch(context.Background(), req); !errors.Is(err, providers.ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if f.count("nic-put")+f.count("vm-put") != 0 {
		t.Error("bad requests reached ARM")
	}
}

func TestAzureLaunchTimeoutLeavesNoCleanup(t *testing.T) {
	f := newFakeARM(t)
	f.fail("op", armFault{delay: 5 * time.Second, times: -1})
	c := newTestCompute(t, f, func(c *ComputeConfig) { c.HTTPClient.Timeout = 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Launch(ctx, azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_NC24ads_A100_v4")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if f.count("nic-delete") != 0 {
		t.Error("a launch cut short by its context was cleaned up; it may still succeed")
	}
}

func TestAzureListPagesTagsRegions(t *testing.T) {
	f := newFakeARM(t)
	f.pageSize = 7
	c := newTestCompute(t, f, nil)
	ctx := context.Background()
	for i := range 20 {
		req := azReq(fmt.Sprintf("tok-%d", i), pricing.Spot, azOffer("eastus", "1", "Standard_NC24ads_A100_v4"))
		if i%2 == 1 {
			req.Tags = map[string]string{"team": "other"}
		}
		if i == 4 {
			req.Candidates[0].Region = "westeurope"
		}
		if _, err := c.Launch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.List(ctx, providers.Filter{Tags: map[string]string{"gpubroker/managed": "true"}})
	if err != nil || len(got) != 10 {
		t.Fatalf("listed %d, %v; want 10", len(got), err)
	}
	if f.count("vm-list") != 3 {
		t.Errorf("%d pages, want 3", f.count("vm-list"))
	}
	we, err := c.List(ctx, providers.Filter{Regions: []string{"westeurope"}, Tags: map[string]string{"gpubroker/managed": "true"}})
	if err != nil || len(we) != 1 {
		t.Fatalf("westeurope: %d, %v", len(we), err)
	}
	f.fail("vm-list", armFault{status: 403, body: "authorization-failed.json"})
	if got, err := c.List(ctx, providers.Filter{}); got != nil || !errors.Is(err, providers.ErrUnauthorized) {
		t.Fatalf("list on 403: %d, %v", len(got), err)
	}
}

func TestAzureTerminate(t *testing.T) {
	f := newFakeARM(t)
	c := newTestCompute(t, f, nil)
	ctx := context.Background()
	inst, err := c.Launch(ctx, azReq("t", pricing.Spot, azOffer("eastus", "1", "Standard_NC24ads_A100_v4")))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Terminate(ctx, inst.InstanceRef); err != nil {
		t.Fatal(err)
	}
	if vms, nics, disks := f.state(); vms+nics+disks != 0 {
		t.Fatalf("left %d VMs, %d NICs, %d disks", vms, nics, disks)
	}
	if err := c.Terminate(ctx, inst.InstanceRef); err != nil {
		t.Errorf("terminating a gone VM: %v", err)
	}
	f.fail("vm-delete", armFault{status: 403, body: "authorization-failed.json"})
	if err := c.Terminate(ctx, inst.InstanceRef); !errors.Is(err, providers.ErrUnauthorized) {
		t.Errorf("err = %v", err)
	}
}

func TestAzureComputeConfigValidate(t *testing.T) {
	ok := ComputeConfig{ResourceGroup: "gpu-rg", Subnets: map[string]string{"eastus": testSubnet}, Image: "microsoft-dsvm:ubuntu-hpc:2204:latest"}
	for _, tc := range []struct {
		name string
		mod  func(*ComputeConfig)
		want string
	}{
		{"ok", func(*ComputeConfig) {}, ""},
		{"no rg", func(c *ComputeConfig) { c.ResourceGroup = "" }, "resource_group"},
		{"no subnets", func(c *ComputeConfig) { c.Subnets = nil }, "subnets: none"},
		{"bad subnet", func(c *ComputeConfig) { c.Subnets = map[string]string{"eastus": "gpu"} }, "subnets.eastus"},
		{"bad location", func(c *ComputeConfig) { c.Subnets = map[string]string{"East US": testSubnet} }, `"East US" is not a location`},
		{"bad image", func(c *ComputeConfig) { c.Image = "ubuntu" }, "image:"},
		{"bad key", func(c *ComputeConfig) { c.SSHPublicKey = "not a key" }, "ssh_public_key"},
		{"root", func(c *ComputeConfig) { c.AdminUsername = "root" }, "admin_username"},
		{"small disk", func(c *ComputeConfig) { c.OSDiskGB = 8 }, "os_disk_gb"},
		{"identity", func(c *ComputeConfig) { c.Identity = "me" }, "identity"},
		{"endpoint", func(c *ComputeConfig) { c.Endpoint = "management" }, "endpoint:"},
	} {
		cfg := ok
		cfg.Subnets = map[string]string{"eastus": testSubnet}
		tc.mod(&cfg)
		err := cfg.Validate()
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

func TestVMName(t *testing.T) {
	for _, n := range []string{"train-0", "", "Über/GPU job", strings.Repeat("x", 100)} {
		got := VMName(n, "tok")
		if len(got)+4 > 64 || strings.ContainsAny(got, "/ _") || got != VMName(n, "tok") || got == VMName(n, "tok2") {
			t.Errorf("VMName(%q) = %q", n, got)
		}
	}
}

func FuzzVMName(f *testing.F) {
	for _, s := range []string{"train-0", "", "Über/GPU job", "---"} {
		f.Add(s, "tok")
	}
	re := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	f.Fuzz(func(t *testing.T, s, token string) {
		got := VMName(s, token)
		if len(got) > 60 || !re.MatchString(got) {
			t.Fatalf("VMName(%q) = %q", s, got)
		}
		if strings.ContainsAny(tagName(s), `<>%&\?/`) {
			t.Fatalf("tagName(%q) keeps a forbidden character", s)
		}
	})
}
