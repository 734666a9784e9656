package agent_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
)

func TestIdentify(t *testing.T) {
	for _, tc := range []struct {
		cloud string
		srv   *httptest.Server
		want  agent.Identity
	}{
		{"aws", httptest.NewServer(fakecloud.NewAWS()), agent.Identity{InstanceID: "i-0123456789abcdef0", Region: "us-east-1",
			Zone: "us-east-1b", InstanceType: "g5.xlarge", Capacity: "spot"}},
		{"gcp", httptest.NewServer(fakecloud.NewGCP()), agent.Identity{InstanceID: "1234567890", Region: "us-central1",
			Zone: "us-central1-a", InstanceType: "g2-standard-8", Capacity: "spot"}},
		{"azure", httptest.NewServer(fakecloud.NewAzure("vm-1")), agent.Identity{InstanceID: "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
			Region: "eastus", Zone: "eastus-2", InstanceType: "Standard_NC24ads_A100_v4", Capacity: "spot"}},
	} {
		got, err := agent.Identify(t.Context(), tc.cloud, tc.srv.URL, tc.srv.Client())
		tc.srv.Close()
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.cloud, got, err, tc.want)
		}
	}
	down := httptest.NewServer(fakecloud.NewAWS())
	down.Close()
	if _, err := agent.Identify(t.Context(), "aws", down.URL, nil); err == nil {
		t.Error("no metadata service, no error")
	}
}
