package httpapi_test

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/broker/httpapi"
)

// TestOpenAPICoversRoutes keeps docs/openapi.yaml in step with the router:
// every served route is documented and every documented route is served.
func TestOpenAPICoversRoutes(t *testing.T) {
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                            `yaml:"openapi"`
		Paths   map[string]map[string]interface{} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m != "parameters" {
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	served := map[string]bool{"GET /metrics": true}
	for _, r := range httpapi.New(httpapi.Config{}).Routes() {
		served[r] = true
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for r := range documented {
		if !served[r] {
			t.Errorf("docs/openapi.yaml documents %s, which is not served", r)
		}
	}
}
