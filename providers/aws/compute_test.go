package aws

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

func testLaunchConfig() ComputeConfig {
	return ComputeConfig{
		Regions: map[string]RegionLaunch{
			"us-east-1": {
				ImageID:          "ami-0123456789abcdef0",
				SecurityGroupIDs: []string{"sg-0123456789abcdef0"},
				Subnets:          map[string]string{"us-east-1a": "subnet-0a23456789abcdef0", "us-east-1b": "subnet-0b23456789abcdef0", "us-east-1c": "subnet-0c23456789abcdef0"},
			},
			"us-west-2": {
				LaunchTemplateName: "gpu-workers",
				Subnets:            map[string]string{"us-west-2a": "subnet-1a23456789abcdef0"},
			},
		},
		InstanceProfile: "gpubroker-node",
	}
}

func newTestCompute(t testing.TB, f *fakeEC2, mod func(*ComputeConfig)) *Compute {
	t.Helper()
	cfg := testLaunchConfig()
	cfg.AWS = &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "SECRETEXAMPLE", "")}
	cfg.EC2Endpoint = f.srv.URL
	cfg.MaxBackoff = 2 * time.Millisecond
	cfg.MaxAttempts = 3
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewCompute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func offer(region, zone, typ string) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: region, Zone: zone, InstanceType: typ}
}

func launchReq(token string, cands ...pricing.Offer) providers.LaunchRequest {
	return providers.LaunchRequest{
		ClientToken: token, Name: "train-0", Candidates: cands, Capacity: pricing.Spot,
		Tags:     map[string]string{"gpubroker/managed": "true", "gpubroker/slot": "train/0"},
		UserData: "#!/bin/sh\ngpubroker agent --token t0k3n\n",
	}
}

func TestComputeLaunchSpot(t *testing.T) {
	f := newFakeEC2(t)
	c := newTestCompute(t, f, nil)
	ctx := context.Background()
	inst, err := c.Launch(ctx, launchReq("slot-train-0-gen-1", offer("us-east-1", "us-east-1a", "p4d.24xlarge"), offer("us-east-1", "", "p5.48xlarge")))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Zone != "us-east-1a" || inst.InstanceType != "p4d.24xlarge" || inst.Region != "us-east-1" || !strings.HasPrefix(inst.ID, "i-") || inst.State != providers.StatePending || inst.Capacity != pricing.Spot {
		t.Fatalf("instance = %+v", inst)
	}
	form := f.lastForm("CreateFleet")
	want := map[string]string{
		"Type":        "instant",
		"ClientToken": "slot-train-0-gen-1",
		"TargetCapacitySpecification.TotalTargetCapacity":       "1",
		"TargetCapacitySpecification.DefaultTargetCapacityType": "spot",
		"SpotOptions.AllocationStrategy":                        "price-capacity-optimized",
		"SpotOptions.InstanceInterruptionBehavior":              "terminate",
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType":      "p4d.24xlarge",
		"LaunchTemplateConfigs.1.Overrides.1.SubnetId":          "subnet-0a23456789abcdef0",
		"LaunchTemplateConfigs.1.Overrides.1.Priority":          "0",
		// A zoneless candidate becomes one override per configured subnet.
		"LaunchTemplateConfigs.1.Overrides.2.InstanceType": "p5.48xlarge",
		"LaunchTemplateConfigs.1.Overrides.4.SubnetId":     "subnet-0c23456789abcdef0",
		"LaunchTemplateConfigs.1.Overrides.4.Priority":     "3",
	}
	for k, v := range want {
		if got := form.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if form.Get("LaunchTemplateConfigs.1.Overrides.5.InstanceType") != "" {
		t.Error("more overrides than candidates × subnets")
	}
	ltForm := f.lastForm("CreateLaunchTemplate")
	if ltForm.Get("LaunchTemplateData.ImageId") != "ami-0123456789abcdef0" || ltForm.Get("LaunchTemplateData.SecurityGroupId.1") != "sg-0123456789abcdef0" ||
		ltForm.Get("LaunchTemplateData.IamInstanceProfile.Name") != "gpubroker-node" || ltForm.Get("LaunchTemplateData.MetadataOptions.HttpTokens") != "required" {
		t.Errorf("launch template data = %v", ltForm)
	}
	live := f.live()
	if len(live) != 1 {
		t.Fatalf("%d instances in the cloud, want 1", len(live))
	}
	got := live[0]
	if got.userData != "#!/bin/sh\ngpubroker agent --token t0k3n\n" {
		t.Errorf("user data arrived as %q", got.userData)
	}
	for _, tags := range []map[string]string{got.tags, got.volumeTags} {
		if tags["gpubroker/slot"] != "train/0" || tags["Name"] != "train-0" {
			t.Errorf("tags = %v, want the request's tags and Name", tags)
		}
	}
	// A second launch reuses the managed template.
	if _, err := c.Launch(ctx, launchReq("slot-train-1-gen-1", offer("us-east-1", "us-east-1b", "p4d.24xlarge"))); err != nil {
		t.Fatal(err)
	}
	if n := f.count("CreateLaunchTemplate"); n != 1 {
		t.Errorf("CreateLaunchTemplate called %d times, want 1", n)
	}
	// A configured template is used as is.
	if _, err := c.Launch(ctx, launchReq("slot-w", offer("us-west-2", "us-west-2a", "g5.xlarge"))); err == nil {
		t.Fatal("want an error: the fake has no template gpu-workers")
	} else if !errors.Is(err, providers.ErrBadConfig) {
		t.Fatalf("missing template: %v, want ErrBadConfig", err)
	}
}

func TestComputeLaunchOnDemandStrategy(t *testing.T) {
	f := newFakeEC2(t)
	c := newTestCompute(t, f, func(c *ComputeConfig) { c.OnDemandStrategy = "prioritized" })
	req := launchReq("od-1", offer("us-east-1", "us-east-1c", "g5.xlarge"))
	req.Capacity = pricing.OnDemand
	inst, err := c.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	form := f.lastForm("CreateFleet")
	if form.Get("OnDemandOptions.AllocationStrategy") != "prioritized" || form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "on-demand" || form.Get("SpotOptions.AllocationStrategy") != "" {
		t.Errorf("on-demand options: %v", form)
	}
	if inst.Capacity != pricing.OnDemand {
		t.Errorf("capacity %s", inst.Capacity)
	}
}

func TestComputeLaunchFallsBackToNextPool(t *testing.T) {
	f := newFakeEC2(t)
	f.poolErr["us-east-1a/p4d.24xlarge/spot"] = "InsufficientInstanceCapacity"
	c := newTestCompute(t, f, nil)
	inst, err := c.Launch(context.Background(), launchReq("tok", offer("us-east-1", "us-east-1a", "p4d.24xlarge"), offer("us-east-1", "us-east-1b", "p4d.24xlarge")))
	if err != nil {
		t.Fatal(err)
	}
	if inst.Zone != "us-east-1b" {
		t.Errorf("zone %s, want the second pool", inst.Zone)
	}
}

func TestComputeLaunchPoolErrors(t *testing.T) {
	for _, tc := range []struct {
		code string
		want error
	}{
		{"InsufficientInstanceCapacity", providers.ErrInsufficientCapacity},
		{"MaxSpotInstanceCountExceeded", providers.ErrQuotaExceeded},
		{"VcpuLimitExceeded", providers.ErrQuotaExceeded},
		{"InvalidAMIID.NotFound", providers.ErrBadConfig},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeEC2(t)
			f.poolErr["us-east-1a/p4d.24xlarge/spot"] = tc.code
			f.poolErr["us-east-1b/p5.48xlarge/spot"] = tc.code
			c := newTestCompute(t, f, nil)
			_, err := c.Launch(context.Background(), launchReq("tok", offer("us-east-1", "us-east-1a", "p4d.24xlarge"), offer("us-east-1", "us-east-1b", "p5.48xlarge")))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			les := providers.LaunchErrors(err)
			if len(les) != 2 {
				t.Fatalf("%d launch errors, want one per pool: %v", len(les), err)
			}
			want := []providers.PoolKey{
				{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "p4d.24xlarge", Capacity: pricing.Spot},
				{Cloud: pricing.AWS, Zone: "us-east-1b", InstanceType: "p5.48xlarge", Capacity: pricing.Spot},
			}
			for i, le := range les {
				if le.Pool != want[i] || le.Code != tc.code {
					t.Errorf("launch error %d = %+v %s, want pool %+v code %s", i, le.Pool, le.Code, want[i], tc.code)
				}
			}
			if len(f.live()) != 0 {
				t.Error("an instance started")
			}
		})
	}
}

func TestComputeLaunchCallErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults []fault
		want   error
		code   string
		calls  int
	}{
		{"unauthorized", []fault{{status: 403, body: errBody("UnauthorizedOperation", "You are not authorized to perform this operation. Encoded authorization failure message: 4Xb1...")}}, providers.ErrUnauthorized, "UnauthorizedOperation", 1},
		// EC2 sends capacity errors with HTTP 500; the SDK would retry them.
		{"capacity as 500 is not retried", []fault{{status: 500, body: errBody("InsufficientInstanceCapacity", "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a).")}}, providers.ErrInsufficientCapacity, "InsufficientInstanceCapacity", 1},
		{"quota", []fault{{status: 400, body: errBody("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded")}}, providers.ErrQuotaExceeded, "MaxSpotInstanceCountExceeded", 1},
		{"token reused with other parameters", []fault{{status: 400, body: errBody("IdempotentParameterMismatch", "The client token you have provided is associated with a resource that is already deleted, or has different parameters.")}}, providers.ErrBadConfig, "IdempotentParameterMismatch", 1},
		{"bad parameter", []fault{{status: 400, body: errBody("InvalidParameterValue", "Value (p9.huge) for parameter instanceType is invalid.")}}, providers.ErrBadConfig, "InvalidParameterValue", 1},
		{"throttled to the end", []fault{{status: 503, body: errBody("RequestLimitExceeded", "Request limit exceeded."), times: -1}}, providers.ErrThrottled, "RequestLimitExceeded", 3},
		{"throttled then served", []fault{{status: 503, body: errBody("RequestLimitExceeded", "Request limit exceeded."), times: 2}}, nil, "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEC2(t)
			f.fail("CreateFleet", tc.faults...)
			c := newTestCompute(t, f, nil)
			_, err := c.Launch(context.Background(), launchReq("tok", offer("us-east-1", "us-east-1a", "p4d.24xlarge")))
			if n := f.count("CreateFleet"); n != tc.calls {
				t.Errorf("CreateFleet called %d times, want %d", n, tc.calls)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var le *providers.LaunchError
			if !errors.As(err, &le) || le.Code != tc.code || le.Pool.Zone != "us-east-1a" || le.Pool.InstanceType != "p4d.24xlarge" {
				t.Errorf("launch error = %+v, want code %s and the pool", le, tc.code)
			}
			if strings.Contains(err.Error(), "SECRETEXAMPLE") {
				t.Error("secret in error")
			}
		})
	}
}

func TestComputeLaunchLostResponse(t *testing.T) {
	f := newFakeEC2(t)
	f.drop["CreateFleet"] = 1
	c := newTestCompute(t, f, nil)
	ctx := context.Background()
	req := launchReq("slot-train-0-gen-7", offer("us-east-1", "us-east-1a", "p4d.24xlarge"))
	inst, err := c.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.count("CreateFleet"); n != 2 {
		t.Errorf("CreateFleet called %d times, want 2 (the lost one and the retry)", n)
	}
	live := f.live()
	if len(live) != 1 || live[0].id != inst.ID {
		t.Fatalf("cloud has %d instances (want 1, %s)", len(live), inst.ID)
	}
	// The fleet retrying the intent after a crash gets the same instance.
	again, err := c.Launch(ctx, req)
	if err != nil || again.ID != inst.ID || len(f.live()) != 1 {
		t.Fatalf("relaunch with the same token: %v, %s vs %s, %d instances", err, again.ID, inst.ID, len(f.live()))
	}
}

func TestComputeLaunchTimeout(t *testing.T) {
	f := newFakeEC2(t)
	f.fail("CreateFleet", fault{delay: 5 * time.Second, times: -1})
	c := newTestCompute(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c.Launch(ctx, launchReq("tok", offer("us-east-1", "us-east-1a", "p4d.24xlarge")))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", err)
	}
}

func TestComputeLaunchRejectsBadRequests(t *testing.T) {
	f := newFakeEC2(t)
	c := newTestCompute(t, f, nil)
	for name, req := range map[string]providers.LaunchRequest{
		"no token":         launchReq("", offer("us-east-1", "us-east-1a", "p4d.24xlarge")),
		"no candidates":    launchReq("tok"),
		"other cloud":      launchReq("tok", pricing.Offer{Cloud: pricing.GCP, Region: "us-central1", InstanceType: "a2-highgpu-1g"}),
		"unknown region":   launchReq("tok", offer("eu-west-1", "eu-west-1a", "p4d.24xlarge")),
		"zone sans subnet": launchReq("tok", offer("us-east-1", "us-east-1f", "p4d.24xlarge")),
		"user data > 16 KiB": func() providers.LaunchRequest {
			r := launchReq("tok", offer("us-east-1", "us-east-1a", "p4d.24xlarge"))
			r.UserData = strings.Repeat("x", 16<<10+1)
			return r
		}(),
	} {
		if _, err := c.Launch(context.Background(), req); !errors.Is(err, providers.ErrBadConfig) {
			t.Errorf("%s: err = %v, want ErrBadConfig", name, err)
		}
	}
	if n := f.count("CreateFleet"); n != 0 {
		t.Errorf("CreateFleet called %d times for bad requests", n)
	}
}

func TestComputeListPaginatesAndFilters(t *testing.T) {
	f := newFakeEC2(t)
	mine := map[string]string{"gpubroker/managed": "true"}
	want := map[string]bool{}
	for i := range 1200 {
		id := f.add("us-east-1", "us-east-1a", "g5.xlarge", "spot", "running", mine)
		want[id] = true
		if i%3 == 0 {
			f.add("us-east-1", "us-east-1b", "g5.xlarge", "", "running", map[string]string{"team": "other"})
		}
	}
	stopped := f.add("us-west-2", "us-west-2a", "p5.48xlarge", "", "stopped", mine)
	want[stopped] = true
	gone := f.add("us-west-2", "us-west-2a", "p5.48xlarge", "", "shutting-down", mine)
	want[gone] = true
	c := newTestCompute(t, f, nil)
	got, err := c.List(context.Background(), providers.Filter{Tags: mine})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d instances, want %d", len(got), len(want))
	}
	for _, in := range got {
		if !want[in.ID] {
			t.Fatalf("listed %s, which lacks the tag", in.ID)
		}
		switch in.ID {
		case stopped:
			if in.State != providers.StateStopped || in.Capacity != pricing.OnDemand || in.Zone != "us-west-2a" {
				t.Errorf("stopped instance = %+v", in)
			}
		case gone:
			if in.State != providers.StateTerminated {
				t.Errorf("shutting-down maps to %s", in.State)
			}
		default:
			if in.State != providers.StateRunning || in.Capacity != pricing.Spot || in.PrivateIP == "" || in.LaunchedAt.IsZero() || in.Tags["gpubroker/managed"] != "true" {
				t.Fatalf("instance = %+v", in)
			}
		}
	}
	// 1200 in us-east-1 at 500 a page, and one page for us-west-2: 4 pages.
	// On a loaded machine the test's short per-try timeout can make the SDK
	// ask for a page again; the listing above is exact either way.
	if n := f.count("DescribeInstances"); n < 4 || n > 8 {
		t.Errorf("DescribeInstances called %d times, want 4 pages (at most one retry each)", n)
	}
	if form := f.lastForm("DescribeInstances"); form.Get("Filter.1.Name") != "tag:gpubroker/managed" || form.Get("Filter.1.Value.1") != "true" {
		t.Errorf("filter = %v", form)
	}
}

func TestComputeListFailsWholeOnARegionError(t *testing.T) {
	f := newFakeEC2(t)
	f.add("us-east-1", "us-east-1a", "g5.xlarge", "spot", "running", map[string]string{"k": "v"})
	f.fail("DescribeInstances", fault{status: 403, body: errBody("UnauthorizedOperation", "You are not authorized to perform this operation."), times: -1})
	c := newTestCompute(t, f, nil)
	got, err := c.List(context.Background(), providers.Filter{Regions: []string{"us-east-1"}, Tags: map[string]string{"k": "v"}})
	var re *providers.RegionError
	if got != nil || !errors.Is(err, providers.ErrUnauthorized) || !errors.As(err, &re) || re.Region != "us-east-1" {
		t.Fatalf("List = %v, %v; want no instances and an unauthorized region error", got, err)
	}
}

func TestComputeTerminate(t *testing.T) {
	f := newFakeEC2(t)
	id := f.add("us-east-1", "us-east-1a", "g5.xlarge", "spot", "running", map[string]string{"k": "v"})
	c := newTestCompute(t, f, nil)
	ctx := context.Background()
	ref := providers.InstanceRef{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", ID: id}
	if err := c.Terminate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if len(f.live()) != 0 {
		t.Fatal("instance still live")
	}
	if form := f.lastForm("TerminateInstances"); form.Get("InstanceId.1") != id {
		t.Errorf("form %v", form)
	}
	ref.ID = "i-0000000000000dead"
	if err := c.Terminate(ctx, ref); err != nil {
		t.Errorf("terminating an instance already gone: %v", err)
	}
	f.fail("TerminateInstances", fault{status: 403, body: errBody("UnauthorizedOperation", "You are not authorized to perform this operation.")})
	if err := c.Terminate(ctx, ref); !errors.Is(err, providers.ErrUnauthorized) {
		t.Errorf("err = %v, want ErrUnauthorized", err)
	}
}

func TestComputeSubnetIDsResolvedToZones(t *testing.T) {
	f := newFakeEC2(t)
	c := newTestCompute(t, f, func(c *ComputeConfig) {
		c.Regions = map[string]RegionLaunch{"us-east-1": {ImageID: "ami-0123456789abcdef0", SecurityGroupIDs: []string{"sg-0123456789abcdef0"},
			SubnetIDs: []string{"subnet-0b23456789abcdef0", "subnet-0d23456789abcdef0", "subnet-0b99999999abcdef0"}}}
	})
	inst, err := c.Launch(context.Background(), launchReq("tok", offer("us-east-1", "us-east-1d", "g5.xlarge")))
	if err != nil || inst.Zone != "us-east-1d" {
		t.Fatalf("launch: %+v %v", inst, err)
	}
	if got := f.lastForm("CreateFleet").Get("LaunchTemplateConfigs.1.Overrides.1.SubnetId"); got != "subnet-0d23456789abcdef0" {
		t.Errorf("subnet %s", got)
	}
	if got := c.cfg.Regions["us-east-1"].Subnets["us-east-1b"]; got != "subnet-0b23456789abcdef0" {
		t.Errorf("first subnet of a zone should win, got %s", got)
	}
	cfg := testLaunchConfig()
	cfg.Regions = map[string]RegionLaunch{"us-east-1": {ImageID: "ami-0123456789abcdef0", SecurityGroupIDs: []string{"sg-0123456789abcdef0"}, SubnetIDs: []string{"subnet-0deadbeefabcdef00"}}}
	cfg.AWS = &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "SECRETEXAMPLE", "")}
	cfg.EC2Endpoint = f.srv.URL
	if _, err := NewCompute(context.Background(), cfg); !errors.Is(err, providers.ErrBadConfig) || !strings.Contains(err.Error(), "subnet_ids") {
		t.Fatalf("unknown subnet: %v", err)
	}
}

// AWS_ENDPOINT_URL_EC2 reaches the SDK's own endpoint resolution when no
// endpoint is configured (users behind VPC endpoints or proxies).
func TestComputeHonoursAWSEndpointURL(t *testing.T) {
	f := newFakeEC2(t)
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRETEXAMPLE")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL_EC2", f.srv.URL)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testLaunchConfig()
	cfg.MaxAttempts = 1
	c, err := NewCompute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(context.Background(), providers.Filter{Regions: []string{"us-east-1"}}); err != nil {
		t.Fatal(err)
	}
	if f.count("DescribeInstances") != 1 {
		t.Fatal("AWS_ENDPOINT_URL_EC2 was not used")
	}
}

func TestComputeConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*ComputeConfig)
		want string
	}{
		{"ok", func(*ComputeConfig) {}, ""},
		{"no regions", func(c *ComputeConfig) { c.Regions = nil }, "regions: none configured"},
		{"bad region", func(c *ComputeConfig) { c.Regions["useast1"] = c.Regions["us-east-1"] }, `"useast1" is not an AWS region`},
		{"bad ami", func(c *ComputeConfig) { r := c.Regions["us-east-1"]; r.ImageID = "ubuntu"; c.Regions["us-east-1"] = r }, `image_id: "ubuntu" is not an AMI id`},
		{"no sg", func(c *ComputeConfig) {
			r := c.Regions["us-east-1"]
			r.SecurityGroupIDs = nil
			c.Regions["us-east-1"] = r
		}, "security_group_ids: none"},
		{"bad subnet", func(c *ComputeConfig) {
			r := c.Regions["us-east-1"]
			r.Subnets = map[string]string{"us-east-1a": "sub-1"}
			c.Regions["us-east-1"] = r
		}, `subnets.us-east-1a: "sub-1" is not a subnet id`},
		{"zone of another region", func(c *ComputeConfig) {
			r := c.Regions["us-east-1"]
			r.Subnets = map[string]string{"us-west-2a": "subnet-0a23456789abcdef0"}
			c.Regions["us-east-1"] = r
		}, `"us-west-2a" is not a zone of us-east-1`},
		{"template and ami", func(c *ComputeConfig) {
			r := c.Regions["us-west-2"]
			r.ImageID = "ami-0123456789abcdef0"
			c.Regions["us-west-2"] = r
		}, "come from the launch template"},
		{"strategy", func(c *ComputeConfig) { c.SpotStrategy = "cheapest" }, `spot_strategy: "cheapest"`},
		{"endpoint", func(c *ComputeConfig) { c.EC2Endpoint = "vpce-123" }, `ec2_endpoint: "vpce-123"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testLaunchConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, providers.ErrBadConfig) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestClientToken(t *testing.T) {
	if ClientToken("short") != "short" {
		t.Error("short token changed")
	}
	long := strings.Repeat("x", 100)
	a, b := ClientToken(long), ClientToken(long)
	if a != b || len(a) > 64 || a == ClientToken(long+"y") {
		t.Errorf("ClientToken(long) = %q (%d)", a, len(a))
	}
	if got := ClientToken("slot é"); len(got) > 64 || strings.ContainsAny(got, " é") {
		t.Errorf("non-ASCII token kept: %q", got)
	}
}

func FuzzClientToken(f *testing.F) {
	for _, s := range []string{"", "slot-train-0-gen-1", strings.Repeat("é", 40), "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ClientToken(s)
		if len(got) > 64 || !isASCII(got) && got != "" || ClientToken(s) != got {
			t.Fatalf("ClientToken(%q) = %q", s, got)
		}
	})
}
