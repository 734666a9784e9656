//go:build !agentonly

package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/aws"
)

// TestFleetSetupBuildsRealAdapters: a fleet.clouds.aws section becomes the
// real EC2 compute adapter (pointed at a local endpoint, with static test
// credentials; nothing is called at start), and a bad one fails at start
// with the section's name.
func TestFleetSetupBuildsRealAdapters(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIATESTTESTTESTTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// A local EC2 that knows one subnet (the adapter looks up its zone at
	// start) and refuses everything for the "denied" path.
	ec2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("Action") != "DescribeSubnets" || strings.HasPrefix(r.URL.Path, "/denied") {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>r1</RequestID></Response>`)
			return
		}
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DescribeSubnetsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r2</requestId><subnetSet><item><subnetId>subnet-0123456789abcdef0</subnetId><availabilityZone>us-east-1a</availabilityZone><availabilityZoneId>use1-az4</availabilityZoneId><vpcId>vpc-1</vpcId><state>available</state></item></subnetSet></DescribeSubnetsResponse>`)
	}))
	defer ec2.Close()
	yml := `fleet:
  broker_url: https://broker.example.com
  clouds:
    aws:
      regions: [us-east-1]
      image: ami-0123456789abcdef0
      subnet: subnet-0123456789abcdef0
      security_groups: [sg-0123456789abcdef0]
      endpoint: ` + ec2.URL + `
`
	cfg, err := config.ParseConfig("serve.yaml", []byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	setup, stop, err := fleetSetup(cfg.Fleet, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("fleetSetup: %v", err)
	}
	defer stop()
	if _, ok := setup.Computes[pricing.AWS].(*aws.Compute); !ok {
		t.Fatalf("computes = %#v; want the EC2 adapter for aws", setup.Computes)
	}
	bad := strings.Replace(yml, ec2.URL, ec2.URL+"/denied", 1)
	cfg, err = config.ParseConfig("serve.yaml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fleetSetup(cfg.Fleet, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "fleet.clouds.aws") {
		t.Errorf("denied: %v; want an error naming fleet.clouds.aws", err)
	}
}
