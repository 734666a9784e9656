package providers

import (
	"strings"
	"testing"
)

func TestEndpointsFromEnv(t *testing.T) {
	env := map[string]string{
		"GPUBROKER_GCP_BILLING_ENDPOINT":    "https://billing.proxy.internal",
		"GPUBROKER_AZURE_RETAIL_PRICES_URL": " http://127.0.0.1:9000/api/retail/prices ",
		"GPUBROKER_AWS_SPOT_ADVISOR_URL":    "https://mirror.internal/spot-advisor-data.json",
		"GPUBROKER_GCP_COMPUTE_ENDPOINT":    "https://from-env.example",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	e := Endpoints{GCPCompute: "https://from-file.example"}
	if err := e.FromEnv(lookup); err != nil {
		t.Fatal(err)
	}
	want := Endpoints{GCPCompute: "https://from-file.example", GCPBilling: "https://billing.proxy.internal",
		AzureRetailPrices: "http://127.0.0.1:9000/api/retail/prices", AWSSpotAdvisor: "https://mirror.internal/spot-advisor-data.json"}
	if e != want {
		t.Errorf("got %+v\nwant %+v", e, want)
	}
	for _, bad := range []string{"ftp://x", "proxy.internal", "https://user:pw@x.example", "://"} {
		env["GPUBROKER_AZURE_RESOURCE_MANAGER_ENDPOINT"] = bad
		var e Endpoints
		err := e.FromEnv(lookup)
		if err == nil || !strings.Contains(err.Error(), "GPUBROKER_AZURE_RESOURCE_MANAGER_ENDPOINT") || strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
	if len(EndpointVars) != len(EndpointKeys) || len(EndpointKeys) != len((&Endpoints{}).Fields()) {
		t.Error("endpoint tables out of step")
	}
}

func FuzzCheckEndpoint(f *testing.F) {
	f.Add("https://proxy.example:8443/x")
	f.Add("http://[::1]:80")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, s string) {
		if CheckEndpoint(s) == nil && !(strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") ||
			strings.HasPrefix(strings.ToLower(s), "http")) {
			t.Fatalf("accepted %q", s)
		}
	})
}
